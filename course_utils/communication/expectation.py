"""What a layout predicts a training step communicates, and what that prediction leaves out.

`expected_collectives` reads the layout Keras gives each weight (`get_variable_layout`) and the
traced shape of each layer's output (`layer_outputs`), and lists the collectives a sharded step
must contain: the gradient sums over the batch axis, and the partial sums a split Dense or
EinsumDense kernel makes. `not_modelled` says, weight by weight, what it does not predict.
`report.CommunicationReport` sets the two beside the compiled program's collectives.
"""

from __future__ import annotations

import math

import numpy as np

from course_utils.communication.hlo import Collective
from course_utils.layout_axes import axes_used
from course_utils.placements import placement


def expected_collectives(model, distribution, batch_shape, *, outputs=None) -> list[Collective]:
    """What the layout predicts a training step must communicate.

    Modelled:
    - every trainable weight replicated over the batch axis has its gradient
      summed over that axis (one all-reduce of its shard, when the axis has
      more than one device);
    - a Dense or EinsumDense kernel (attention's query, key, value and output
      projections too) split over a dimension it contracts produces partial
      sums of its output (all-reduce of the per-device output, sequence
      length included, from the traced output shape), and one split over an
      output dimension, whose input needs a gradient, combines the partial
      input gradients.

    - a tied embedding used for the lookup and for the logits has two
      gradients, which XLA may sum apart (optional: `OPTIONAL`);
    - a weight split over the batch axis (FSDP) has its gradient combined
      over it, reduce-scattered or all-reduced (optional: XLA chooses).

    Not modelled (see `not_modelled`, and `attribution.unmodelled_part` for
    the compiled collectives they cause): weights split over the batch axis
    (XLA gathers the weight or the activations, as sizes dictate),
    embeddings and other split weights, reductions over split activations
    (norms, softmax, routing, the loss), and the optimizer's update when
    XLA computes it split over the batch axis.

    Args:
        model: The built model.
        distribution: Its distribution.
        batch_shape: The global shape of the first input.
        outputs: `layer_outputs(model, batch)` for activation sizes; without
            it an activation is one row of the kernel's width per example.
    """
    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    expected = (_gradient_sums(model, distribution, sizes) + _tied_gradient_sums(model, distribution, sizes, outputs)
                + _fsdp_gradient_sums(model, distribution, sizes))
    shapes = {o.layer: o.shapes[0] for o in outputs or () if o.shapes}
    for layer, kernel, letters in _kernels(model, shapes):
        expected += _kernel_collectives(model, distribution, sizes, layer, kernel, letters, shapes, batch_shape)
    return expected


def _gradient_sums(model, distribution, sizes) -> list[Collective]:
    """One all-reduce over the batch axis of every weight's gradient that is not split over it."""
    batch_axis = distribution.batch_dim_name
    if sizes.get(batch_axis, 1) <= 1:
        return []
    gradient_bytes = sum(placement(v).largest_shard_bytes for v in model.trainable_variables
                         if batch_axis not in axes_used(distribution.get_variable_layout(v).axes))
    if not gradient_bytes:
        return []
    return [Collective("all-reduce", (batch_axis,), 1, gradient_bytes,
                       f"expected: every weight's gradient summed over '{batch_axis}'")]


OPTIONAL = "expected, or combined with the gradient sums"  # a sum XLA may fold into another


def _tied_gradient_sums(model, distribution, sizes, outputs) -> list[Collective]:
    """A tied embedding used twice (the token lookup and the logits) gets a gradient from each use; XLA
    may sum them over the batch axis apart (a second all-reduce of its shard) or add them first."""
    from course_utils.keras_internals import all_layers

    batch_axis = distribution.batch_dim_name
    calls = {}
    for output in outputs or ():
        calls[output.layer] = calls.get(output.layer, 0) + 1
    found = []
    for layer in all_layers(model, include_self=False):
        weights = getattr(layer, "embeddings", None)
        if (not getattr(layer, "tie_weights", False) or weights is None or calls.get(layer.path, 0) < 2
                or sizes.get(batch_axis, 1) <= 1 or batch_axis in axes_used(distribution.get_variable_layout(
                    weights).axes)):
            continue
        found.append(Collective("all-reduce", (batch_axis,), 1, placement(weights).largest_shard_bytes,
                                f"{OPTIONAL}: {weights.path} is tied, used twice (lookup and logits), so it "
                                f"has two gradients"))
    return found


def _fsdp_gradient_sums(model, distribution, sizes) -> list[Collective]:
    """A weight split over the batch axis (FSDP) has each device's partial gradient combined over that axis:
    reduce-scattered to the shards, or all-reduced whole along the axis and then sliced (XLA chooses)."""
    batch_axis, parts = distribution.batch_dim_name, sizes.get(distribution.batch_dim_name, 1)
    split = [v for v in model.trainable_variables if batch_axis in axes_used(distribution.get_variable_layout(v).axes)]
    if parts <= 1 or not split:
        return []
    shards = sum(placement(v).largest_shard_bytes for v in split)
    why = f"{OPTIONAL}: the gradients of the {len(split)} weight(s) split over '{batch_axis}' (FSDP)"
    return [Collective("reduce-scatter", (batch_axis,), 1, shards, f"{why}, reduce-scattered to their shards"),
            Collective("all-reduce", (batch_axis,), 1, shards * parts, f"{why}, or all-reduced whole along it")]


