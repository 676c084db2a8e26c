"""The roles a LayoutMap gives weights that work together, checked on the model: what keras-hub's tracker found.

`check_layout_map` runs it after its own checks, beside `anchors.unanchored_keys` and `blame.blame_indivisible`;
each finding carries its fix as rules (`Problem.fix`, written by `rule_keys`).

- `contradictions`: a projection (a Keras `EinsumDense`) makes an activation that another projection of
  the same layer takes, and their two kernels split one dimension of it over different mesh axes. The
  map builds, but XLA reshards the activation between them in every step (keras-hub issue #2827: Llama's
  and Qwen's query/key/value put the heads on "batch", attention_output on "model"). Which projection
  feeds which is JAX's answer (one abstract trace), not a guess from layer names.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils.keras_internals import all_layers
from course_utils.layout_axes import names_in
from course_utils.layouts.problems import Problem
from course_utils.layouts.layer_outputs import input_spec, symbolic_inputs
from course_utils.layouts.layout_map import UNMATCHED, matched_rule
from course_utils.layouts.rule_keys import _axes_of, _divisible, _heads, _padded, _replacing, _rule_of, _rules


@dataclass(frozen=True)
class Projection:
    """An `EinsumDense` layer: its kernel, and its equation `inputs,weights->outputs`, a letter a dimension."""

    layer: str
    kernel: str
    shape: tuple[int, ...]
    inputs: str
    weights: str
    outputs: str

    @property
    def name(self) -> str:
        return self.layer.rpartition("/")[2]

    @property
    def parent(self) -> str:
        return self.layer.rpartition("/")[0]

@dataclass(frozen=True)
class Clash:
    """Dimension `position` of the activation `producer` makes and `consumer` takes, split two ways."""

    producer: Projection
    consumer: Projection
    position: int
    produced: tuple[str, ...]  # the mesh axes the producer's kernel gives that dimension
    taken: tuple[str, ...]  # the mesh axes the consumer's kernel gives it

def projections(model) -> list[Projection]:
    """Every `EinsumDense` of `model` with a two-operand equation ("bqm,muh->bquh"), in the model's order."""
    import keras

    found = []
    for layer in all_layers(model):
        equation = getattr(layer, "equation", "")
        if isinstance(layer, keras.layers.EinsumDense) and "..." not in equation and equation.count(",") == 1:
            operands, outputs = equation.split("->")
            inputs, weights = operands.split(",")
            found.append(Projection(layer.path, layer.kernel.path, tuple(layer.kernel.shape), inputs, weights, outputs))
    order = {v.path: i for i, v in enumerate(model.variables)}
    return sorted(found, key=lambda p: order[p.kernel])  # query before key and value

def contradictions(layout_map, model, inputs=None) -> list[Problem]:
    """A warning for each pair of keys whose kernels split one activation's dimension over different axes.

    Only pairs JAX's trace connects count; a model that cannot be traced (no symbolic inputs and no
    `inputs`) gives none.
    """
    projs = projections(model)
    clashes = list(_clashes(projs, layout_map))
    if clashes:
        feeds = _feeds(model, projs, inputs)
        clashes = [c for c in clashes if (c.producer.kernel, c.consumer.kernel) in feeds]
    groups: dict[tuple, list[Clash]] = {}
    for clash in clashes:
        groups.setdefault((matched_rule(layout_map, clash.producer.kernel),
                           matched_rule(layout_map, clash.consumer.kernel)), []).append(clash)
    return [_contradiction(keys, group, layout_map, model) for keys, group in groups.items()]

def _clashes(projs, layout_map):
    for producer in projs:
        for consumer in projs:
            if consumer is producer or consumer.parent != producer.parent or len(producer.outputs) != len(consumer.inputs):
                continue
            made, taken = _axes(layout_map, producer), _axes(layout_map, consumer)
            for position, (mine, theirs) in enumerate(zip(producer.outputs, consumer.inputs)):
                if made and taken and mine in producer.weights and theirs in consumer.weights:
                    a = names_in(made[producer.weights.index(mine)])
                    b = names_in(taken[consumer.weights.index(theirs)])
                    if a and b and a != b:
                        yield Clash(producer, consumer, position, a, b)

def _axes(layout_map, proj: Projection) -> tuple | None:
    """The kernel's layout, an entry a dimension (None: no rule, or two keys, an error of its own)."""
    key = _rule_of(layout_map, proj.kernel)
    return None if key in (None, UNMATCHED) else _padded(layout_map, key, proj.shape)

