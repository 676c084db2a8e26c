"""The model explorer: a model's placements and training memory across meshes and presets.

Part of `course_utils.widgets`; import it from there.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
from matplotlib.figure import Figure

from course_utils._explorer import Explorer, render_png, shape_options, squarest
from course_utils.costs import DeviceMemory, MemoryReport
from course_utils.layout import LayoutReport, check_layout_map, explain_layout
from course_utils.mesh import make_mesh, mesh_shapes
from course_utils.viz import draw_model

_MEMORY_COLORS = {"weights": "#4c72b0", "gradients": "#dd8452", "optimizer": "#55a868"}


class ModelExplorer(Explorer):
    """Pick a mesh shape and a layout preset for a model; see placements and memory.

    Attributes:
        mesh_shape: `Dropdown` of the valid 2-D mesh shapes.
        preset: `ToggleButtons`: "replicated" (data parallel) or "tensor parallel".
        distribution: The `ModelParallel` distribution shown.
        report: `explain_layout` of the model (weights and optimizer variables).
        memory: A `MemoryReport`: weights, gradients, optimizer state per device.
        table: `HTML` widget showing `report`; memory_image: the memory bars.
    """

    def __init__(self, model, rules: dict[str, tuple], axis_names: tuple[str, str], n_devices: int):
        self.model, self.rules, self.axis_names = _laid_out_copy(model), rules, axis_names
        self.distribution = self.report = self.memory = None
        shapes = mesh_shapes(n_devices, 2)
        self.mesh_shape = widgets.Dropdown(options=shape_options(n_devices, 2), value=squarest(shapes),
                                           description="mesh")
        presets = [("replicated (data parallel)", "replicated")]
        presets += [("tensor parallel", "tensor parallel")] if rules else []
        self.preset = widgets.ToggleButtons(options=presets, value=presets[-1][1], description="layout")
        self.memory_image = widgets.Image(format="png")
        self.table = widgets.HTML()
        super().__init__(f"Model explorer: {self.model.name} on {n_devices} devices",
                         [widgets.HBox([self.mesh_shape, self.preset])], [self.mesh_shape, self.preset])
        self.children = (*self.children, self.memory_image, self.table)
        self.refresh()

    def layout_map(self):
        """The `LayoutMap` of the current choice, on a fresh mesh of the chosen shape."""
        from keras.distribution import LayoutMap

        result = LayoutMap(make_mesh(self.mesh_shape.value, self.axis_names))
        if self.preset.value == "tensor parallel":
            for key, axes in self.rules.items():
                result[key] = axes
        return result

    def _update(self) -> str:
        from keras.distribution import ModelParallel

        layout_map = self.layout_map()
        dist = ModelParallel(layout_map=layout_map, batch_dim_name=self.axis_names[0])
        problems = [p for p in check_layout_map(layout_map, self.model) if p.kind != "unmatched_key"]
        if problems:
            raise ValueError("\n".join(p.message for p in problems))
        report = explain_layout(self.model, dist)
        memory = memory_from_report(report, self.model)
        self.image.value = render_png(draw_model(self.model, dist))
        self.memory_image.value = render_png(draw_memory(memory))
        self.table.value = report._repr_html_()
        self.distribution, self.report, self.memory = dist, report, memory
        return (f"{html.escape(report.title)}: largest device total <b>{memory.max_total:,}</b> bytes "
                f"(weights + gradients + optimizer state)")

    def _clear_state(self) -> None:
        self.distribution = self.report = self.memory = None


def _laid_out_copy(model):
    """A compiled copy of `model` with its optimizer built and no layout fixed yet.

    Variables created under a distribution keep that layout, so the explorer
    works on a clone built outside any distribution; its paths are the model's.
    """
    import keras
    from keras import distribution

    outer = distribution.distribution()
    distribution.set_distribution(None)
    try:
        copy = keras.models.clone_model(model)
        optimizer = getattr(model, "optimizer", None)
        optimizer = keras.optimizers.Adam() if optimizer is None else type(optimizer).from_config(
            optimizer.get_config())
        copy.compile(optimizer=optimizer, loss="mse")
        copy.optimizer.build(copy.trainable_variables)
    finally:
        distribution.set_distribution(outer)
    return copy


def memory_from_report(report: LayoutReport, model) -> MemoryReport:
    """Bytes per device for weights, gradients and optimizer state, from planned placements.

    Gradients are laid out like their trainable weights; the optimizer rows
    are the real optimizer variables, with the layouts Keras gives them.
    """
    weights = {v.path for v in model.weights}
    trainable = {v.path for v in model.trainable_variables}
    totals: dict[str, dict[str, int]] = {}
    for row in report.rows:
        kinds = ["optimizer"] if row.path not in weights else ["weights"] + ["gradients"] * (row.path in trainable)
        for device, n in row.placement.device_bytes:
            entry = totals.setdefault(device, dict.fromkeys(_MEMORY_COLORS, 0))
            for kind in kinds:
                entry[kind] += n
    rows = [DeviceMemory(d, e["weights"], e["gradients"], e["optimizer"]) for d, e in totals.items()]
    return MemoryReport(rows, title=f"{model.name} under {report.title}: bytes per device (planned)")


def draw_memory(memory: MemoryReport) -> Figure:
    """Stacked bars: weights, gradients and optimizer state on each device."""
    fig = Figure(figsize=(7, 2.6), layout="constrained")
    ax = fig.subplots()
    devices = [r.device for r in memory.rows]
    bottom = [0] * len(devices)
    for kind, color in _MEMORY_COLORS.items():
        values = [getattr(r, kind) for r in memory.rows]
        ax.bar(devices, values, bottom=bottom, color=color, label=kind)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("bytes per device")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(f"Training memory per device (largest: {memory.max_total:,} bytes)", fontsize=10)
    return fig
