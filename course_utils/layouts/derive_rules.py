"""The rules `derive.derive_layout_map` applies, one step each, filling a `Plan`: axes and reasons per weight.

- `tensor_parallel`: Megatron's pairs, the output projection, large embedding tables and convolutions over the model
  axis (the module notes of `derive` say when each applies);
- `fsdp`: every weight over the data axis, on the dimension that carries the model's width;
- `pin_outputs`: each projection output the model axis leaves whole kept split by the batch;
- `explain_whole`: why each weight no step took is left whole.
"""

from __future__ import annotations

import re

from course_utils.layouts.weight_flow import Projection, WeightFlow


class Plan:
    """Axes and reasons per weight, filled in as the rules are found."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]):
        self.shapes = shapes
        self.axes = {path: [None] * len(shape) for path, shape in shapes.items()}
        self.reasons: dict[str, list[str]] = {path: [] for path in shapes}
        self.pairs: list[tuple[tuple[str, ...], str]] = []
        self.assigned: set[str] = set()
        self.outputs: dict[str, tuple] = {}  # "<layer>/output" -> the axes it is pinned to

    def split(self, path: str, dim: int, axis: str, reason: str) -> None:
        self.axes[path][dim] = axis
        self.reasons[path].append(reason)

    def note(self, path: str, reason: str) -> None:
        """Why `path` is not split over an axis."""
        self.reasons[path].append(reason)

    def reason(self, path: str) -> str:
        """Its reasons in one line, the layers' numbers written N (one rule serves every block)."""
        return re.sub(r"(\D)\d+(?=/)", r"\1N", "; ".join(self.reasons[path]))


def tensor_parallel(flow: WeightFlow, plan: Plan, axis: str, n: int) -> None:
    """Over the model axis (`axis`, of `n` devices): Megatron's pairs first, then the output projection, then
    large embedding tables and convolutions; a weight an earlier step took is not taken again."""
    projections = flow.projections
    for c, consumer in enumerate(projections):
        producers = sorted(flow.producers(c))
        if consumer.kind != "dense" or not producers or consumer.weight in plan.assigned:
            continue
        members = [projections[p] for p in producers]
        exclusive = all(flow.consumers(p) == {c} and p not in flow.to_output and projections[p].kind == "dense"
                        for p in producers)
        if exclusive and not any(m.weight in plan.assigned for m in members):
            _pair(members, consumer, plan, axis, n)
    for p in flow.to_output:
        _output_projection(projections[p], plan, axis, n)
    for projection in projections:
        _lookup_or_convolution(projection, plan, axis, n)


def _pair(members: list[Projection], consumer: Projection, plan: Plan, axis: str, n: int) -> None:
    row = consumer.contracted[0]
    size = consumer.shape[row]
    split = [m for m in members if m.shape[m.free[0]] == size and size % n == 0]
    if not split:
        return
    names = ", ".join(m.layer for m in split)
    for m in members:
        plan.assigned.add(m.weight)
        if m not in split:
            plan.note(m.weight, f"not split over {axis!r}: {m.layer} feeds {consumer.layer} alongside {names}, but "
                                f"its dimension {m.free[0]} ({m.shape[m.free[0]]}) is not theirs ({size} over {n} "
                                f"devices; key/value heads fewer than query heads): each device computes it whole")
            continue
        plan.split(m.weight, m.free[0], axis, f"columns of a Megatron pair: {m.layer} reads {m.size(m.contracted)} "
                   f"and its result ({size} along dimension {m.free[0]}) feeds only {consumer.layer}: it stays split "
                   f"over {axis!r}")
        _bias(m, m.free[0], plan, axis)
    plan.assigned.add(consumer.weight)
    plan.split(consumer.weight, row, axis, f"rows of a Megatron pair: {consumer.layer} sums over the split result of "
               f"{names}; one all-reduce over {axis!r} closes the pair in the forward pass")
    if consumer.bias:
        plan.note(consumer.bias[0], f"not split over {axis!r}: the bias of {consumer.layer}, added after the "
                                    f"all-reduce")
    plan.pairs.append((tuple(m.layer for m in split), consumer.layer))


def _bias(projection: Projection, dim: int, plan: Plan, axis: str) -> None:
    if projection.bias and dim in projection.bias[1]:
        path, follows = projection.bias
        plan.split(path, follows.index(dim), axis, f"bias of {projection.layer}: split as its outputs are")


