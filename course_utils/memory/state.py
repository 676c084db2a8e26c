"""Bytes each device holds for training: weights, gradients and optimizer state.

Two sources, one arithmetic. `memory_report` reads the real shards of a model built under a
distribution; `planned_memory` plans the same from shapes and Keras's layouts, nothing allocated
(a shape-only Gemma 7B, say). Both sum a variable's bytes per device from its `Placement` with
`per_device`, and give an optimizer slot its weight's layout through `layout.layout_rows`, as
Keras does (`add_variable_from_reference`). The tests check that the two agree byte for byte.

Counted: the weights, one gradient per trainable weight (gradients are not kept between steps;
during a step there is one per trainable weight, laid out like it), the optimizer's state.
Activations are not counted here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from course_utils._table import Table
from course_utils.devices import scope_for
from course_utils.guards import outside_the_mesh, require_compiled, require_model
from course_utils.keras_internals import forget_deferred
from course_utils.layouts.layout_map import layout_rows
from course_utils.mesh import describe_distribution
from course_utils.placements import per_device, placement


@dataclass(frozen=True)
class DeviceMemory:
    """Bytes one device holds for training."""

    device: str
    weights: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer


class MemoryReport(Table):
    """Bytes per device for weights, gradients and optimizer state."""

    columns = ("device", "weights", "gradients", "optimizer state", "total")

    def cells(self, row: DeviceMemory) -> list[str]:
        return [row.device, *(f"{n:,}" for n in (row.weights, row.gradients, row.optimizer, row.total))]

    @property
    def max_total(self) -> int:
        return max(r.total for r in self.rows)


def training_memory_of(weights, gradients, optimizer, *, title: str) -> MemoryReport:
    """A `MemoryReport` from the `Placement`s of a model's weights, gradients and optimizer state."""
    by_kind = [per_device(kind) for kind in (weights, gradients, optimizer)]
    rows = [DeviceMemory(device, by_kind[0][device], by_kind[1].get(device, 0), by_kind[2].get(device, 0))
            for device in by_kind[0]]
    return MemoryReport(rows, title=title)


def memory_report(model, distribution=None) -> MemoryReport:
    """Bytes each device holds for a model's training state, from the real shards.

    Args:
        model: A compiled Keras model built under `distribution`; its
            optimizer is built if it was not yet.
        distribution: The distribution it was built under (for the title).
    """
    require_compiled(model, "memory_report")
    optimizer = model.optimizer
    if not optimizer.built:
        with scope_for(distribution):
            optimizer.build(model.trainable_variables)
    real = lambda variables: [placement(v) for v in variables]
    title = f"{model.name} under {describe_distribution(distribution)}: bytes per device"
    outside = outside_the_mesh(model.weights, distribution)
    if outside:
        warning = (f"{len(outside)} of {len(model.weights)} weights (first: '{outside[0]}') live outside the "
                   f"distribution's mesh: the model was built outside distribution.scope(). The rows show where "
                   f"the arrays really are, not what the distribution plans; build the model inside "
                   f"`with distribution.scope():` (planned_memory(model, distribution) gives the plan).")
        warnings.warn(warning, stacklevel=2)
        title += f" - NOT laid out by it: {warning}"
    return training_memory_of(real(model.weights), real(model.trainable_variables), real(optimizer.variables),
                              title=title)


def planned_memory(model, distribution, *, optimizer=None) -> MemoryReport:
    """Bytes each device would hold for training, planned from shapes and Keras's layouts.

    Works on a shape-only model (`abstract_model`) or a real one. Each
    variable's layout is `distribution.get_variable_layout(variable)`; the
    optimizer's slots follow their weight's layout, as Keras lays them out.

    Args:
        model: A built Keras model (shape-only or real).
        distribution: The `ModelParallel` (or `DataParallel`) to plan for.
        optimizer: A fresh, unbuilt Keras optimizer; defaults to `Adam()`.

    Returns:
        A `MemoryReport`, comparable row by row with `memory_report`.
    """
    require_model(model, "planned_memory")
    if optimizer is None:
        optimizer = _default_optimizer(model)
    elif optimizer.built:
        raise ValueError("planned_memory builds the optimizer on the model's variables; pass a fresh one, "
                         "e.g. keras.optimizers.Adam().")
    else:
        shape_only_optimizer(optimizer, model)
    rows = layout_rows(model, distribution, optimizer_variables=optimizer.variables, compare_arrays=False)
    return memory_of_rows(model, rows, title=f"{model.name} under {describe_distribution(distribution)}: bytes per "
                                             f"device, planned from shapes (activations not counted)")


def memory_of_rows(model, rows, *, title: str) -> MemoryReport:
    """A `MemoryReport` from `layout_rows` of a model and its optimizer: each row is a weight of the
    model (and a gradient when trainable) or a variable of its optimizer."""
    weights = {v.path for v in model.weights}
    trainable = {v.path for v in model.trainable_variables}
    return training_memory_of([r.placement for r in rows if r.path in weights],
                              [r.placement for r in rows if r.path in trainable],
                              [r.placement for r in rows if r.path not in weights], title=title)


def shape_only_optimizer(optimizer, model):
    """Builds `optimizer` on the model's trainable variables with shape-only slots (nothing allocated)."""
    import keras

    with keras.StatelessScope(initialize_variables=False):
        optimizer.build(model.trainable_variables)
    forget_deferred(optimizer.variables)
    return optimizer


def _default_optimizer(model):
    """A shape-only `Adam()` built on the model's trainable variables (a caller planning one model many times,
    such as `will_it_fit`, builds it once and passes it)."""
    import keras

    return shape_only_optimizer(keras.optimizers.Adam(), model)
