r"""A layout map for any Keras model, derived from its traced graph, each rule with the reason it was written.

`derive_layout_map(model, mesh)` reads who feeds whom (`weight_flow`: one abstract trace) and writes (each step in
`derive_rules`):

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
from course_utils.layouts import derive_rules
from course_utils.layouts.derive_rules import Plan
from course_utils.layouts.weight_flow import weight_flow


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
    plan = Plan({v.path: tuple(v.shape) for v in model.weights})
    flow = weight_flow(model, inputs)
    split_model = bool(tensor_parallel and model_axis and sizes[model_axis] > 1)
    if split_model:
        derive_rules.tensor_parallel(flow, plan, model_axis, sizes[model_axis])
    fsdp_ran = bool(fsdp and sizes[data_axis] > 1)
    if fsdp_ran:
        derive_rules.fsdp(plan, flow, data_axis, sizes[data_axis])
        derive_rules.pin_outputs(model, flow, plan, data_axis, inputs)
    derive_rules.explain_whole(plan, model_axis if split_model else None, data_axis, fsdp=fsdp, fsdp_ran=fsdp_ran)
    return _derived(model, mesh, plan)


def _derived(model, mesh, plan: Plan) -> DerivedLayout:
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