def _output_projection(projection: Projection, plan: Plan, axis: str, n: int) -> None:
    dim = projection.free[0]
    widens = projection.size(projection.free) >= 2 * projection.size(projection.contracted)
    if projection.use == "product" and widens and projection.weight not in plan.assigned and \
            projection.shape[dim] % n == 0:
        plan.assigned.add(projection.weight)
        plan.split(projection.weight, dim, axis, f"the output projection: {projection.layer} widens "
                   f"{projection.size(projection.contracted)} to {projection.shape[dim]} and gives the model's result; "
                   f"split over {axis!r}, no device holds all of it")
        _bias(projection, dim, plan, axis)


def _lookup_or_convolution(projection: Projection, plan: Plan, axis: str, n: int) -> None:
    if projection.weight in plan.assigned:
        return
    rows, columns = projection.shape[0], projection.shape[-1]
    if projection.use == "lookup" and rows >= 8 * columns and rows % n == 0:
        plan.assigned.add(projection.weight)
        plan.split(projection.weight, 0, axis, f"an embedding table of {rows} rows, {rows // columns}x its width: "
                   f"its rows split over {axis!r} (each device looks up its own and one all-reduce joins them)")
    elif projection.kind == "convolution" and projection.shape[-1] % n == 0:
        plan.assigned.add(projection.weight)
        plan.split(projection.weight, len(projection.shape) - 1, axis,
                   f"a convolution split by its {columns} output channels over {axis!r}")
        _bias(projection, len(projection.shape) - 1, plan, axis)


def fsdp(plan: Plan, flow: WeightFlow, axis: str, n: int) -> None:
    """Every weight split over the data axis on the dimension that carries the model's width: the contracted one
    of a projection whose results the model axis splits (its input), the free one of any other projection (its
    output), the largest of any other weight. XLA then gathers the weight where it is used, rather than resharding
    the activations around it (a contracted dimension split like the batch makes it move activations instead)."""
    roles = {p.weight: p for p in flow.projections if p.use == "product"}
    for path, shape in plan.shapes.items():
        axes = plan.axes[path]
        role = roles.get(path)
        if role is not None and any(axes[d] for d in role.free):
            order = [*role.contracted, *role.free]
        elif role is not None:  # rows of a pair, or a projection left whole by the model axis
            order = [*role.free, *role.contracted]
        else:
            order = sorted(range(len(shape)), key=lambda d: -shape[d])
        free = [d for d in order if axes[d] is None and shape[d] % n == 0 and shape[d] >= n]
        if free:
            plan.split(path, free[0], axis, f"FSDP: dimension {free[0]} ({shape[free[0]]}) split over {axis!r}, "
                                            f"gathered where it is used")
        else:
            plan.note(path, f"no dimension of {shape} free to split over {axis!r} divides its {n} devices")


def explain_whole(plan: Plan, model_axis: str | None, data_axis: str, *, fsdp: bool, fsdp_ran: bool) -> None:
    """Why each weight no rule took is left whole: over the model axis where no step said why, over the data axis
    where FSDP did not run (when it runs, it says why of every weight it cannot split)."""
    if model_axis:
        model = (f"no rule over {model_axis!r} takes it (it is not in a Megatron pair, not an output projection "
                 f"that widens, not an embedding table or a convolution)")
    else:
        model = "no axis splits the model (tensor_parallel=False, or no model axis of more than one device)"
    data = "FSDP is off (fsdp=False)" if not fsdp else f"{data_axis!r} has one device: no FSDP"
    for path, axes in plan.axes.items():
        if any(axes):
            continue
        if not plan.reasons[path]:
            plan.note(path, model)
        if not fsdp_ran:
            plan.note(path, data)


def pin_outputs(model, flow: WeightFlow, plan: Plan, axis: str, inputs) -> None:
    """Each projection's output that the model axis does not split kept split by the batch, as lesson 08 pins a
    block's: with its weights split over the same axis as the rows, XLA would otherwise move the activation
    around them (all-to-alls, permutes) rather than gather the weight (FSDP as ZeRO-3 describes it)."""
    from course_utils.layouts.layer_outputs import layer_outputs

    split = {p.layer for p in flow.projections if any(plan.axes[p.weight][d] not in (None, axis) for d in p.free)}
    layers = {p.layer for p in flow.projections} - split
    for output in layer_outputs(model, inputs):
        if output.layer in layers and len(output.shapes) == 1 and len(output.shapes[0]) >= 2:
            plan.outputs[output.path] = (axis,) + (None,) * (len(output.shapes[0]) - 1)
