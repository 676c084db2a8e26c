"""The layouts the advisor tries: every mesh shape of the device count, with each layout that applies.

For a keras-hub backbone with an official map (axes "batch" and "model", as its `get_layout_map` names them),
on each shape (b, m) with b x m devices:
- "data parallel" on (n, 1): every weight whole, the batch split over all devices;
- "official map": the backbone's own `get_layout_map(mesh)` (on (n, 1) it is FSDP: its `model` entries
  split over one device);
- "official, batch kept split": the same, with the output of the embedding and of every block pinned to
  `batch` (lesson 08): XLA gathers the weights instead of the sequences, FSDP as ZeRO-3 describes it;
- "tensor parallel" (m > 1, b > 1): the official map without its `batch` entries;
- "corrected map", where `check_layout_map` finds rules that contradict each other (keras-hub #2827):
  the official map with the fix it writes;
- "experts over model" (m > 1), for a mixture of experts whose map leaves the experts whole.
- "ZeRO-2" on (n, 1): every weight whole, Adam's state split over the batch axis (`layouts.zero`): each device sums
  its slice of the gradients, updates its slice and gathers the weights again.
For any other Keras model (a keras-hub language model without `get_layout_map`, GPT-2, included), maps derived
from its graph (`layouts.derive.derive_layout_map`): on (n, 1) "data parallel", "ZeRO-2" and "FSDP"; with a
model axis, "tensor parallel" (Megatron's pairs, the rest whole) and, with a batch axis too, "FSDP + tensor
parallel". A keras-hub backbone also gets its derived "FSDP" on (n, 1) and its "derived map" wherever it has a
model axis.
`layouts=` adds your own maps, each tried on every shape.

On several nodes, meshes of three axes too, (replica, batch, model) = (nodes, b, m): HSDP, each layout above that
splits weights over "batch" split so inside a node and whole on every node, the batch split over replica x batch
(`layouts.hybrid`); written "2 x (4, 1)": two replicas of a (4, 1) mesh. Data parallel and tensor parallel alone
split nothing over "batch": on three axes they are the two-axis candidates again, and are not repeated (nor is
ZeRO-2).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from course_utils.layouts.derive import derive_layout_map
from course_utils.layouts.hybrid import REPLICA_AXIS, hybrid_parallel, over_replicas
from course_utils.layouts.zero import zero_parallel

MESH_AXES = ("batch", "model")
ZERO = "ZeRO-2"  # data parallel with the optimizer's state split over the batch axis (layouts.zero)
HYBRID_AXES = (REPLICA_AXIS, *MESH_AXES)  # HSDP: the batch over replica x batch, weights split within a replica
# the names of the advisor's own layouts: `layouts=` may not take them
BUILT_IN = ("data parallel", "official map", "official, batch kept split", "tensor parallel", "corrected map",
            "experts over model", "derived map", "FSDP", "FSDP + tensor parallel", ZERO)


@dataclass(frozen=True)
class Candidate:
    """One layout on one mesh shape: a `LayoutMap` for `ModelParallel` with the batch over "batch" (and over
    "replica" too on a (replica, batch, model) shape)."""

    layout: str
    mesh_shape: tuple[int, ...]
    layout_map: object

    @property
    def axes(self) -> tuple[str, ...]:
        return axes_of(self.mesh_shape)

    @property
    def zero(self) -> bool:
        """Whether the optimizer's state is split over the batch axis (ZeRO-2), the weights whole."""
        return self.layout == ZERO

    @property
    def batch_split(self) -> int:
        """Devices the batch is split over: all but the model axis's."""
        return batch_split(self.mesh_shape)

    @property
    def fsdp_split(self) -> int:
        """Devices the weights' FSDP dimension is split over: the batch axis's (a replica's, on three axes)."""
        return self.mesh_shape[-2]

    def distribution(self):
        from keras import distribution

        if len(self.mesh_shape) == 3:
            return hybrid_parallel(self.layout_map, HYBRID_AXES[:2])
        if self.zero:
            return zero_parallel(self.layout_map, MESH_AXES[0])
        return distribution.ModelParallel(layout_map=self.layout_map, batch_dim_name=MESH_AXES[0])


def axes_of(mesh_shape) -> tuple[str, ...]:
    """The advisor's axis names for a mesh shape: (batch, model), or (replica, batch, model)."""
    return HYBRID_AXES if len(mesh_shape) == 3 else MESH_AXES


def batch_split(mesh_shape) -> int:
    """Devices a mesh shape splits the batch over: every axis but the model axis."""
    return math.prod(mesh_shape[:-1])


def shape_name(mesh_shape) -> str:
    """"(2, 4)", or "2 x (4, 1)" for two replicas of a (4, 1) mesh."""
    shape = tuple(mesh_shape)
    return f"{shape[0]} x {shape[1:]}" if len(shape) == 3 else str(shape)


def mesh_shapes(devices: int, nodes: int = 1) -> list[tuple[int, ...]]:
    """Every (batch, model) shape of `devices` devices, the widest batch axis first; on several `nodes`, then
    every (nodes, batch, model) shape whose batch axis splits each node's devices (HSDP)."""
    shapes = [(b, devices // b) for b in range(devices, 0, -1) if devices % b == 0]
    if nodes > 1 and devices % nodes == 0:
        shapes += [(nodes, b, m) for b, m in mesh_shapes(devices // nodes) if b > 1]
    return shapes


def candidates(model, devices: int, layouts: dict | None = None, shapes=None) -> list[Candidate]:
    """The candidates for `model` (a keras-hub backbone, or any Keras model) on `devices` devices, in order:
    on every (batch, model) shape, or on `shapes` only."""
    from course_utils.devices import course_devices
    from course_utils.mesh import make_mesh

    found = []
    for shape in shapes or mesh_shapes(devices):
        hybrid = len(shape) == 3
        # the maps are written for one replica's (batch, model) mesh: its devices
        mesh = make_mesh(shape[-2:], MESH_AXES, devices=course_devices()[:shape[-2] * shape[-1]]) if hybrid else \
            make_mesh(shape, MESH_AXES)
        maps = _backbone_maps(model, mesh) if hasattr(type(model), "get_layout_map") else _generic_maps(model, mesh)
        for name, rules in (layouts or {}).items():
            maps[name] = _user_map(name, rules, mesh)
        if hybrid:  # the same rules, whole on every replica; what splits nothing over "batch" is a 2-axis shape's
            whole = make_mesh(shape, HYBRID_AXES)
            maps = {name: over_replicas(m, whole) for name, m in maps.items()
                    if m is not None and (name in (layouts or {}) or _splits_over(m, MESH_AXES[0]))}
        found += [Candidate(name, tuple(shape), layout_map) for name, layout_map in maps.items()
                  if layout_map is not None]
    return found


def _splits_over(layout_map, axis: str) -> bool:
    from course_utils.layout_axes import axes_used

    return any(axis in axes_used(layout.axes) for key, layout in layout_map.items() if not key.endswith("/output"))


def _backbone_maps(backbone, mesh) -> dict:
    from keras import distribution

    from course_utils.layouts.checks import check_layout_map
    from course_utils.memory.presets import without_axis

    batch, width = mesh.shape
    official = type(backbone).get_layout_map(mesh)
    maps = {"data parallel": distribution.LayoutMap(mesh) if width == 1 else None,
            ZERO: distribution.LayoutMap(mesh) if width == 1 and batch > 1 else None, "official map": official,
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
                ZERO: distribution.LayoutMap(mesh) if batch > 1 else None,
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
