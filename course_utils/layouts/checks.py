"""Checking a LayoutMap against a model before training: every key, path and dimension.

Keras's own lookup (`layout_map[path]`, `re.fullmatch`) decides what
matches; JAX's rules decide what divides (`placements.layout_errors`).
A wrong rule raises nothing in Keras, the weight just stays replicated:
`check_layout_map` says so, with the fix. A map that is sound but leaves a
large weight whole on every device is not wrong, but it is worth knowing
before renting the devices: those come back as warnings (`Checked.warnings`).
"""

from __future__ import annotations

import difflib
import math
import re

from course_utils.keras_internals import all_layers
from course_utils.layouts.layer_outputs import layer_outputs
from course_utils.guards import require_built
from course_utils.layouts.layout_map import matched_rule
from course_utils.layout_axes import layout_errors
from course_utils.layouts.anchors import unanchored_keys
from course_utils.layouts.blame import blame_indivisible
from course_utils.layouts.roles import contradictions
from course_utils.layouts.problems import Checked, LayoutMapError, Problem, key_matches


LARGE_SHARE = 0.01  # a matrix of at least this share of the model's parameters, left whole, is warned about


def check_layout_map(layout_map, model, *, strict: bool = False, inputs=None) -> list[Problem]:
    """Finds what would go wrong with a LayoutMap before training starts.

    Uses Keras's own lookup (`layout_map[path]`, `re.fullmatch`) on every
    variable path and on every layer-output path Keras looks up during a call
    ("<layer path>/output", weightless layers included; see `layer_outputs`).
    Finds: keys that are not valid regular expressions; keys that match no
    path; paths matched by two keys; axis names not in the mesh; layouts
    with more entries than the tensor has dimensions (fewer is valid: JAX
    pads with None); variable dimensions not divisible by their mesh axes.
    Output sizes depend on the batch, so outputs are checked for rank and
    axis names only, unless `inputs` gives a real batch.

    Args:
        layout_map: A `keras.distribution.LayoutMap`.
        model: The built Keras model the map is for.
        strict: Raise `LayoutMapError` instead of returning problems.
        inputs: Optional inputs for one call (a batch or its shapes); by
            default the model's symbolic inputs.

    Returns:
        A `Checked`: the list of `Problem`s (empty when the map is sound), and
        `.warnings`: every weight of at least 1 % of the model's parameters
        that the map leaves whole on every device, with its bytes per device
        (none for a map without rules: it means to replicate).

    Example:
        >>> check_layout_map(GemmaBackbone.get_layout_map(mesh), backbone)
        []
    """
    if isinstance(layout_map, dict) or not hasattr(layout_map, "device_mesh"):
        raise TypeError(
            f"check_layout_map needs a keras.distribution.LayoutMap. Received: {type(layout_map).__name__}"
            f"{' ' + repr(list(layout_map)[:3]) if isinstance(layout_map, dict) else ''}. Build one with "
            f"make_layout_map(mesh, rules) or LayoutMap(mesh) and layout_map[key] = axes."
        )
    require_built(model, "check_layout_map")
    variables = list(model.variables)
    problems, clean = _valid_keys(layout_map)
    axis_sizes = dict(zip(layout_map.device_mesh.axis_names, layout_map.device_mesh.shape))
    paths = [v.path for v in variables]
    outputs = _outputs_to_check(clean, model, paths, inputs)
    targets = paths + [o.path for o in outputs or ()]
    problems += [_unmatched_key(key, variables, outputs is None) for key in clean
                 if not any(key_matches(key, path) for path in targets)]
    for variable in variables:
        problems += _path_problems(clean, variable.path, [tuple(variable.shape)], axis_sizes, "variable")
    seen = set()
    for output in outputs or ():
        if output.path not in seen:
            seen.add(output.path)
            shapes = [s if inputs is not None else (0,) * len(s) for s in output.shapes]
            problems += _path_problems(clean, output.path, shapes, axis_sizes, "output")
    problems = blame_indivisible(problems, clean, model)
    if strict and problems:
        raise LayoutMapError(problems)
    warnings = (contradictions(clean, model, inputs) + unanchored_keys(clean, variables)
                + _large_replicated(clean, variables, layout_map.device_mesh))
    return Checked(problems, warnings)


def _large_replicated(layout_map, variables, mesh) -> list[Problem]:
    """A warning for every matrix (or larger) of at least `LARGE_SHARE` of the parameters that no rule splits.

    Vectors (biases, norm scales) are never warned about: one holds as many numbers as a single row
    of the matrix beside it, so splitting it saves next to nothing, however small the model.
    """
    import jax

    devices = math.prod(mesh.shape)
    if devices < 2 or not list(layout_map):
        return []
    sizes = {v.path: math.prod(v.shape) for v in variables}
    total = sum(sizes.values())
    warnings = []
    for variable in variables:
        try:
            layout = layout_map[variable.path]
        except ValueError:  # two keys: an error of its own
            continue
        if (len(variable.shape) < 2 or sizes[variable.path] < LARGE_SHARE * total
                or (layout is not None and any(layout.axes))):
            continue
        size = sizes[variable.path] * jax.dtypes.canonicalize_dtype(variable.dtype).itemsize
        warnings.append(Problem("large_replicated", None, variable.path, (
            f"{variable.path} {tuple(variable.shape)}, {sizes[variable.path] / total:.0%} of the parameters, "
            f"{'matches no rule' if layout is None else 'has an all-None rule'} and is whole on all {devices} "
            f"devices: {_bytes(size)} on each (its gradient as much again, Adam's moments twice)"),
            severity="warning"))
    return warnings