def _kernel_collectives(model, distribution, sizes, layer, kernel, letters, shapes, batch_shape) -> list[Collective]:
    """The partial sums a split Dense or EinsumDense kernel makes its output and its input gradient combine."""
    lhs, rhs, out = letters
    batch_axis = distribution.batch_dim_name
    batch_parts = sizes.get(batch_axis, 1)
    axes = dict(zip(rhs, tuple(distribution.get_variable_layout(kernel).axes) + (None,) * len(rhs)))
    if splitting_batch_axis(distribution) in axes_used(axes.values()):
        return []  # split over the batch axis: not modelled
    size = dict(zip(rhs, kernel.shape))
    if layer.path in shapes:
        size.update(zip(out, shapes[layer.path]))
    elif len(out) == 2:
        size[out[0]] = batch_shape[0]
    else:
        return []
    itemsize = np.dtype(kernel.dtype).itemsize
    contracted = [c for c in rhs if c in lhs and c not in out]
    produced = [c for c in rhs if c in out]

    def per_device(dims, divided_by):
        parts = math.prod(sizes[a] for c in divided_by for a in axes_used([axes[c]]))
        return math.prod(size[c] for c in dims) * itemsize // batch_parts // parts

    def split_axes(dims):
        return dict.fromkeys(a for c in dims for a in axes_used([axes[c]]) if sizes[a] > 1)

    found = [Collective("all-reduce", (axis,), 1, per_device(out, produced),
                        f"expected: partial sums of {layer.path}'s output combined over '{axis}'")
             for axis in split_axes(contracted)]
    if not _takes_model_input(model, layer):
        found += [Collective("all-reduce", (axis,), 1, per_device(lhs, contracted),
                             f"expected: {layer.path}'s input gradient combined over '{axis}'")
                  for axis in split_axes(produced)]
    return found


def not_modelled(model, distribution) -> list[str]:
    """The split weights whose communication `expected_collectives` does not predict, one line each."""
    batch_axis = splitting_batch_axis(distribution)
    modelled = {id(kernel) for _, kernel, _ in _kernels(model, {})}
    notes = []
    for variable in model.trainable_variables:
        axes = tuple(distribution.get_variable_layout(variable).axes)
        if not axes_used(axes) or variable.path.endswith("/bias"):
            continue  # whole, or a bias (added where its layer's output already is)
        if batch_axis is not None and batch_axis in axes_used(axes):
            notes.append(f"{variable.path} is split {axes}, over the batch axis '{batch_axis}': gathered where "
                         f"it is used, or the activations are gathered instead")
        elif id(variable) not in modelled:
            notes.append(f"{variable.path} {tuple(variable.shape)} is split {axes}: not the kernel of a Dense or "
                         f"EinsumDense layer (an embedding, a norm, a custom layer)")
    return notes


def _kernels(model, shapes):
    """(layer, kernel, (input, kernel, output) subscripts) of every Dense and EinsumDense layer.

    A Dense kernel (K, N) is the einsum "...k,kn->...n" with the leading
    dimensions of the traced output.
    """
    from course_utils.keras_internals import all_layers, is_leaf

    for layer in all_layers(model, include_self=False):
        kernel = getattr(layer, "kernel", None)
        if kernel is None or not is_leaf(layer):
            continue
        equation = getattr(layer, "equation", None)
        if equation is not None and "..." not in equation and "->" in equation:
            inputs, out = equation.split("->")
            lhs, rhs = inputs.split(",")
            yield layer, kernel, (lhs, rhs, out)
        elif equation is None and len(kernel.shape) == 2:
            lead = "abcdefgh"[:len(shapes.get(layer.path, (0, 0))) - 1]
            yield layer, kernel, (lead + "k", "kn", lead + "n")


def _takes_model_input(model, layer) -> bool:
    try:
        return any(layer.input is tensor for tensor in model.inputs)
    except (AttributeError, ValueError):
        return False


def moved_to_the_update(model, distribution, rows) -> dict[tuple, int]:
    """Expected bytes the program sends another way, by (kind, axes): the gradient sums of the weights whose
    update XLA computes split over the batch axis (`attribution` finds them: `CollectiveRow.updates`) go to
    that update's collectives instead of an all-reduce of their own."""
    updated = {path for row in rows for path in row.updates}
    return {("all-reduce", (distribution.batch_dim_name,)): sum(
        placement(v).largest_shard_bytes for v in model.trainable_variables if v.path in updated)}


def splitting_batch_axis(distribution) -> str | None:
    """The distribution's batch axis when it splits anything (more than one device along it), else None: an
    axis of one device leaves every weight "split" over it whole, so nothing is FSDP's over it."""
    mesh = distribution.device_mesh
    axis = distribution.batch_dim_name
    return axis if dict(zip(mesh.axis_names, mesh.shape)).get(axis, 1) > 1 else None
