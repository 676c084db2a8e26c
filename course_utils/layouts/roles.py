"""The roles a LayoutMap gives weights that work together, checked on the model: what keras-hub's tracker found.

`check_layout_map` runs these after its own checks; each finding carries its fix as rules (`Problem.fix`).

- `contradictions`: a projection (a Keras `EinsumDense`) makes an activation that another projection of
  the same layer takes, and their two kernels split one dimension of it over different mesh axes. The
  map builds, but XLA reshards the activation between them in every step (keras-hub issue #2827: Llama's
  and Qwen's query/key/value put the heads on "batch", attention_output on "model"). Which projection
  feeds which is JAX's answer (one abstract trace), not a guess from layer names.
- `unanchored_keys`: a key whose ".*" also takes the start of a longer layer name, so that it lays out a
  weight of another role (QwenMoe's dense-FFN gate key, which also matches the MoE router).
- `blame_indivisible`: a dimension that does not divide, blamed on its key and mesh axis, the key/value
  heads named, with a fix that keeps the key's other weights (the query) split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from course_utils.keras_internals import all_layers
from course_utils.layout_axes import indivisible, names_in
from course_utils.layouts.problems import Problem, key_matches
from course_utils.layouts.layer_outputs import input_spec, symbolic_inputs
from course_utils.layouts.layout_map import UNMATCHED, matched_rule

@dataclass(frozen=True)
class Projection:
    """An `EinsumDense` layer: its kernel, and its equation `inputs,weights->outputs`, a letter a dimension."""

    layer: str
    kernel: str
    shape: tuple[int, ...]
    inputs: str
    weights: str
    outputs: str

    @property
    def name(self) -> str:
        return self.layer.rpartition("/")[2]

    @property
    def parent(self) -> str:
        return self.layer.rpartition("/")[0]


@dataclass(frozen=True)
class Clash:
    """Dimension `position` of the activation `producer` makes and `consumer` takes, split two ways."""

    producer: Projection
    consumer: Projection
    position: int
    produced: tuple[str, ...]  # the mesh axes the producer's kernel gives that dimension
    taken: tuple[str, ...]  # the mesh axes the consumer's kernel gives it


def projections(model) -> list[Projection]:
    """Every `EinsumDense` of `model` with a two-operand equation ("bqm,muh->bquh"), in the model's order."""
    import keras

    found = []
    for layer in all_layers(model):
        equation = getattr(layer, "equation", "")
        if isinstance(layer, keras.layers.EinsumDense) and "..." not in equation and equation.count(",") == 1:
            operands, outputs = equation.split("->")
            inputs, weights = operands.split(",")
            found.append(Projection(layer.path, layer.kernel.path, tuple(layer.kernel.shape), inputs, weights, outputs))
    order = {v.path: i for i, v in enumerate(model.variables)}
    return sorted(found, key=lambda p: order[p.kernel])  # query before key and value


def contradictions(layout_map, model, inputs=None) -> list[Problem]:
    """A warning for each pair of keys whose kernels split one activation's dimension over different axes.

    Only pairs JAX's trace connects count; a model that cannot be traced (no symbolic inputs and no
    `inputs`) gives none.
    """
    projs = projections(model)
    clashes = list(_clashes(projs, layout_map))
    if clashes:
        feeds = _feeds(model, projs, inputs)
        clashes = [c for c in clashes if (c.producer.kernel, c.consumer.kernel) in feeds]
    groups: dict[tuple, list[Clash]] = {}
    for clash in clashes:
        groups.setdefault((matched_rule(layout_map, clash.producer.kernel),
                           matched_rule(layout_map, clash.consumer.kernel)), []).append(clash)
    return [_contradiction(keys, group, layout_map, model) for keys, group in groups.items()]


def _clashes(projs, layout_map):
    for producer in projs:
        for consumer in projs:
            if consumer is producer or consumer.parent != producer.parent or len(producer.outputs) != len(consumer.inputs):
                continue
            made, taken = _axes(layout_map, producer), _axes(layout_map, consumer)
            for position, (mine, theirs) in enumerate(zip(producer.outputs, consumer.inputs)):
                if made and taken and mine in producer.weights and theirs in consumer.weights:
                    a = names_in(made[producer.weights.index(mine)])
                    b = names_in(taken[consumer.weights.index(theirs)])
                    if a and b and a != b:
                        yield Clash(producer, consumer, position, a, b)