def _bytes(n: int) -> str:
    return f"{n:,} bytes" if n < 2**30 else f"{n:,} bytes ({n / 2**30:.2f} GiB)"


def _valid_keys(layout_map):
    """Problems with keys Keras cannot use, and a LayoutMap of the keys it can."""
    from keras.distribution import LayoutMap

    problems, clean = [], LayoutMap(layout_map.device_mesh)
    for key in layout_map:
        if not isinstance(key, str):
            problems.append(Problem("bad_key", str(key), None, (
                f"Key {key!r} is a {type(key).__name__}; LayoutMap keys are regular expressions (str) "
                f"matched against whole paths. Write it as a string, e.g. '.*d1/kernel'.")))
            continue
        try:
            re.compile(key)
        except re.error as error:
            problems.append(Problem("bad_key", key, None, (
                f"Key {key!r} is not a valid regular expression ({error}); Keras's lookup would raise "
                f"re.error for every path. Escape special characters (re.escape) or fix the pattern.")))
            continue
        clean[key] = layout_map[key]
    return problems, clean


def _outputs_to_check(layout_map, model, paths, inputs):
    """The looked-up output paths, traced only when some key may name an output (None: unknown).

    A key that matches no variable, or matches "<layer path>/output" of a
    built layer, needs the trace; maps of variable keys only (the usual
    case) skip it.
    """
    candidates = [f"{layer.path}/output" for layer in all_layers(model) if layer.path] + [f"{model.name}/output"]
    needed = inputs is not None or any(
        not any(key_matches(key, p) for p in paths) or any(key_matches(key, c) for c in candidates)
        for key in layout_map)
    if not needed:
        return []
    try:
        return layer_outputs(model, inputs)
    except ValueError:  # no symbolic inputs to call the model with
        return None


def _path_problems(layout_map, path, shapes, axis_sizes, what) -> list[Problem]:
    try:
        layout = layout_map[path]  # Keras's own lookup
    except ValueError:
        keys = [k for k in layout_map if key_matches(k, path)]
        return [Problem("two_keys", None, path, (
            f"The {what} path {path!r} is matched by {len(keys)} keys {keys}; Keras refuses to choose. "
            f"Make the keys specific enough that each path matches at most one."))]
    if layout is None:
        return []
    key = matched_rule(layout_map, path)
    found = []
    for shape in shapes:
        for error in layout_errors(shape, layout.axes, axis_sizes):
            size = f"shape {shape}" if any(shape) or not shape else f"rank {len(shape)}"
            found.append(Problem("bad_layout", key, path, (
                f"Key {key!r} gives the {what} {path!r} ({size}) the layout {tuple(layout.axes)}: {error}")))
    return found


def _unmatched_key(key: str, variables, outputs_unknown: bool = False) -> Problem:
    paths = [v.path for v in variables]
    near = [path for path in paths if _searches(key, path)]
    spelled = _nearest(key, paths)
    if near:
        hint = (f"It appears inside {near[:3]}, but keys must match the whole path "
                f"(re.fullmatch). Write '.*{key}' or the full path {near[0]!r}.")
    elif spelled:
        hint = f"The nearest path is {spelled!r}: check the key's spelling against it."
    else:
        hint = (f"No path of this model is spelled like it: the model has no such part (a map written for "
                f"several variants of a model can name parts that some lack). Its paths begin {paths[:4]}.")
    what = "variable (layer outputs were not traced: the model has no symbolic inputs)" if outputs_unknown \
        else "variable and no layer output"
    return Problem("unmatched_key", key, None,
                   f"Key {key!r} matches no {what}, so its layout is never used and "
                   f"those weights stay replicated. {hint}")


def _nearest(key: str, paths: list[str]) -> str | None:
    """The path spelled most like `key` (None: none is close). A key is compared with as many of a
    path's last parts as it has, its regular-expression syntax aside."""
    letters = lambda text: re.sub(r"[^a-z0-9_/]", "", text.lower())
    core = letters(re.sub(r"^\.\*/?|\.\*", "/", key)).strip("/")
    parts = core.count("/") + 1
    scored = [(difflib.SequenceMatcher(None, core, letters("/".join(p.split("/")[-parts:]))).ratio(), p)
              for p in paths]
    best = max(scored, default=(0.0, None), key=lambda pair: pair[0])
    return best[1] if best[0] >= 0.8 else None


def _searches(key: str, path: str) -> bool:
    try:
        return re.search(key, path) is not None
    except re.error:
        return False
