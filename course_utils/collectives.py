"""Why each collective of a compiled training step is there: its Keras layer, its operation, a reason.

The layer and the operation come from the compiled program itself: XLA keeps
the JAX name stack of the operation a collective was inserted for
(`metadata={op_name=...}`, see `hlo.collective_ops`), and every Keras layer
opens one name scope (`layer_outputs` maps scopes to layer paths). The reason
joins that with the layout Keras gave the weights (`get_variable_layout`).

`expected_collectives` is the layout's prediction, with what it leaves out
said plainly (`not_modelled`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from course_utils._table import Table
from course_utils.hlo import Collective, CollectiveOp
from course_utils.placements import placement

LOSS, STEP = "(loss)", "(training step)"


@dataclass(frozen=True)
class CollectiveRow:
    """One compiled collective, attributed to its source.

    Attributes:
        layer: Keras path of the layer it was inserted for, "(loss)" or
            "(training step)" (optimizer update, or no source recorded).
        op: The JAX operation, e.g. "dot_general"; "" when XLA recorded none.
        pass_: "forward", "backward" or "" (unknown).
        kind: The collective, e.g. "all-gather".
        axes: Mesh axes it runs over.
        bytes: Bytes of its result per device.
        weight: Path of the weight it moves, when its operand is one ("" otherwise).
        reason: One line on why XLA inserted it.
        name: The instruction's name in the compiled program.
    """

    layer: str
    op: str
    pass_: str
    kind: str
    axes: tuple[str, ...]
    bytes: int
    weight: str
    reason: str
    name: str


class LayerTable(Table):
    """Compiled collectives summed per layer, operation, pass, kind and axes (`CommunicationReport.by_layer()`)."""

    columns = ("layer", "op", "pass", "kind", "over axes", "count", "bytes per device", "reason")

    def cells(self, row) -> list[str]:
        return [row["layer"], row["op"] or "-", row["pass"] or "-", row["kind"], "+".join(row["axes"]) or "-",
                str(row["count"]), f"{row['bytes']:,}", row["reason"]]


def by_layer(rows: list[CollectiveRow], *, title: str = "") -> LayerTable:
    """Sums `rows` that share layer, op, pass, kind and axes; keeps the first reason of each group."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        key = (r.layer, r.op, r.pass_, r.kind, r.axes)
        entry = groups.setdefault(key, {"layer": r.layer, "op": r.op, "pass": r.pass_, "kind": r.kind,
                                        "axes": r.axes, "count": 0, "bytes": 0, "reason": r.reason})
        entry["count"] += 1
        entry["bytes"] += r.bytes
    return LayerTable(list(groups.values()), title=title)


def attribute(ops: list[CollectiveOp], model, distribution, outputs) -> list[CollectiveRow]:
    """One `CollectiveRow` per compiled collective instruction.

    Args:
        ops: The program's collectives (`hlo.collective_ops`).
        model: The model whose training step was compiled.
        distribution: The distribution it was compiled under.
        outputs: `layer_outputs(model, ...)`: the scope of every layer call.
    """
    prefix = f"{model.name}/"
    scopes = {o.scope.removeprefix(prefix): o.layer for o in outputs}
    trainable = list(model.trainable_variables)
    rows = []
    for op in ops:
        # XLA may combine several transfers into one; the first layer's backward source leads.
        ranked = sorted(op.sources, key=lambda src: (_layer_of(src.scope, scopes) in (LOSS, STEP), not src.backward))
        source = ranked[0] if ranked else None
        layers = list(dict.fromkeys(_layer_of(src.scope, scopes) for src in ranked)) or [STEP]
        layer = " + ".join(layers[:3]) + (f" + {len(layers) - 3} more" if len(layers) > 3 else "")
        weight = _weight_of(op.operand, trainable)
        passes = sorted({"backward" if src.backward else "forward" for src in op.sources}, reverse=True)
        reason = _reason(op, source, layer, weight, model, distribution)
        rows.append(CollectiveRow(
            layer=layer, op=source.op if source else "", kind=op.kind, axes=op.axes, bytes=op.bytes,
            pass_="+".join(passes), weight=weight.path if weight is not None else "", name=op.name,
            reason=f"{len(op.shapes)} transfers combined by XLA; {reason}" if len(op.sources) > 1 else reason,
        ))
    return rows


def _layer_of(scope: str, scopes: dict[str, str]) -> str:
    parts = scope.split("/") if scope else []
    for end in range(len(parts), 0, -1):
        found = scopes.get("/".join(parts[:end]))
        if found is not None:
            return found
    return LOSS if parts and parts[0] == "compile_loss" else STEP


def _weight_of(operand: str, trainable):
    match = re.fullmatch(r"state\[0\]\[(\d+)\]", operand)
    return trainable[int(match.group(1))] if match and int(match.group(1)) < len(trainable) else None


