"""The model explorer: a model's placements and training memory across meshes and presets."""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as widgets

from course_utils.widgets.base import Explorer, picture, render_png, shape_options, squarest
from course_utils.costs import MemoryReport, memory_report
from course_utils.layout import LayoutReport, check_layout_map, explain_layout, make_layout_map
from course_utils.mesh import make_mesh, mesh_shapes
from course_utils.viz import draw_memory, draw_model

@dataclass(frozen=True)
class _View:
    """Everything shown for one (mesh shape, preset) choice; computed once, then reused."""

    distribution: object
    report: LayoutReport
    memory: MemoryReport
    model_png: bytes
    memory_png: bytes


class ModelExplorer(Explorer):
    """Pick a mesh shape and a layout preset for a model; see placements and memory.

    Attributes:
        mesh_shape: `Dropdown` of the valid 2-D mesh shapes.
        preset: `ToggleButtons`: "replicated" (data parallel) or "tensor parallel".
        distribution: The `ModelParallel` distribution shown.
        report: `explain_layout` of a copy of the model built under `distribution`
            (weights and optimizer variables, real arrays).
        memory: `memory_report` of that copy: weights, gradients and optimizer
            state per device, from the real shards.
        table: `HTML` widget showing `report`; memory_image: the memory bars.
        views: (mesh shape, preset) -> what was shown for it. A choice seen
            before is shown again without recomputing; `views.clear()` forgets.
    """

    def __init__(self, model, rules: dict[str, tuple], axis_names: tuple[str, str], n_devices: int):
        self.model, self.rules, self.axis_names = model, rules, axis_names
        self.distribution = self.report = self.memory = None
        self.views: dict[tuple, _View] = {}
        shapes = mesh_shapes(n_devices, 2)
        self.mesh_shape = widgets.Dropdown(options=shape_options(n_devices, 2), value=squarest(shapes),
                                           description="mesh")
        presets = [("replicated (data parallel)", "replicated")]
        presets += [("tensor parallel", "tensor parallel")] if rules else []
        self.preset = widgets.ToggleButtons(options=presets, value=presets[-1][1], description="layout",
                                            style={"button_width": "auto"})
        self.memory_image = picture()
        self.table = widgets.HTML()
        super().__init__(f"Model explorer: {self.model.name} on {n_devices} devices",
                         [widgets.HBox([self.mesh_shape, self.preset])], [self.mesh_shape, self.preset])
        self.children = (*self.children, self.memory_image, self.table)
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
        self.image.value, self.memory_image.value = view.model_png, view.memory_png
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
        copy = built_under(self.model, dist)
        report, memory = explain_layout(copy, dist), memory_report(copy, dist)
        return _View(dist, report, memory, render_png(draw_model(copy, dist)), render_png(draw_memory(memory)))

    def _clear_state(self) -> None:
        self.distribution = self.report = self.memory = None


def built_under(model, distribution):
    """A compiled copy of `model` built inside `distribution.scope()`, optimizer built too.

    Its variables (weights and optimizer state) are real arrays laid out by
    Keras; its paths are the model's. The original model is not touched.
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
