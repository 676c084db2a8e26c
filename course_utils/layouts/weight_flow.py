"""Which projection feeds which in a Keras model, from one abstract trace: the graph a layout map is derived from.

A *projection* is one use of a layer whose weight multiplies the activation: a `Dense`, an `EinsumDense`, a
convolution, or an embedding table (looked up, or multiplied to give logits: a tied output projection). Each
has, per dimension of its weight, a role read from the layer itself: *free* (the dimension reaches the result:
a Dense kernel's outputs, a query's heads), *contracted* (summed over: its inputs). Between two projections
the activation only flows through weightless operations and other weights (norm scales, biases, raw weights
such as a mixture's experts), which do not end a path.

`weight_flow(model)` traces the model once (`jax.make_jaxpr`, nothing computed) and follows each value forward
to the nearest projection upstream of it: a projection *feeds* another when its result reaches the other's
activation input with no projection between; it *reaches the output* when its result reaches what the model
returns that way. JAX decides who feeds whom, not a guess from layer names.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from course_utils.keras_internals import all_layers
from course_utils.layouts.layer_outputs import input_spec, symbolic_inputs

_LOOKUPS = ("gather", "dynamic_slice", "take", "take_along_axis")


@dataclass(frozen=True)
class Projection:
    """One use of a layer whose weight multiplies the activation.

    Attributes:
        layer: The layer's path ("mlp/up").
        kind: "dense" (a Dense or an EinsumDense), "convolution" or "embedding".
        use: "product" (the weight multiplies the activation) or "lookup" (rows of an embedding table).
        weight: The weight's path ("mlp/up/kernel").
        shape: The weight's shape.
        free: Dimensions of the weight that reach the result, outermost first.
        contracted: Dimensions summed over.
        bias: The layer's bias path and, per dimension of the bias, the weight dimension it follows.
    """

    layer: str
    kind: str
    use: str
    weight: str
    shape: tuple[int, ...]
    free: tuple[int, ...]
    contracted: tuple[int, ...]
    bias: tuple[str, tuple[int, ...]] | None = None

    @property
    def name(self) -> str:
        return f"{self.layer} ({self.use})" if self.use == "lookup" else self.layer

    def size(self, dims) -> int:
        size = 1
        for d in dims:
            size *= self.shape[d]
        return size


@dataclass(frozen=True)
class WeightFlow:
    """The projections of a model, in the order it runs them, and how their results flow.

    Attributes:
        projections: Every projection use.
        feeds: (i, j): projection i's result reaches projection j's activation input, no projection between.
        to_output: The projections whose result reaches the model's output with no projection between.
    """

    projections: tuple[Projection, ...]
    feeds: frozenset[tuple[int, int]]
    to_output: frozenset[int]

    def consumers(self, i: int) -> set[int]:
        return {j for a, j in self.feeds if a == i}

    def producers(self, j: int) -> set[int]:
        return {i for i, b in self.feeds if b == j}


def layer_projections(layer) -> list[Projection]:
    """The projections `layer` can make, with each weight dimension's role read from the layer (empty for a layer
    whose weights do not multiply its input: a norm, a raw-weight layer of a custom model)."""
    import keras

    kernel = getattr(layer, "kernel", None) if not isinstance(layer, keras.layers.Embedding) else None
    if isinstance(layer, keras.layers.EinsumDense) and "..." not in layer.equation and layer.equation.count(",") == 1:
        operands, outputs = layer.equation.split("->")
        inputs, letters = operands.split(",")
        bias = _bias(layer, [letters.index(c) for c in (layer.bias_axes or "")])
        return [Projection(layer.path, "dense", "product", kernel.path, tuple(kernel.shape),
                           tuple(i for i, c in enumerate(letters) if c in outputs),
                           tuple(i for i, c in enumerate(letters) if c in inputs and c not in outputs), bias)]
    if isinstance(layer, keras.layers.Dense) or _is_conv(layer):
        rank = len(kernel.shape)
        kind = "convolution" if _is_conv(layer) else "dense"
        return [Projection(layer.path, kind, "product", kernel.path, tuple(kernel.shape), (rank - 1,), (rank - 2,),
                           _bias(layer, [rank - 1]))]
    if isinstance(layer, keras.layers.Embedding):
        table = layer.embeddings
        found = [Projection(layer.path, "embedding", "lookup", table.path, tuple(table.shape), (1,), ())]
        reverse = getattr(layer, "reverse_embeddings", None)
        if getattr(layer, "tie_weights", False) or reverse is None:  # logits from the table itself
            found.append(Projection(layer.path, "embedding", "product", table.path, tuple(table.shape), (0,), (1,)))
        else:  # keras-hub's untied ReversibleEmbedding: a (hidden, vocabulary) matrix of its own
            found.append(Projection(layer.path, "embedding", "product", reverse.path, tuple(reverse.shape), (1,), (0,)))
        return found
    return []


def _bias(layer, dims: list[int]):
    bias = getattr(layer, "bias", None)
    return (bias.path, tuple(dims)) if bias is not None and len(dims) == len(bias.shape) else None


def _is_conv(layer) -> bool:
    import keras

    return isinstance(layer, (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)) and \
        not isinstance(layer, (keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose))


_TRACED = weakref.WeakKeyDictionary()  # model -> (its variables' paths and shapes, its WeightFlow)


def weight_flow(model, inputs=None) -> WeightFlow:
    """The model's projections and who feeds whom, from one abstract trace of `model(x)`.

    Traced once per model and set of variables on its own inputs (the advisor derives a map for every mesh shape
    of one model: the graph is the same).

    Args:
        model: A built Keras model.
        inputs: What the model takes, as arrays or `jax.ShapeDtypeStruct`s; by default its symbolic inputs (a
            subclassed model without them needs `inputs`).
    """
    if inputs is not None:
        return _traced_flow(model, inputs)
    state = tuple((v.path, tuple(v.shape), str(v.dtype)) for v in model.variables)
    kept = _TRACED.get(model)
    if kept is None or kept[0] != state:
        kept = _TRACED[model] = (state, _traced_flow(model, None))
    return kept[1]


def _traced_flow(model, inputs) -> WeightFlow:
    import jax
    from keras import StatelessScope

    specs = jax.tree.map(input_spec, inputs if inputs is not None else symbolic_inputs(model))
    projections = [p for layer in all_layers(model) for p in layer_projections(layer)]
    variables = list(model.variables)

    def call(values, x):
        with StatelessScope(state_mapping=list(zip(variables, values))):
            return model(x, training=False)

    closed = jax.make_jaxpr(call)([jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables], specs)
    index = {(p.weight, p.use): i for i, p in enumerate(projections)}
    weights = {var: variables[n].path for n, var in enumerate(closed.jaxpr.invars[:len(variables)])}
    walk = _Walk(index)
    reach = walk.run(closed.jaxpr, {v: ("weight", w) for v, w in weights.items()})
    order = sorted(walk.seen, key=walk.seen.get)
    renumber = {old: new for new, old in enumerate(order)}
    return WeightFlow(tuple(projections[i] for i in order),
                      frozenset((renumber[a], renumber[b]) for a, b in walk.feeds if a in renumber and b in renumber),
                      frozenset(renumber[i] for v in closed.jaxpr.outvars for i in _nearest(_value(reach, v))
                                if i in renumber))


def _literal(var) -> bool:
    return hasattr(var, "val")


def _value(values: dict, var):
    return None if _literal(var) else values.get(var)


def _nearest(value) -> frozenset:
    return value if isinstance(value, frozenset) else frozenset()


class _Walk:
    """Follows a jaxpr forward: each value is a weight ("weight", path), or the projections nearest upstream."""

    def __init__(self, index: dict):
        self.index, self.feeds, self.seen = index, set(), {}

    def run(self, jaxpr, values: dict) -> dict:
        for eqn in jaxpr.eqns:
            inner = _inner_jaxpr(eqn)
            if inner is not None:
                inside = self.run(inner, {a: _value(values, b) for a, b in zip(inner.invars, eqn.invars)})
                values.update({out: _value(inside, v) for out, v in zip(eqn.outvars, inner.outvars)})
                continue
            ins = [values.get(v) for v in eqn.invars if not _literal(v)]
            held = [w[1] for w in ins if isinstance(w, tuple)]
            upstream = frozenset().union(*(v for v in ins if isinstance(v, frozenset)))
            if held and len(held) == len(ins):  # a weight cast, reshaped or transposed: still that weight
                values.update({out: ("weight", held[0]) for out in eqn.outvars})
                continue
            use = "lookup" if eqn.primitive.name in _LOOKUPS else "product"
            made = [self.index[(w, use)] for w in held if (w, use) in self.index]
            if made:
                for i in made:
                    self.seen.setdefault(i, len(self.seen))
                    self.feeds |= {(a, i) for a in upstream}
                upstream = frozenset(made)
            values.update({out: upstream for out in eqn.outvars})
        return values


def _inner_jaxpr(eqn):
    """The jaxpr a call-like equation runs (pjit, a custom derivative, a checkpoint), taking its inputs as they are;
    None for anything else (loops and branches are followed as one operation)."""
    from jax.extend.core import ClosedJaxpr, Jaxpr

    for value in eqn.params.values():
        jaxpr = value.jaxpr if isinstance(value, ClosedJaxpr) else value
        if isinstance(jaxpr, Jaxpr) and len(jaxpr.invars) == len(eqn.invars) \
                and len(jaxpr.outvars) == len(eqn.outvars) and eqn.primitive.name not in ("scan", "while", "cond"):
            return jaxpr
    return None
