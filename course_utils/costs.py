"""What a layout costs: bytes per device, and the collectives of a compiled training step.

Memory comes from the real arrays' shards. Communication comes from the real
program: one training step of the model, compiled by XLA under the
distribution, whose collectives are read from the compiled text and set
beside what the layout predicts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_utils._table import Table
from course_utils.devices import scope_for
from course_utils.keras_internals import all_layers, is_leaf, state_shardings, training_state
from course_utils.hlo import Collective, parse_collectives
from course_utils.placements import placement

SCALAR_SLACK = 64  # bytes: the loss and metric scalars ride along with the gradients


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


def memory_report(model, distribution=None) -> MemoryReport:
    """Bytes each device holds for a model's training state, from the real shards.

    Gradients are not kept between steps; during a step there is one per
    trainable weight, laid out like it, so they are counted from the
    trainable weights' shards.

    Args:
        model: A compiled Keras model built under `distribution`; its
            optimizer is built if it was not yet.
        distribution: The distribution it was built under (for the title).
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        raise ValueError(f"memory_report needs a compiled model; {model.name!r} has no optimizer. "
                         f"Call model.compile(optimizer=..., loss=...) first.")
    if not optimizer.built:
        with scope_for(distribution):
            optimizer.build(model.trainable_variables)
    weights = _bytes(model.weights)
    gradients = _bytes(model.trainable_variables)
    state = _bytes(optimizer.variables)
    devices = list(weights)
    rows = [DeviceMemory(d, weights[d], gradients.get(d, 0), state.get(d, 0)) for d in devices]
    from course_utils.train import describe_distribution

    return MemoryReport(rows, title=f"{model.name} under {describe_distribution(distribution)}: bytes per device")


def _bytes(variables) -> dict[str, int]:
    totals: dict[str, int] = {}
    for variable in variables:
        for device, n in placement(variable).device_bytes:
            totals[device] = totals.get(device, 0) + n
    return totals


class CommunicationReport(Table):
    """Collectives found in a compiled training step, beside the layout's expectation."""

    columns = ("kind", "over axes", "count", "bytes per device", "source")

    def __init__(self, compiled, expected, *, title: str):
        super().__init__(list(compiled) + list(expected), title=title)
        self.compiled = list(compiled)
        self.expected = list(expected)

    def cells(self, row: Collective) -> list[str]:
        return [row.kind, "+".join(row.axes) or "-", str(row.count), f"{row.bytes:,}", row.source]

    def bytes_over(self, *axes: str, kind: str = "all-reduce") -> int:
        """Compiled bytes per device of `kind` collectives over exactly these axes."""
        return sum(c.bytes for c in self.compiled if c.kind == kind and c.axes == tuple(axes))

    @property
    def agrees(self) -> bool:
        """Every expected collective is in the program, and nothing large is unexplained."""
        expected = _sum_by_key(self.expected)
        found = _sum_by_key(self.compiled)
        matched = all(found.get(k, 0) >= n and found.get(k, 0) - n <= SCALAR_SLACK for k, n in expected.items())
        unexplained = [k for k, n in found.items() if k not in expected and n > SCALAR_SLACK]
        return matched and not unexplained

    def __repr__(self) -> str:
        verdict = "compiled program and expectation AGREE" if self.agrees else "compiled program and expectation DIFFER"
        return f"{super().__repr__()}\n{verdict}"


def _sum_by_key(rows) -> dict[tuple, int]:
    sums: dict[tuple, int] = {}
    for row in rows:
        sums[(row.kind, row.axes)] = sums.get((row.kind, row.axes), 0) + row.bytes
    return sums