def _feeds(model, projs, inputs) -> set[tuple[str, str]]:
    """(producer kernel, consumer kernel): the producer's result flows into the consumer's input.

    JAX decides: one abstract trace of the model (`jax.make_jaxpr`, nothing computed), followed forward
    from the operation that takes each kernel.
    """
    import jax

    try:
        specs = jax.tree.map(input_spec, inputs if inputs is not None else symbolic_inputs(model))
    except ValueError:  # no symbolic inputs: nothing to trace with
        return set()
    return _trace_feeds(model, projs, specs)

def _trace_feeds(model, projs, specs) -> set[tuple[str, str]]:
    import jax
    from keras import StatelessScope

    def call(values, x):
        with StatelessScope(state_mapping=list(zip(model.variables, values))):
            return model(x, training=False)

    weights = [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in model.variables]
    jaxpr = jax.make_jaxpr(call)(weights, specs).jaxpr
    paths = [v.path for v in model.variables]
    kernel_of = {jaxpr.invars[paths.index(p.kernel)]: p.kernel for p in projs}  # values made from a kernel alone
    reach: dict = {}  # value -> the kernels whose projection's result it depends on
    feeds = set()
    for eqn in jaxpr.eqns:
        ins = [v for v in eqn.invars if not hasattr(v, "val")]  # literals aside
        kernels = {kernel_of[v] for v in ins if v in kernel_of}
        activations = [v for v in ins if v not in kernel_of]
        if kernels and not activations:  # a cast of the kernel: still the kernel
            kernel_of.update({v: next(iter(kernels)) for v in eqn.outvars})
            continue
        upstream = frozenset().union(*(reach.get(v, ()) for v in activations))
        feeds |= {(p, k) for k in kernels for p in upstream}
        reach.update({v: upstream | kernels for v in eqn.outvars})
    return feeds

def _contradiction(keys, clashes: list[Clash], layout_map, model) -> Problem:
    """The warning for one pair of keys: the side that puts the data axis on the activation follows the other."""
    first, data_axis = clashes[0], layout_map.device_mesh.axis_names[0]
    follow = data_axis in first.taken and data_axis not in first.produced  # the consumer follows the producer
    changed: dict[str, tuple] = {}
    for clash in clashes:
        proj, target = (clash.consumer, clash.produced) if follow else (clash.producer, clash.taken)
        dim = proj.weights.index((proj.inputs if follow else proj.outputs)[clash.position])
        axes = _swap(changed.get(proj.kernel) or _axes(layout_map, proj), dim, target)
        changed[proj.kernel] = _divisible(proj.shape, axes, layout_map)
    key, kept = (keys[1], keys[0]) if follow else keys
    rules = _rules(key, changed, layout_map, model)
    producer = first.producer
    letter = producer.outputs[first.position]
    size = producer.shape[producer.weights.index(letter)]
    layers = sorted({c.producer.parent for c in clashes})
    makers = ", ".join(dict.fromkeys(c.producer.name for c in clashes))
    return Problem("contradictory_roles", key, producer.kernel, (
        f"Keys {keys[0]!r} and {keys[1]!r} give one activation opposite roles: {makers} make(s) its dimension "
        f"{first.position} ('{letter}' of '{producer.outputs}', size {size}{_heads(model, producer.parent, size)}) "
        f"split over {_named(first.produced, data_axis)}, and {first.consumer.name}, which takes it, splits it over "
        f"{_named(first.taken, data_axis)} (in {len(layers)} layer(s), e.g. {layers[0]!r}). The map builds, but in "
        f"every step XLA moves that activation from one split to the other (all-gathers and collective-permutes no "
        f"rule asks for). Rules that "
        f"agree, both over {_named(first.produced if follow else first.taken, data_axis)}: "
        f"{({**rules, kept: _axes_of(layout_map, kept)})!r}. In place: {_replacing(key, rules)}"),
        severity="warning", fix=rules)

def _swap(axes: tuple, dim: int, target: tuple[str, ...]) -> tuple:
    """`axes` with `target` on dimension `dim`; the dimension that held `target` takes what `dim` held."""
    new = [axes[dim] if names_in(entry) == target else entry for entry in axes]
    new[dim] = target[0] if len(target) == 1 else target
    return tuple(new)

def _named(axes: tuple[str, ...], data_axis: str) -> str:
    text = "+".join(repr(a) for a in axes)
    return f"{text} (the data axis)" if data_axis in axes else text
