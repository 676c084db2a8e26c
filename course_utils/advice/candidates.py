"""The layouts the advisor tries: every mesh shape of the device count, with each layout that applies.

For a keras-hub backbone (axes "batch" and "model", as its `get_layout_map` names them), on each shape
(b, m) with b x m devices:
- "data parallel" on (n, 1): every weight whole, the batch split over all devices;
- "official map": the backbone's own `get_layout_map(mesh)` (on (n, 1) it is FSDP: its `model` entries
  split over one device);
- "official, batch kept split": the same, with the output of the embedding and of every block pinned to
  `batch` (lesson 08): XLA gathers the weights instead of the sequences, FSDP as ZeRO-3 describes it;
- "tensor parallel" (m > 1, b > 1): the official map without its `batch` entries;
- "corrected map", where `check_layout_map` finds rules that contradict each other (keras-hub #2827):
  the official map with the fix it writes;
- "experts over model" (m > 1), for a mixture of experts whose map leaves the experts whole.
For any other Keras model, maps derived from its graph (`layouts.derive.derive_layout_map`): on (n, 1) "data
parallel" and "FSDP"; with a model axis, "tensor parallel" (Megatron's pairs, the rest whole) and, with a batch
axis too, "FSDP + tensor parallel". A keras-hub backbone also gets its derived "FSDP" on (n, 1) and its "derived
map" wherever it has a model axis.
`layouts=` adds your own maps, each tried on every shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_utils.layouts.derive import derive_layout_map

MESH_AXES = ("batch", "model")
# the names of the advisor's own layouts: `layouts=` may not take them
BUILT_IN = ("data parallel", "official map", "official, batch kept split", "tensor parallel", "corrected map",
            "experts over model", "derived map", "FSDP", "FSDP + tensor parallel")


@dataclass(frozen=True)
class Candidate:
    """One layout on one mesh shape: a `LayoutMap` for `ModelParallel` with the batch over "batch"."""

    layout: str
    mesh_shape: tuple[int, int]
    layout_map: object

    def distribution(self):
        from keras import distribution

        return distribution.ModelParallel(layout_map=self.layout_map, batch_dim_name=MESH_AXES[0])


def mesh_shapes(devices: int) -> list[tuple[int, int]]:
    """Every (batch, model) shape of `devices` devices, the widest batch axis first."""
    return [(b, devices // b) for b in range(devices, 0, -1) if devices % b == 0]


def candidates(model, devices: int, layouts: dict | None = None, shapes=None) -> list[Candidate]:
    """The candidates for `model` (a keras-hub backbone, or any Keras model) on `devices` devices, in order:
    on every (batch, model) shape, or on `shapes` only."""
    from course_utils.mesh import make_mesh

    found = []
    for shape in shapes or mesh_shapes(devices):
        mesh = make_mesh(shape, MESH_AXES)
        maps = _backbone_maps(model, mesh) if hasattr(type(model), "get_layout_map") else _generic_maps(model, mesh)
        for name, rules in (layouts or {}).items():
            maps[name] = _user_map(name, rules, mesh)
        found += [Candidate(name, shape, layout_map) for name, layout_map in maps.items() if layout_map is not None]
    return found


def _backbone_maps(backbone, mesh) -> dict:
    from keras import distribution

    from course_utils.layouts.checks import check_layout_map
    from course_utils.memory.presets import without_axis

    batch, width = mesh.shape
    official = type(backbone).get_layout_map(mesh)
    maps = {"data parallel": distribution.LayoutMap(mesh) if width == 1 else None, "official map": official,
            "official, batch kept split": _kept_split(backbone, official),
            # lesson 11's layer-output rule: every block's output split along the sequence over "model"
            "official, sequence split": _kept_split(backbone, official, sequence=True) if width > 1 else None,
            # on (1, m) the official map splits nothing over "batch" (one device): tensor parallel is the same map
            "tensor parallel": without_axis(official, MESH_AXES[0]) if width > 1 and batch > 1 else None}
    clashes = check_layout_map(official, backbone).of("contradictory_roles") if width > 1 else []
    if clashes:
        corrected = _copy(official)
        for clash in clashes:
            del corrected[clash.key]
            corrected.update(clash.fix)
        maps["corrected map"] = corrected
    experts = [v.path for v in backbone.weights if "/experts/" in v.path and len(v.shape) == 3]
    if experts and width > 1 and all(official[p] is None for p in experts):
        with_experts = _copy(official)
        with_experts[".*/experts/.*"] = (MESH_AXES[1], None, None)
        maps["experts over model"] = with_experts
    # derived from the graph: FSDP on any dimension that divides (the official map splits the heads, which 12 or 20
    # heads cannot do over 8 devices), and the derived map with a model axis
    maps["FSDP" if width == 1 else "derived map"] = derive_layout_map(backbone, mesh, tensor_parallel=width > 1).layout_map
    return maps


def _kept_split(backbone, layout_map, *, sequence: bool = False):
    """`layout_map` with the embedding's and every block's output pinned to the batch axis (lesson 08's rules),
    and with `sequence` their sequence split over the model axis too (lesson 11's sequence parallelism)."""
    kept = _copy(layout_map)
    blocks = {re.sub(r"\d+$", "", layer.name) for layer in getattr(backbone, "transformer_layers", [])}
    output = (MESH_AXES[0], MESH_AXES[1] if sequence else None, None)
    kept["token_embedding/output"] = output
    for prefix in blocks:
        kept[rf"{re.escape(prefix)}\d+/output"] = output
    return kept


def _generic_maps(model, mesh) -> dict:
    from keras import distribution

    batch, width = mesh.shape
    if width == 1:
        return {"data parallel": distribution.LayoutMap(mesh),
                "FSDP": derive_layout_map(model, mesh, tensor_parallel=False).layout_map}
    maps = {"tensor parallel": derive_layout_map(model, mesh, fsdp=False).layout_map}
    if batch > 1:
        maps["FSDP + tensor parallel"] = derive_layout_map(model, mesh).layout_map
    return maps


def _user_map(name: str, rules, mesh):
    from keras import distribution

    from course_utils.layouts.layout_map import make_layout_map

    if isinstance(rules, dict):
        return make_layout_map(mesh, rules)
    if callable(rules):
        layout_map = rules(mesh)
        if isinstance(layout_map, distribution.LayoutMap):
            return layout_map
        raise TypeError(f"layouts[{name!r}] is a function mesh -> keras.distribution.LayoutMap; it returned a "
                        f"{type(layout_map).__name__}.")
    raise TypeError(f"layouts[{name!r}] is a dict of rules {{key: axes}} naming {MESH_AXES} or a function "
                    f"mesh -> LayoutMap. Received a {type(rules).__name__}.")


def _copy(layout_map):
    from course_utils.layouts.layout_map import make_layout_map

    return make_layout_map(layout_map.device_mesh, {key: tuple(layout.axes) for key, layout in layout_map.items()})
