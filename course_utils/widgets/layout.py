"""The layout explorer: pick a tensor shape and the mesh axis that splits each dimension."""

from __future__ import annotations

import html

import ipywidgets as widgets

from course_utils.layout_axes import layout_errors
from course_utils.placements import Placement, planned_placement
from course_utils.viz.tensor import placement_scene
from course_utils.widgets.base import Explorer, render


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
        self.image.value = render(placement_scene(p))
        self.placement = p
        return _placement_status(p, axes)

    def _clear_state(self) -> None:
        self.placement = None


def _placement_status(p: Placement, axes: tuple) -> str:
    per_device = p.largest_shard_bytes
    copies = f", each on {p.replication} devices" if p.replication > 1 else ", no copies"
    return (f"<code>TensorLayout({html.escape(repr(axes))}, mesh)</code> on shape {p.shape}: "
            f"shard shape <b>{p.shard_shape}</b>, <b>{len(p.blocks)}</b> blocks{copies}; "
            f"<b>{per_device:,}</b> bytes per device of {p.total_bytes:,} "
            f"({100 * per_device / max(p.total_bytes, 1):.0f}%)")
