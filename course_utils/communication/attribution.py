"""Why each collective of a compiled training step is there: its Keras layer, its operation, a reason.

The layer and the operation come from the compiled program itself: XLA keeps
the JAX name stack of the operation a collective was inserted for
(`metadata={op_name=...}`, see `hlo.collective_ops`), and every Keras layer
opens one name scope (`layer_outputs` maps scopes to layer paths). The reason
joins that with the layout Keras gave the weights (`get_variable_layout`).

What the layout predicts, and what that prediction leaves out, is in
`expectation`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_utils._table import Table
from course_utils.communication.expectation import splitting_batch_axis
from course_utils.communication.hlo import CollectiveOp
from course_utils.communication.traffic import operand_bytes, ring_sent_bytes
from course_utils.layout_axes import axes_used
from course_utils.placements import placement

LOSS, STEP = "(loss)", "(training step)"


@dataclass(frozen=True)
class CollectiveRow:
    """One compiled collective, attributed to its source.

    Attributes:
        layer: Keras path of the layer it was inserted for, "(loss)" or
            "(training step)" (optimizer update, or no source recorded).
        op: The JAX operation, e.g. "dot_general"; "" when XLA recorded none.
        pass_: "forward", "backward", "optimizer" (the update, after the backward pass) or "" (unknown).
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
    gradient: bool = False  # a sum of the devices' partial gradients over the batch axis
    updates: tuple[str, ...] = ()  # the weights an optimizer's-update collective may belong to
    group_size: int = 1  # devices in each of its groups

    @property
    def operand_bytes(self) -> int:
        """Bytes of its operands on each device (`traffic.operand_bytes`)."""
        return operand_bytes(self.kind, self.bytes, self.group_size)

    @property
    def sent_bytes(self) -> int:
        """Bytes each device sends over the links, with the ring algorithm (`traffic.ring_sent_bytes`)."""
        return ring_sent_bytes(self.kind, self.bytes, self.group_size)


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
        if not op.sources and (owners := _weights_shaped_like(op, trainable)):
            rows.append(_update_row(op, owners, distribution))
            continue
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
            gradient=reason.startswith(_GRADIENTS), group_size=op.group_size,
        ))
    return rows


_GRADIENTS = "partial gradients"
UPDATE = "the optimizer's update of weights replicated over the batch axis, computed split"
RESHARD = ("resharding no rule of the layout asks for (all-to-all, collective-permute): activations or weights "
           "moved from one split to another")
FSDP = "weights split over the batch axis (FSDP): gathered, or their activations instead"
OTHER = "layers and operations the expectation does not model (embedding lookups, norms, softmax, routing)"
_MODELLED_OPS = ("dot_general",)


def unmodelled_part(row: CollectiveRow, model, distribution) -> str | None:
    """Which part of a step the layout's expectation does not model a compiled collective belongs to (None: modelled).

    Modelled are the gradient sums of weights not split over the batch axis and the partial sums of
    split Dense / EinsumDense kernels (`expectation.expected_collectives`).
    """
    if row.pass_ == "optimizer":
        return UPDATE
    if row.kind == "all-to-all":
        return RESHARD
    batch_axis = splitting_batch_axis(distribution)  # None on an axis of one device: nothing is FSDP's over it
    layers = set(row.layer.split(" + "))
    split = [batch_axis in axes_used(distribution.get_variable_layout(v).axes)
             for v in model.trainable_variables if v.path.rsplit("/", 1)[0] in layers]
    if row.gradient and not all(split or [False]):
        return None  # the gradient sums of weights not split over the batch axis: modelled
    if any(split):
        return FSDP
    if row.kind == "collective-permute":
        return RESHARD
    if row.op and row.op not in _MODELLED_OPS:
        return OTHER
    if row.op and not _has_kernel(layers, model):
        return OTHER
    return None


def _has_kernel(layers: set, model) -> bool:
    return any(v.path.rsplit("/", 1)[0] in layers and v.path.endswith("/kernel") for v in model.trainable_variables)


def _weights_shaped_like(op: CollectiveOp, trainable) -> list:
    """The trainable weights (whole) shaped as what a collective with no recorded source moves."""
    def bare(shape):
        return tuple(d for d in shape if d != 1)

    moved = {bare(shape) for shape in op.shapes}
    return [v for v in trainable if bare(tuple(v.shape)) in moved]


def _update_row(op: CollectiveOp, owners, distribution) -> CollectiveRow:
    """A collective of the optimizer's update: XLA records no source, its shape names the weight."""
    layers = list(dict.fromkeys(v.path.rsplit("/", 1)[0] for v in owners))
    over = "+".join(op.axes) or "all devices"
    named = owners[0].path if len(owners) == 1 else f"one of {len(owners)} weights of this shape ({owners[0].path}, ...)"
    replicated = all(distribution.batch_dim_name not in axes_used(distribution.get_variable_layout(v).axes) for v in owners)
    where = f"replicated over '{distribution.batch_dim_name}'" if replicated else "split"
    if op.kind == "all-gather":
        reason = (f"the optimizer's update of {named} ({where}): XLA computes it split over {over} and gathers "
                  f"the result back, for the weight and for each optimizer slot")
    else:
        reason = (f"the gradient sync of {named} ({where}): the devices' gradients combined over {over} for the "
                  f"optimizer's update")
    return CollectiveRow(layer=" + ".join(layers[:3]) + (f" + {len(layers) - 3} more" if len(layers) > 3 else ""),
                         op="", kind=op.kind, axes=op.axes, bytes=op.bytes, pass_="optimizer",
                         weight=owners[0].path if len(owners) == 1 else "", reason=reason, name=op.name,
                         updates=tuple(v.path for v in owners), group_size=op.group_size)


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
        if op.kind in ("all-to-all", "collective-permute"):
            return (f"resharding: {weight.path} (split {axes}) is moved from one split to another along {over} "
                    f"for {source.op} {when}")
        return f"{weight.path} (split {axes}) is moved by a {op.kind} over {over} for {source.op} {when}"
    if op.kind in ("all-reduce", "reduce-scatter") and source.backward and _is_gradient(op, layer, model):
        scatter = " and scattered to the devices that hold each part" if op.kind == "reduce-scatter" else ""
        batch_axis = distribution.batch_dim_name
        why = (f"each device computed them from its part of the batch ('{batch_axis}')" if batch_axis in op.axes
               else f"the activations they are computed from are split over {over}")
        return f"{_GRADIENTS} of {layer}'s weights summed over {over}{scatter}: {why}"
    if op.kind in ("all-reduce", "reduce-scatter"):
        if source.op == "dot_general":
            return f"partial sums of {layer}'s {source.op} {when}: a dimension it contracts is split over {over}"
        return f"{source.op} {when} runs along a dimension split over {over}: partial results are summed"
    if op.kind == "all-gather":
        kernel = _kernel_layout(layer, model, distribution)
        return (f"an input of {layer}'s {source.op} is split over {over}{kernel}, and {source.op} needs it whole "
                f"there: XLA gathers it {when}")
    if op.kind in ("all-to-all", "collective-permute"):
        return (f"resharding: XLA moves the activations of {layer}'s {source.op} from one split to another "
                f"along {over} {when}; no rule asks for it (two rules split one dimension over different axes, "
                f"or an output layout does)")
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