def _axes(layout_map, proj: Projection) -> tuple | None:
    """The kernel's layout, an entry a dimension (None: no rule, or two keys, an error of its own)."""
    key = _rule_of(layout_map, proj.kernel)
    return None if key in (None, UNMATCHED) else _padded(layout_map, key, proj.shape)


def _feeds(model, projs, inputs) -> set[tuple[str, str]]:
    """(producer kernel, consumer kernel): the producer's result flows into the consumer's input.

    JAX decides: one abstract trace of the model (`jax.make_jaxpr`, nothing computed), followed forward
    from the operation that takes each kernel.
    """
    import jax

    try:
        specs = jax.tree.map(input_spec, inputs if inputs is not None else symbolic_inputs(model))
    except ValueError:  # no symbolic inputs: nothing to trace with
        return set()
    return _trace_feeds(model, projs, specs)


def _trace_feeds(model, projs, specs) -> set[tuple[str, str]]:
    import jax
    from keras import StatelessScope

    def call(values, x):
        with StatelessScope(state_mapping=list(zip(model.variables, values))):
            return model(x, training=False)

    weights = [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in model.variables]
    jaxpr = jax.make_jaxpr(call)(weights, specs).jaxpr
    paths = [v.path for v in model.variables]
    kernel_of = {jaxpr.invars[paths.index(p.kernel)]: p.kernel for p in projs}  # values made from a kernel alone
    reach: dict = {}  # value -> the kernels whose projection's result it depends on
    feeds = set()
    for eqn in jaxpr.eqns:
        ins = [v for v in eqn.invars if not hasattr(v, "val")]  # literals aside
        kernels = {kernel_of[v] for v in ins if v in kernel_of}
        activations = [v for v in ins if v not in kernel_of]
        if kernels and not activations:  # a cast of the kernel: still the kernel
            kernel_of.update({v: next(iter(kernels)) for v in eqn.outvars})
            continue
        upstream = frozenset().union(*(reach.get(v, ()) for v in activations))
        feeds |= {(p, k) for k in kernels for p in upstream}
        reach.update({v: upstream | kernels for v in eqn.outvars})
    return feeds


def _contradiction(keys, clashes: list[Clash], layout_map, model) -> Problem:
    """The warning for one pair of keys: the side that puts the data axis on the activation follows the other."""
    first, data_axis = clashes[0], layout_map.device_mesh.axis_names[0]
    follow = data_axis in first.taken and data_axis not in first.produced  # the consumer follows the producer
    changed: dict[str, tuple] = {}
    for clash in clashes:
        proj, target = (clash.consumer, clash.produced) if follow else (clash.producer, clash.taken)
        dim = proj.weights.index((proj.inputs if follow else proj.outputs)[clash.position])
        axes = _swap(changed.get(proj.kernel) or _axes(layout_map, proj), dim, target)
        changed[proj.kernel] = _divisible(proj.shape, axes, layout_map)
    key, kept = (keys[1], keys[0]) if follow else keys
    rules = _rules(key, changed, layout_map, model)
    producer = first.producer
    letter = producer.outputs[first.position]
    size = producer.shape[producer.weights.index(letter)]
    layers = sorted({c.producer.parent for c in clashes})
    makers = ", ".join(dict.fromkeys(c.producer.name for c in clashes))
    return Problem("contradictory_roles", key, producer.kernel, (
        f"Keys {keys[0]!r} and {keys[1]!r} give one activation opposite roles: {makers} make(s) its dimension "
        f"{first.position} ('{letter}' of '{producer.outputs}', size {size}{_heads(model, producer.parent, size)}) "
        f"split over {_named(first.produced, data_axis)}, and {first.consumer.name}, which takes it, splits it over "
        f"{_named(first.taken, data_axis)} (in {len(layers)} layer(s), e.g. {layers[0]!r}). The map builds, but in "
        f"every step XLA reshards that activation between the two (all-to-alls, collective-permutes). Rules that "
        f"agree, both over {_named(first.produced if follow else first.taken, data_axis)}: "
        f"{({**rules, kept: _axes_of(layout_map, kept)})!r}. In place: {_replacing(key, rules)}"),
        severity="warning", fix=rules)


