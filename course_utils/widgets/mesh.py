"""The mesh explorer: pick an arrangement, a shape and axis names; see the real `DeviceMesh`."""

from __future__ import annotations

import html

import ipywidgets as widgets

from course_utils.mesh import describe_mesh, make_mesh, mesh_shapes
from course_utils.viz.mesh import mesh_scene
from course_utils.widgets.base import AXIS_NAMES, Explorer, render, shape_options, squarest


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
        self.image.value = render(mesh_scene(mesh))
        self.mesh, self.table = mesh, describe_mesh(mesh)
        sizes = ", ".join(f"'{a}' = {s}" for a, s in zip(mesh.axis_names, mesh.shape))
        return (f"<code>make_mesh({tuple(mesh.shape)}, {tuple(mesh.axis_names)})</code>: "
                f"{self.n_devices} devices, axis sizes {html.escape(sizes)}")

    def _clear_state(self) -> None:
        self.mesh = self.table = None