def _reason(op: CollectiveOp, source, layer: str, weight, model, distribution) -> str:
    over = "+".join(op.axes) or "all devices"
    if source is None:
        return "XLA recorded no source: most often the optimizer's update of a split weight, or a transfer it combined"
    when = "in the backward pass" if source.backward else "in the forward pass"
    if weight is not None:
        axes = tuple(distribution.get_variable_layout(weight).axes)
        if op.kind == "all-gather":
            return (f"{weight.path} is split {axes} and {source.op} needs it whole along {over}: "
                    f"XLA gathers it {when}")
        return f"{weight.path} (split {axes}) is moved by a {op.kind} over {over} for {source.op} {when}"
    if op.kind in ("all-reduce", "reduce-scatter") and source.backward and _is_gradient(op, layer, model):
        scatter = " and scattered to the devices that hold each part" if op.kind == "reduce-scatter" else ""
        batch_axis = distribution.batch_dim_name
        why = (f"each device computed them from its part of the batch ('{batch_axis}')" if batch_axis in op.axes
               else f"the activations they are computed from are split over {over}")
        return f"partial gradients of {layer}'s weights summed over {over}{scatter}: {why}"
    if op.kind in ("all-reduce", "reduce-scatter"):
        if source.op == "dot_general":
            return f"partial sums of {layer}'s {source.op} {when}: a dimension it contracts is split over {over}"
        return f"{source.op} {when} runs along a dimension split over {over}: partial results are summed"
    if op.kind == "all-gather":
        kernel = _kernel_layout(layer, model, distribution)
        return (f"an input of {layer}'s {source.op} is split over {over}{kernel}, and {source.op} needs it whole "
                f"there: XLA gathers it {when}")
    return f"XLA moves blocks of an operand of {layer}'s {source.op} between devices along {over} {when}"


def _is_gradient(op: CollectiveOp, layer: str, model) -> bool:
    """True when a result has the shape of a weight of `layer`, whole or one device's shard (size-1 dims aside)."""
    def bare(shape):
        return tuple(d for d in shape if d != 1)

    weights = [v for v in model.trainable_variables if v.path.rsplit("/", 1)[0] in layer.split(" + ")]
    shapes = {bare(v.shape) for v in weights} | {bare(placement(v).shard_shape) for v in weights}
    return any(bare(shape) in shapes for shape in op.shapes)


def _kernel_layout(layer: str, model, distribution) -> str:
    kernel = next((v for v in model.trainable_variables if v.path == f"{layer}/kernel"), None)
    if kernel is None:
        return ""
    axes = tuple(distribution.get_variable_layout(kernel).axes)
    return "; its kernel is whole" if all(a is None for a in axes) else f"; its kernel is split {axes}"


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

    Not modelled (see `not_modelled`): weights split over the batch axis
    (XLA gathers the weight or the activations, as sizes dictate),
    embeddings and other split weights, and reductions over split
    activations (norms, softmax, the loss).

    Args:
        model: The built model.
        distribution: Its distribution.
        batch_shape: The global shape of the first input.
        outputs: `layer_outputs(model, batch)` for activation sizes; without
            it an activation is one row of the kernel's width per example.
    """
    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    expected = _gradient_sums(model, distribution, sizes)
    shapes = {o.layer: o.shapes[0] for o in outputs or () if o.shapes}
    for layer, kernel, letters in _kernels(model, shapes):
        expected += _kernel_collectives(model, distribution, sizes, layer, kernel, letters, shapes, batch_shape)
    return expected


def _gradient_sums(model, distribution, sizes) -> list[Collective]:
    """One all-reduce over the batch axis of every weight's gradient that is not split over it."""
    batch_axis = distribution.batch_dim_name
    if sizes.get(batch_axis, 1) <= 1:
        return []
    gradient_bytes = sum(max(placement(v).bytes_per_device.values()) for v in model.trainable_variables
                         if batch_axis not in _axes_used(distribution.get_variable_layout(v).axes))
    if not gradient_bytes:
        return []
    return [Collective("all-reduce", (batch_axis,), 1, gradient_bytes,
                       f"expected: every weight's gradient summed over '{batch_axis}'")]


def _kernel_collectives(model, distribution, sizes, layer, kernel, letters, shapes, batch_shape) -> list[Collective]:
    """The partial sums a split Dense or EinsumDense kernel makes its output and its input gradient combine."""
    lhs, rhs, out = letters
    batch_axis = distribution.batch_dim_name
    batch_parts = sizes.get(batch_axis, 1)
    axes = dict(zip(rhs, tuple(distribution.get_variable_layout(kernel).axes) + (None,) * len(rhs)))
    if batch_axis in _axes_used(axes.values()):
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
        parts = math.prod(sizes[a] for c in divided_by for a in _axes_used([axes[c]]))
        return math.prod(size[c] for c in dims) * itemsize // batch_parts // parts

    def split_axes(dims):
        return dict.fromkeys(a for c in dims for a in _axes_used([axes[c]]) if sizes[a] > 1)

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
    batch_axis = distribution.batch_dim_name
    modelled = {id(kernel) for _, kernel, _ in _kernels(model, {})}
    notes = []
    for variable in model.trainable_variables:
        axes = tuple(distribution.get_variable_layout(variable).axes)
        if not _axes_used(axes) or variable.path.endswith("/bias"):
            continue  # whole, or a bias (added where its layer's output already is)
        if batch_axis in _axes_used(axes):
            notes.append(f"{variable.path} is split {axes}, over the batch axis '{batch_axis}': gathered where "
                         f"it is used, or the activations are gathered instead")
        elif id(variable) not in modelled:
            notes.append(f"{variable.path} {tuple(variable.shape)} is split {axes}: not the kernel of a Dense or "
                         f"EinsumDense layer (an embedding, a norm, a custom layer)")
    return notes


def _axes_used(axes) -> list[str]:
    used = []
    for entry in axes:
        used += [entry] if isinstance(entry, str) else list(entry or ())
    return used


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