def _swap(axes: tuple, dim: int, target: tuple[str, ...]) -> tuple:
    """`axes` with `target` on dimension `dim`; the dimension that held `target` takes what `dim` held."""
    new = [axes[dim] if names_in(entry) == target else entry for entry in axes]
    new[dim] = target[0] if len(target) == 1 else target
    return tuple(new)


def _divisible(shape, axes, layout_map) -> tuple:
    """`axes` with every dimension that would not divide left whole (None)."""
    mesh = layout_map.device_mesh
    bad = {dim for dim, *_ in indivisible(shape, axes, dict(zip(mesh.axis_names, mesh.shape)))}
    return tuple(None if dim in bad else entry for dim, entry in enumerate(axes))


def _rules(key: str, changed: dict[str, tuple], layout_map, model) -> dict[str, tuple]:
    """Rules that give each weight `key` matches its axes in `changed` (the others keep theirs): `key`
    itself when all agree, else a narrowed key for each set of layers that share axes."""
    shapes = {v.path: tuple(v.shape) for v in model.variables if _rule_of(layout_map, v.path) == key}
    groups: dict[tuple, list[str]] = {}
    for path, shape in shapes.items():
        groups.setdefault(changed.get(path) or _padded(layout_map, key, shape), []).append(path)
    if len(groups) == 1:
        return {key: next(iter(groups))}
    return {_narrowed(key, members, list(shapes)) or f"<a key for {_names(members)} alone>": axes
            for axes, members in groups.items()}


def _narrowed(key: str, wanted: list[str], among: list[str]) -> str | None:
    """`key` narrowed to the layers of `wanted`, in the first of these forms Keras's lookup says matches
    `wanted` alone: an alternation cut down ("(key|value)"), anchored, a name completed, a look-ahead."""
    names = list(dict.fromkeys(_role(p) for p in wanted))
    candidates = [_anchored(key) or key]
    for group in re.finditer(r"\(([\w|]+)\)", key):
        kept = [o for o in group.group(1).split("|") if o in names]
        if len(kept) == len(names):
            candidates.insert(0, key[:group.start()] + (kept[0] if len(kept) == 1 else f"({'|'.join(kept)})")
                              + key[group.end():])
    name = names[0]
    candidates += [key.replace(f".*{name[i:]}", f".*{name}", 1) for i in range(1, len(name))
                   if len(names) == 1 and f".*{name[i:]}" in key][:1]
    candidates.append(f"(?=.*/({'|'.join(names)})/)" + key)
    return next((c for c in candidates if [p for p in among if key_matches(c, p)] == wanted), None)


def unanchored_keys(layout_map, variables) -> list[Problem]:
    """A warning for each key whose ".*" also takes the start of a longer layer name than the one it spells."""
    warnings = []
    for key in layout_map:
        anchored = _anchored(key)
        matched = [v for v in variables if anchored and key_matches(key, v.path)]
        cut = [v for v in matched if not key_matches(anchored, v.path)]
        if cut:
            kept = [v for v in matched if key_matches(anchored, v.path)]
            warnings.append(_unanchored(key, anchored, kept, cut, tuple(layout_map[key].axes)))
    return warnings


def _anchored(key: str) -> str | None:
    """`key` with "/" after each ".*" before a whole name (one the key ends, or follows with "." or "/"):
    "t.*feedforward_gate_dense.kernel" -> "t.*/feedforward_gate_dense.kernel". A ".*" that opens the key
    may also take nothing, for a layer at the top of the model: ".*attn/kernel" -> "(.*/)?attn/kernel".
    None when the key spells no whole name after a ".*" (".*gate.*kernel" means any layer with "gate" in its name)."""
    anchored = re.sub(r"\.\*(?=(\([\w|]+\)|[A-Za-z]\w*)($|[/)|]|\.(?![*+?])))",
                      lambda m: "(.*/)?" if m.start() == 0 else ".*/", key)
    return anchored if anchored != key else None


def _unanchored(key, anchored, kept, cut, axes) -> Problem:
    others = ", ".join(sorted({_role(v.path) for v in cut}))
    fix = {anchored: axes} if kept else {}
    meant = (f"Anchored with '/' before the name, {anchored!r} matches the weights it names alone, "
             f"{_roles(kept)}" if kept else f"Anchored with '/' before the name, {anchored!r} matches nothing in "
             f"this model: the layer the key names is not here")
    return Problem("unanchored_key", key, cut[0].path, (
        f"Key {key!r} gives {axes} to weights of another role, {_roles(cut)}: their layer's name only ends with "
        f"the name the key spells (its '.*' takes the start of it). {meant}. In place: {_replacing(key, fix)}; "
        f"give {others} a key of its own if it should be split."), severity="warning", fix=fix)


