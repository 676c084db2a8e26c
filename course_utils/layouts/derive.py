r"""A layout map for any Keras model, derived from its traced graph, each rule with the reason it was written.

`derive_layout_map(model, mesh)` reads who feeds whom (`weight_flow`: one abstract trace) and writes:

- **Megatron's pairs** over the model axis: Dense and EinsumDense layers whose result feeds one such layer only (and
  not the model's output) form a pair with it. The first ones are split by their
  outermost free dimension (columns: a Dense's outputs, a query's heads), the last one by its outermost
  contracted dimension (rows), so the activation between them stays split and one all-reduce closes the pair in
  the forward pass. A member whose dimension is not the pair's (two key/value heads beside eight query heads)
  or does not divide is kept whole. Attention is such a pair: query, key and value feed the output projection.
- **The output projection** split over the model axis where it widens (logits over a vocabulary): no device
  holds every logit. A tied embedding table follows it; an untied one is split by rows where it is the large
  weight it usually is (eight times as many rows as columns).
- **Convolutions** split by their output channels (XLA gathers them where the next layer takes them: it does
  not sum a convolution's input channels over devices).
- **FSDP** over the data axis for every weight, on the dimension that carries the model's width (it divides and is
  not split yet), and the output of each projection the model axis leaves whole pinned to the batch, so that XLA
  gathers the weights instead of moving the activations (lesson 08's "batch kept split").

Every weight left whole is named with why. The result is a `DerivedLayout`: a real `LayoutMap`
(`.layout_map`) and the table of its rules, one key per group of layers that differ only by their numbers
(`decoder_block(_\d+)?/...`: every block, and the same layers when Keras numbers them anew in a model built
again).
Derived in lesson 04; `advise` ranks its variants for any model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_utils._table import Table
from course_utils.layouts.weight_flow import Projection, WeightFlow, weight_flow


@dataclass(frozen=True)
class DerivedRule:
    """One rule of a derived map: its key, the axes it gives, the weights it matches and why it was written."""

    key: str
    axes: tuple
    weights: tuple[str, ...]
    reason: str


class DerivedLayout(Table):
    """A layout map derived from a model's graph (`derive_layout_map`): its rules with their reasons.

    Attributes:
        layout_map: The `keras.distribution.LayoutMap` to train with.
        whole: (weight path, why it is left whole) for every weight no axis splits.
        pairs: Megatron's pairs found: (the layers split by columns, the layer split by rows).
    """

    columns = ("key", "axes", "weights", "why")

    def __init__(self, rules, *, layout_map, whole, pairs, title: str):
        super().__init__(rules, title=title)
        self.layout_map, self.whole, self.pairs = layout_map, tuple(whole), tuple(pairs)

    def cells(self, rule: DerivedRule) -> list[str]:
        return [rule.key, str(rule.axes), str(len(rule.weights)), rule.reason]

    def notes(self) -> list[str]:
        return [f"Left whole: {path}: {why}" for path, why in self.whole]

    @property
    def rules(self) -> dict[str, tuple]:
        """{key: axes}, as `make_layout_map` and `advise(layouts=...)` take them."""
        return {r.key: r.axes for r in self.rows}

    def why(self, path: str) -> str:
        """How the map lays out the weight at `path`, and why: its rule's axes and reason, or "whole" and why.

        Example:
            >>> derived.why("narrow/kernel")
            "('model', None): rows of a Megatron pair: narrow sums over the split result of wide; ..."
        """
        for rule in self.rows:
            if path in rule.weights:
                return f"{rule.axes}: {rule.reason}"
        whole = dict(self.whole)
        if path in whole:
            return f"whole: {whole[path]}"
        known = sorted({w for r in self.rows for w in r.weights} | set(whole))
        raise KeyError(f"{path!r} is no weight of the model this map was derived for. Its weights: {known}.")


def derive_layout_map(model, mesh, *, tensor_parallel: bool = True, fsdp: bool = True, inputs=None,
                      data_axis: str | None = None, model_axis: str | None = None) -> DerivedLayout:
    """A layout map for `model` on `mesh`, derived from its traced graph (see the module's notes).

    Args:
        model: A built Keras model (Sequential, functional, subclassed with `inputs=`, a keras-hub backbone).
        mesh: A `keras.distribution.DeviceMesh`: its first axis holds the data (the batch, FSDP), the second,
            if any, the model (Megatron's pairs).
        tensor_parallel: Split Megatron's pairs, the output projection and convolutions over the model axis.
        fsdp: Split every weight over the data axis where a dimension divides.
        inputs: What the model takes (arrays or `jax.ShapeDtypeStruct`s) when it has no symbolic inputs.
        data_axis, model_axis: Other roles for the mesh's axes (by default its first and second).

    Example:
        >>> derived = derive_layout_map(model, make_mesh((2, 4), ("batch", "model")))
        >>> distribution.ModelParallel(layout_map=derived.layout_map, batch_dim_name="batch")
    """
    from course_utils.guards import require_built, require_mesh

    require_built(model, "derive_layout_map")
    require_mesh(mesh, "derive_layout_map")
    names, sizes = tuple(mesh.axis_names), dict(zip(mesh.axis_names, mesh.shape))
    data_axis = data_axis or names[0]
    model_axis = model_axis or (names[1] if len(names) > 1 else None)
    for role, axis in (("data_axis", data_axis), ("model_axis", model_axis)):
        if axis is not None and axis not in sizes:
            raise ValueError(f"{role}={axis!r} is not an axis of the mesh, whose axes are {names}. Name one of them.")
    plan = _Plan({v.path: tuple(v.shape) for v in model.weights})
    flow = weight_flow(model, inputs)
    split_model = bool(tensor_parallel and model_axis and sizes[model_axis] > 1)
    if split_model:
        _tensor_parallel(flow, plan, model_axis, sizes[model_axis])
    fsdp_ran = bool(fsdp and sizes[data_axis] > 1)
    if fsdp_ran:
        _fsdp(plan, flow, data_axis, sizes[data_axis])
        _pin_outputs(model, flow, plan, data_axis, inputs)
    _explain_whole(plan, model_axis if split_model else None, data_axis, fsdp=fsdp, fsdp_ran=fsdp_ran)
    return _derived(model, mesh, plan)


class _Plan:
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


def _tensor_parallel(flow: WeightFlow, plan: _Plan, axis: str, n: int) -> None:
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


def _pair(members: list[Projection], consumer: Projection, plan: _Plan, axis: str, n: int) -> None:
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


def _bias(projection: Projection, dim: int, plan: _Plan, axis: str) -> None:
    if projection.bias and dim in projection.bias[1]:
        path, follows = projection.bias
        plan.split(path, follows.index(dim), axis, f"bias of {projection.layer}: split as its outputs are")


def _output_projection(projection: Projection, plan: _Plan, axis: str, n: int) -> None:
    dim = projection.free[0]
    widens = projection.size(projection.free) >= 2 * projection.size(projection.contracted)
    if projection.use == "product" and widens and projection.weight not in plan.assigned and \
            projection.shape[dim] % n == 0:
        plan.assigned.add(projection.weight)
        plan.split(projection.weight, dim, axis, f"the output projection: {projection.layer} widens "
                   f"{projection.size(projection.contracted)} to {projection.shape[dim]} and gives the model's result; "
                   f"split over {axis!r}, no device holds all of it")
        _bias(projection, dim, plan, axis)


def _lookup_or_convolution(projection: Projection, plan: _Plan, axis: str, n: int) -> None:
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


def _fsdp(plan: _Plan, flow: WeightFlow, axis: str, n: int) -> None:
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


def _explain_whole(plan: _Plan, model_axis: str | None, data_axis: str, *, fsdp: bool, fsdp_ran: bool) -> None:
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


def _pin_outputs(model, flow: WeightFlow, plan: _Plan, axis: str, inputs) -> None:
    """Each projection's output that the model axis does not split kept split by the batch, as lesson 08 pins a
    block's: with its weights split over the same axis as the rows, XLA would otherwise move the activation
    around them (all-to-alls, permutes) rather than gather the weight (FSDP as ZeRO-3 describes it)."""
    from course_utils.layouts.layer_outputs import layer_outputs

    split = {p.layer for p in flow.projections if any(plan.axes[p.weight][d] not in (None, axis) for d in p.free)}
    layers = {p.layer for p in flow.projections} - split
    for output in layer_outputs(model, inputs):
        if output.layer in layers and len(output.shapes) == 1 and len(output.shapes[0]) >= 2:
            plan.outputs[output.path] = (axis,) + (None,) * (len(output.shapes[0]) - 1)


def _derived(model, mesh, plan: _Plan) -> DerivedLayout:
    from course_utils.layouts.layout_map import make_layout_map

    groups: dict[tuple, list[str]] = {}
    for path, axes in plan.axes.items():
        if any(axes):
            groups.setdefault((_general(path), tuple(axes), plan.reason(path)), []).append(path)
    keys = {}
    for (general, axes, reason), paths in groups.items():
        clash = any(_general(p) == general and p not in paths for p in plan.axes)
        for key in ([re.escape(p) for p in paths] if clash else [general]):
            keys[key] = DerivedRule(key, axes, tuple(p for p in paths if re.fullmatch(key, p)), reason)
    for path, axes in plan.outputs.items():
        general = _general(path)
        same = [p for p in plan.outputs if _general(p) == general]
        key = general if all(plan.outputs[p] == axes for p in same) else re.escape(path)
        keys[key] = DerivedRule(key, axes, tuple(p for p in plan.outputs if re.fullmatch(key, p)),
                                f"the output of {path.removesuffix('/output')} kept split by the batch over "
                                f"{axes[0]!r}: FSDP's weights are gathered where they are used, the activation "
                                f"stays where it is")
    rules = list(keys.values())
    layout_map = make_layout_map(mesh, {r.key: r.axes for r in rules})
    whole = sorted((p, plan.reason(p)) for p, axes in plan.axes.items() if not any(axes))
    return DerivedLayout(rules, layout_map=layout_map, whole=whole, pairs=plan.pairs,
                         title=f"Layout map derived for {model.name} on a {tuple(mesh.shape)} mesh "
                               f"{tuple(mesh.axis_names)}: {len(rules)} rules, {len(plan.pairs)} Megatron pair(s)")


def _general(path: str) -> str:
    r"""The key for every layer that differs from `path` only by its numbers: each layer's name with any number
    Keras gives it (`decoder_block_0`, or `dense_1` when a model is built again) written `(_\d+)?`, so the map
    still matches when the model is built again in the same session."""
    *layers, weight = path.split("/")
    general = [re.sub(r"\d+", r"\\d+", re.escape(re.sub(r"_\d+$", "", name))) + r"(_\d+)?" for name in layers]
    return "/".join([*general, re.escape(weight)])
