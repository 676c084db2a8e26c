"""The model explorer: a model's placements and training memory across meshes and presets.

A click must redraw at once, so nothing is built per choice. Keras decides
each variable's layout from the original model's variables
(`distribution.get_variable_layout`, the LayoutMap lookup it uses when it
creates them), JAX turns layout and shape into blocks (`planned_placement`),
and bytes per device follow from those. The tests build the model for real
under each distribution (`built_under`) and check that the plan is what the
real arrays hold.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as widgets

from course_utils.layouts.layout_map import LayoutReport, layout_rows, make_layout_map
from course_utils.layouts.checks import check_layout_map
from course_utils.memory.state import MemoryReport, memory_of_rows
from course_utils.mesh import make_mesh, mesh_shapes
from course_utils.viz.model import model_scene
from course_utils.widgets.base import Explorer, render, shape_options, squarest

PANELS = 6  # the largest weights are drawn (the table below lists every variable)


@dataclass(frozen=True)
class _View:
    """Everything shown for one (mesh shape, preset) choice; computed once, then reused."""

    distribution: object
    report: LayoutReport
    memory: MemoryReport
    picture: bytes  # SVG


class ModelExplorer(Explorer):
    """Pick a mesh shape and a layout preset for a model; see placements and memory.

    Attributes:
        mesh_shape: `Dropdown` of the valid 2-D mesh shapes.
        preset: `ToggleButtons`: "replicated" (data parallel) or "tensor parallel".
        distribution: The `ModelParallel` distribution shown.
        report: `planned_report`: every weight and optimizer variable, laid out
            as Keras would lay it out under `distribution`.
        memory: `memory.state.memory_of_rows`: weights, gradients and optimizer state per device.
        image: The weights' placements (first `PANELS`) above the memory per device.
        table: `HTML` widget showing `report`.
        views: (mesh shape, preset) -> what was shown for it. A choice seen
            before is shown again without recomputing; `views.clear()` forgets.
    """

    def __init__(self, model, rules: dict[str, tuple], axis_names: tuple[str, str], n_devices: int):
        self.model, self.rules, self.axis_names = model, rules, axis_names
        self.optimizer_variables = optimizer_template(model)
        self.distribution = self.report = self.memory = None
        self.views: dict[tuple, _View] = {}
        shapes = mesh_shapes(n_devices, 2)
        self.mesh_shape = widgets.Dropdown(options=shape_options(n_devices, 2), value=squarest(shapes),
                                           description="mesh")
        presets = [("replicated (data parallel)", "replicated")]
        presets += [("tensor parallel", "tensor parallel")] if rules else []
        self.preset = widgets.ToggleButtons(options=presets, value=presets[-1][1], description="layout",
                                            style={"button_width": "auto"})
        self.table = widgets.HTML()
        super().__init__(f"Model explorer: {self.model.name} on {n_devices} devices",
                         [widgets.HBox([self.mesh_shape, self.preset])], [self.mesh_shape, self.preset])
        self.children = (*self.children, self.table)
        self.refresh()

    def layout_map(self):
        """The `LayoutMap` of the current choice, on a fresh mesh of the chosen shape."""
        rules = self.rules if self.preset.value == "tensor parallel" else {}
        return make_layout_map(make_mesh(self.mesh_shape.value, self.axis_names), rules)

    def _update(self) -> str:
        key = (self.mesh_shape.value, self.preset.value)
        if key not in self.views:
            self.views[key] = self._compute()
        view = self.views[key]
        self.image.value = view.picture
        self.table.value = view.report._repr_html_()
        self.distribution, self.report, self.memory = view.distribution, view.report, view.memory
        return (f"{html.escape(view.report.title)}: largest device total <b>{view.memory.max_total:,}</b> "
                f"bytes (weights + gradients + optimizer state)")

    def _compute(self) -> _View:
        from keras.distribution import ModelParallel

        layout_map = self.layout_map()
        dist = ModelParallel(layout_map=layout_map, batch_dim_name=self.axis_names[0])
        problems = [p for p in check_layout_map(layout_map, self.model) if p.kind != "unmatched_key"]
        if problems:
            raise ValueError("\n".join(p.message for p in problems))
        report = planned_report(self.model, self.optimizer_variables, dist)
        memory = memory_of_rows(self.model, report.rows, title=f"{self.model.name} under {report.title}: bytes per device")
        scene = model_scene(largest_weights(report, len(self.model.variables)), memory=memory)
        return _View(dist, report, memory, render(scene))

    def _clear_state(self) -> None:
        self.distribution = self.report = self.memory = None


def largest_weights(report: LayoutReport, n_weights: int) -> LayoutReport:
    """The `PANELS` largest of the first `n_weights` rows (the model's weights), in model order."""
    weights = report.rows[:n_weights]
    largest = sorted(weights, key=lambda r: r.placement.total_bytes, reverse=True)[:PANELS]
    rows = [r for r in weights if r in largest]
    if len(rows) == n_weights:
        return LayoutReport(rows, title=report.title)
    return LayoutReport(rows, title=f"{report.title}, the {len(rows)} largest of {n_weights} weights")


def optimizer_template(model) -> list:
    """The variables of an optimizer like the model's (Adam when it has none), built on its weights.

    Only their paths, shapes and dtypes are used. The model is not touched:
    the optimizer is a new one, not attached to it.
    """
    import keras

    optimizer = getattr(model, "optimizer", None)
    optimizer = keras.optimizers.Adam() if optimizer is None else type(optimizer).from_config(optimizer.get_config())
    optimizer.build(model.trainable_variables)
    return list(optimizer.variables)


def planned_report(model, optimizer_variables, distribution) -> LayoutReport:
    """How Keras would lay out every variable of `model` and its optimizer under `distribution`
    (`layout.layout_rows`, planned from shapes: no array is read)."""
    mesh = distribution.device_mesh
    return LayoutReport(layout_rows(model, distribution, optimizer_variables=optimizer_variables,
                                    compare_arrays=False),
                        title=f"{type(distribution).__name__} on mesh {tuple(mesh.shape)} {tuple(mesh.axis_names)} "
                              f"(planned from shapes)")


def built_under(model, distribution):
    """A compiled copy of `model` built inside `distribution.scope()`, optimizer built too.

    Its variables (weights and optimizer state) are real arrays laid out by
    Keras; its paths are the model's. The tests compare it with the plan.
    """
    import keras

    optimizer = getattr(model, "optimizer", None)
    with distribution.scope():
        copy = keras.models.clone_model(model)
        optimizer = keras.optimizers.Adam() if optimizer is None else type(optimizer).from_config(
            optimizer.get_config())
        copy.compile(optimizer=optimizer, loss="mse")
        copy.optimizer.build(copy.trainable_variables)
    return copy