def blame_indivisible(problems: list[Problem], layout_map, model) -> list[Problem]:
    """`problems`, each indivisible dimension of a variable blamed on its key and mesh axis, with the
    key/value heads named where they are what does not divide, and a fix that keeps the key's other weights split."""
    shapes = {v.path: tuple(v.shape) for v in model.variables}
    mesh = layout_map.device_mesh
    blamed = []
    for problem in problems:
        found = problem.kind == "bad_layout" and problem.path in shapes and indivisible(
            shapes[problem.path], _padded(layout_map, problem.key, shapes[problem.path]),
            dict(zip(mesh.axis_names, mesh.shape)))
        blamed.append(_blamed(problem, found, shapes, layout_map, model) if found else problem)
    return blamed


def _blamed(problem, found, shapes, layout_map, model) -> Problem:
    attention = problem.path.rpartition("/")[0].rpartition("/")[0]
    what = " and ".join(f"{'+'.join(map(repr, names))} ({parts} devices) on its dimension {dim} (size {size}"
                        f"{_heads(model, attention, size)})" for dim, size, names, parts in found)
    changed = {p: _divisible(shape, _padded(layout_map, problem.key, shape), layout_map)
               for p, shape in shapes.items() if _rule_of(layout_map, p) == problem.key}
    rules = _rules(problem.key, changed, layout_map, model)
    moved = [p for p, axes in changed.items() if axes != _padded(layout_map, problem.key, shapes[p])]
    kept = [p for p in changed if p not in moved]
    how = (f"To keep {_names(kept)} split, give {_names(moved)} a key of their own that leaves that dimension whole"
           if kept else "Leave that dimension whole")
    return replace(problem, fix=rules, message=(
        f"{problem.message} That key puts {what}. {how}: {_replacing(problem.key, rules)}"))


def _heads(model, layer_path: str, size: int) -> str:
    """": the key/value heads, num_key_value_heads=2 of LlamaAttention ..." when `size` counts the heads of
    the attention layer at `layer_path` (keras-hub's attribute names), else ""."""
    attention = next((layer for layer in all_layers(model) if layer.path == layer_path), None)
    kv, query = (getattr(attention, n, getattr(attention, f"_{n}", None))
                 for n in ("num_key_value_heads", "num_query_heads"))
    if size == kv:
        fewer = f", fewer than its {query} query heads" if query and query != kv else ""
        return f": the key/value heads, num_key_value_heads={kv} of {type(attention).__name__} {layer_path!r}{fewer}"
    return f": the query heads, num_query_heads={query}" if size == query else ""


def _replacing(key: str, rules: dict) -> str:
    return f"del layout_map[{key!r}]" + (f"; layout_map.update({rules!r})" if rules else "")


def _rule_of(layout_map, path: str) -> str | None:
    try:
        return matched_rule(layout_map, path)
    except ValueError:  # two keys: an error of its own
        return None


def _axes_of(layout_map, key: str) -> tuple:
    return tuple(layout_map[key].axes)


def _padded(layout_map, key: str, shape) -> tuple:
    axes = _axes_of(layout_map, key)
    return axes + (None,) * (len(shape) - len(axes))


def _role(path: str) -> str:
    """The name of the layer a weight belongs to (the part of its path before the weight's own name)."""
    return path.split("/")[-2] if "/" in path else path


def _names(paths) -> str:
    return ", ".join(dict.fromkeys(_role(p) for p in paths))


def _roles(variables) -> str:
    """"sparse_feedforward_gate_dense/kernel (64, 4) in 2 layer(s)" for each role among `variables`."""
    counts: dict[tuple, int] = {}
    for v in variables:
        role = (f"{_role(v.path)}/{v.path.rpartition('/')[2]}", tuple(v.shape))
        counts[role] = counts.get(role, 0) + 1
    return ", ".join(f"{name} {shape} in {n} layer(s)" for (name, shape), n in counts.items())


def _named(axes: tuple[str, ...], data_axis: str) -> str:
    text = "+".join(repr(a) for a in axes)
    return f"{text} (the data axis)" if data_axis in axes else text
