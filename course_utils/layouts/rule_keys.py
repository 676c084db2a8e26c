"""The keys the map checks write into their fixes: which rule a weight matched, its axes padded to its shape, and
a key narrowed to the layers that share axes (regex-key synthesis shared by `roles`, `anchors` and `blame`)."""

from __future__ import annotations

import re

from course_utils.keras_internals import all_layers
from course_utils.layout_axes import indivisible
from course_utils.layouts.problems import key_matches
from course_utils.layouts.layout_map import matched_rule


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

def _anchored(key: str) -> str | None:
    """`key` with "/" after each ".*" before a whole name (one the key ends, or follows with "." or "/"):
    "t.*feedforward_gate_dense.kernel" -> "t.*/feedforward_gate_dense.kernel". A ".*" that opens the key
    may also take nothing, for a layer at the top of the model: ".*attn/kernel" -> "(.*/)?attn/kernel".
    None when the key spells no whole name after a ".*" (".*gate.*kernel" means any layer with "gate" in its name)."""
    anchored = re.sub(r"\.\*(?=(\([\w|]+\)|[A-Za-z]\w*)($|[/)|]|\.(?![*+?])))",
                      lambda m: "(.*/)?" if m.start() == 0 else ".*/", key)
    return anchored if anchored != key else None

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
