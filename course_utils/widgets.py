"""Interactive explorers: change a mesh, a layout or a preset and watch the shards move.

Each explorer is an `ipywidgets.VBox` holding its controls, a status line and
a PNG drawing. Underneath are real Keras objects (`make_mesh`, `TensorLayout`,
`LayoutMap`, `ModelParallel`) and the course's pure data (`Placement`,
`LayoutReport`); the drawings come from `course_utils.viz`. Set a control's
`.value` in code and the explorer updates exactly as if clicked. Import this
module only where widgets are wanted: nothing else in the package imports it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets

from course_utils._explorer import AXIS_NAMES, Explorer, device_count, render_png, shape_options, squarest
from course_utils._model_explorer import ModelExplorer
from course_utils.mesh import describe_mesh, make_mesh, mesh_shapes
from course_utils.placements import Placement, layout_errors, planned_placement
from course_utils.viz import draw_mesh, draw_placement

__all__ = ["LayoutExplorer", "MeshExplorer", "ModelExplorer",
           "layout_explorer", "mesh_explorer", "model_explorer"]


class MeshExplorer(Explorer):
    """Pick a mesh arrangement, shape and axis names; see the real `DeviceMesh`.

    Attributes:
        ndim: `ToggleButtons`: 1-, 2- or 3-D.
        shape: `Dropdown` of the valid shapes (`mesh_shapes(n, ndim)`).
        axis_names: `Text`, names separated by commas.
        mesh: The `keras.distribution.DeviceMesh` drawn (None after a bad choice).
        table: `describe_mesh(mesh)`: coordinate -> device.
    """

    def __init__(self, n_devices: int):
        self.n_devices = n_devices
        self.mesh = self.table = None
        self.ndim = widgets.ToggleButtons(options=[("1-D", 1), ("2-D", 2), ("3-D", 3)], value=2,
                                          description="axes")
        self.shape = widgets.Dropdown(options=shape_options(n_devices, 2),
                                      value=squarest(mesh_shapes(n_devices, 2)), description="shape")
        self.axis_names = widgets.Text(value="data, model", description="axis names", continuous_update=False)
        self.ndim.observe(self._ndim_changed, names="value")
        controls = [self.ndim, widgets.HBox([self.shape, self.axis_names])]
        super().__init__(f"Mesh explorer: {n_devices} devices", controls, [self.shape, self.axis_names])
        self.refresh()

    def _ndim_changed(self, change) -> None:
        ndim = change["new"]
        with self.hold():
            self.shape.options = shape_options(self.n_devices, ndim)
            self.shape.value = squarest(mesh_shapes(self.n_devices, ndim))
            self.axis_names.value = ", ".join(AXIS_NAMES[ndim])

    def _update(self) -> str:
        names = tuple(n.strip() for n in self.axis_names.value.split(",") if n.strip())
        mesh = make_mesh(self.shape.value, names)
        self.image.value = render_png(draw_mesh(mesh))
        self.mesh, self.table = mesh, describe_mesh(mesh)
        sizes = ", ".join(f"'{a}' = {s}" for a, s in zip(mesh.axis_names, mesh.shape))
        return (f"<code>make_mesh({tuple(mesh.shape)}, {tuple(mesh.axis_names)})</code>: "
                f"{self.n_devices} devices, axis sizes {html.escape(sizes)}")

    def _clear_state(self) -> None:
        self.mesh = self.table = None


class LayoutExplorer(Explorer):
    """Pick a tensor shape and, per dimension, the mesh axis that splits it.

    Attributes:
        sizes: One `IntSlider` per tensor dimension (its size).
        axes: One `Dropdown` per dimension: None or a mesh axis name.
        mesh: The `DeviceMesh` the tensor is laid out on.
        placement: The `Placement` drawn (None after an impossible choice).
    """

    def __init__(self, shape: tuple[int, ...], mesh, *, dtype: str = "float32"):
        self.mesh, self.dtype, self.placement = mesh, dtype, None
        choices = [("None (whole)", None)]
        choices += [(f"'{a}' ({s})", a) for a, s in zip(mesh.axis_names, mesh.shape)]
        names = list(mesh.axis_names)
        self.sizes = tuple(widgets.IntSlider(value=s, min=1, max=max(64, 2 * s), description=f"dim {d} size",
                                             continuous_update=False) for d, s in enumerate(shape))
        self.axes = tuple(widgets.Dropdown(options=choices, value=names[d] if d < len(names) else None,
                                           description=f"dim {d} split") for d in range(len(shape)))
        columns = widgets.HBox([widgets.VBox([s, a]) for s, a in zip(self.sizes, self.axes)])
        super().__init__(f"Layout explorer: mesh {tuple(mesh.shape)} {tuple(mesh.axis_names)}",
                         [columns], [*self.sizes, *self.axes])
        self.refresh()

    def _update(self) -> str:
        from keras.distribution import TensorLayout

        shape = tuple(s.value for s in self.sizes)
        axes = tuple(a.value for a in self.axes)
        errors = layout_errors(shape, axes, dict(zip(self.mesh.axis_names, self.mesh.shape)))
        if errors:
            raise ValueError(f"TensorLayout({axes}) on shape {shape}:\n" + "\n".join(errors))
        p = planned_placement(shape, TensorLayout(axes, self.mesh), dtype=self.dtype, name="tensor")
        self.image.value = render_png(draw_placement(p))
        self.placement = p
        return _placement_status(p, axes)

    def _clear_state(self) -> None:
        self.placement = None


def _placement_status(p: Placement, axes: tuple) -> str:
    per_device = max(p.bytes_per_device.values())
    copies = f", each on {p.replication} devices" if p.replication > 1 else ", no copies"
    return (f"<code>TensorLayout({html.escape(repr(axes))}, mesh)</code> on shape {p.shape}: "
            f"shard shape <b>{p.shard_shape}</b>, <b>{len(p.blocks)}</b> blocks{copies}; "
            f"<b>{per_device:,}</b> bytes per device of {p.total_bytes:,} "
            f"({100 * per_device / max(p.total_bytes, 1):.0f}%)")


def mesh_explorer(n_devices: int | None = None) -> MeshExplorer:
    """An explorer of the mesh shapes of `n_devices` (default: the course's devices).

    Example:
        >>> explorer = mesh_explorer()
        >>> explorer.shape.value = (4, 2)
        >>> explorer.mesh.devices[1, 0]
        'cpu:2'
    """
    return MeshExplorer(device_count() if n_devices is None else n_devices)


def layout_explorer(shape: Sequence[int] | None = None, mesh=None) -> LayoutExplorer:
    """An explorer of the layouts of one tensor on a mesh.

    Args:
        shape: The starting tensor shape (default `(16, 32)`); its rank is fixed.
        mesh: A `DeviceMesh` (default: the squarest 2-D mesh, axes "data", "model").

    Example:
        >>> explorer = layout_explorer((16, 32))
        >>> explorer.axes[0].value = None
        >>> explorer.placement.shard_shape
        (16, 8)
    """
    if mesh is None:
        mesh = make_mesh(squarest(mesh_shapes(device_count(), 2)), AXIS_NAMES[2])
    return LayoutExplorer(tuple(int(s) for s in (shape or (16, 32))), mesh)


def model_explorer(model, layout_map_or_rules=None) -> ModelExplorer:
    """An explorer of a model's placements and memory across meshes and presets.

    Args:
        model: A built Keras model (it is cloned; the original is not changed).
        layout_map_or_rules: Tensor-parallel rules: a dict key -> axes such as
            `course_utils.models.mlp_rules()`, or a `LayoutMap` whose keys and
            axes are re-bound to each chosen mesh. None: replicated only.

    Example:
        >>> explorer = model_explorer(mlp(), mlp_rules())
        >>> explorer.mesh_shape.value = (1, 8)
        >>> explorer.memory.max_total
    """
    rules, axis_names = {}, AXIS_NAMES[2]
    if isinstance(layout_map_or_rules, dict):
        rules = dict(layout_map_or_rules)
    elif layout_map_or_rules is not None:
        rules = {key: tuple(layout.axes) for key, layout in layout_map_or_rules.items()}
        axis_names = tuple(layout_map_or_rules.device_mesh.axis_names)
        if len(axis_names) != 2:
            raise ValueError(f"model_explorer re-binds a LayoutMap to 2-D meshes. Received a LayoutMap "
                             f"on a mesh with axis_names={axis_names}.")
    return ModelExplorer(model, rules, axis_names, device_count())