def communication_report(model, distribution, batch_shape, *, target_shape=None,
                         target_dtype="float32") -> CommunicationReport:
    """Compiles one real training step and lists its collectives.

    Args:
        model: A compiled Keras model built under `distribution`.
        distribution: A `DataParallel` or `ModelParallel` distribution.
        batch_shape: The global shape of one input batch, e.g. `(64, 784)`.
        target_shape: The global shape of the targets; defaults to the
            model's output shape for this batch.
        target_dtype: The targets' dtype (e.g. "int32" for sparse labels).

    Returns:
        A `CommunicationReport`: what XLA put in the program and what the
        layout predicts; `.agrees` checks the two against each other.
    """
    hlo = compiled_train_step(model, distribution, batch_shape, target_shape, target_dtype)
    mesh = distribution.device_mesh
    compiled = parse_collectives(hlo, tuple(mesh.axis_names), tuple(mesh.shape))
    expected = expected_collectives(model, distribution, batch_shape)
    return CommunicationReport(compiled, expected, title=(
        f"One training step of {model.name}, batch {tuple(batch_shape)}, "
        f"{type(distribution).__name__} on {tuple(mesh.shape)} {tuple(mesh.axis_names)}"))


def compiled_train_step(model, distribution, batch_shape, target_shape=None, target_dtype="float32") -> str:
    """The text of Keras's training step compiled by XLA under `distribution`."""
    import jax

    batch_shape = tuple(batch_shape)
    if target_shape is None:
        target_shape = tuple(model.compute_output_shape(batch_shape))
    with distribution.scope():
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        state = training_state(model)
        step = jax.jit(model.train_step, out_shardings=(None, state_shardings(model)))
        x = _abstract(batch_shape, model.inputs[0].dtype if model.inputs else "float32", distribution)
        y = _abstract(tuple(target_shape), target_dtype, distribution)
        return step.lower(state, (x, y)).compile().as_text()


def _abstract(shape, dtype, distribution):
    import jax

    return jax.ShapeDtypeStruct(shape, dtype, sharding=distribution.get_data_layout(shape).backend_layout)


def expected_collectives(model, distribution, batch_shape) -> list[Collective]:
    """What the layout predicts a training step must communicate.

    - Every trainable weight's gradient is summed over the batch axis
      (all-reduce of the weight's shard, when that axis has more than one device).
    - A Dense-like kernel split over its input dimension produces partial
      sums of its output, combined over that axis (all-reduce of the
      per-device output rows).
    - A kernel split over its output dimension, whose input needs a
      gradient, combines the partial input gradients over that axis.
    """
    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    batch_axis = distribution.batch_dim_name
    rows_per_device = batch_shape[0] // sizes.get(batch_axis, 1)
    expected = []
    gradient_bytes = 0
    if sizes.get(batch_axis, 1) > 1:
        for variable in model.trainable_variables:
            gradient_bytes += max(placement(variable).bytes_per_device.values())
        expected.append(Collective("all-reduce", (batch_axis,), 1, gradient_bytes,
                                   f"expected: every weight's gradient summed over '{batch_axis}'"))
    for layer, kernel in _dense_kernels(model):
        axes = tuple(distribution.get_variable_layout(kernel).axes)
        itemsize = np.dtype(kernel.dtype).itemsize
        if axes[0] is not None and sizes[axes[0]] > 1:
            expected.append(Collective("all-reduce", (axes[0],), 1, rows_per_device * kernel.shape[1] * itemsize,
                                       f"expected: partial sums of {layer.name}'s output combined over '{axes[0]}'"))
        if axes[1] is not None and sizes[axes[1]] > 1 and not _takes_model_input(model, layer):
            expected.append(Collective("all-reduce", (axes[1],), 1, rows_per_device * kernel.shape[0] * itemsize,
                                       f"expected: {layer.name}'s input gradient combined over '{axes[1]}'"))
    return expected


def _dense_kernels(model):
    for layer in all_layers(model, include_self=False):
        kernel = getattr(layer, "kernel", None)
        if kernel is not None and len(kernel.shape) == 2 and is_leaf(layer):
            yield layer, kernel


def _takes_model_input(model, layer) -> bool:
    try:
        return any(layer.input is tensor for tensor in model.inputs)
    except (AttributeError, ValueError):
        return False
