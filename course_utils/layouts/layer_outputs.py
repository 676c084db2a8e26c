"""Every layer-output path Keras looks up during one call of a model, with the output's shape.

After each layer call, `keras.layers.Layer.__call__` asks the active
distribution for `get_tensor_layout(current_path() + "/output")`, weightless
layers (dropout, rotary embeddings, softmax) included; `ModelParallel`
answers from its `LayoutMap`. `layer_outputs` listens to those questions
during one abstract call of the model (`jax.make_jaxpr`: no array is
computed), answers each with a replicated layout so that JAX records the
output it constrains, and reads the output's shape from the traced program.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from course_utils.keras_internals import name_scope_path

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class LayerOutput:
    """One output lookup Keras makes during a call.

    Attributes:
        path: The path Keras asks the distribution for, "<layer path>/output".
        scope: The JAX name stack of the layer's operations (how compiled
            programs name them; it can differ from the Keras path by the
            names of enclosing models).
        shapes: The shape of each output tensor (several for a layer that
            returns a tuple).
    """

    path: str
    scope: str
    shapes: tuple[tuple[int, ...], ...]

    @property
    def layer(self) -> str:
        """The Keras path of the layer (the lookup path without "/output")."""
        return self.path.removesuffix("/output")


def layer_outputs(model, inputs=None) -> list[LayerOutput]:
    """The output paths Keras looks up when `model` is called, in call order.

    Includes the model's own "<model name>/output", looked up when it is
    called as `model(x)` (not inside `fit`'s training step). The result is
    cached per model and input shapes.

    Args:
        model: A built Keras model.
        inputs: Inputs for one call (arrays, a dict of arrays, or anything
            with `.shape` and `.dtype`). Defaults to the model's symbolic
            inputs, with each unknown dimension set to 2.

    Returns:
        A list of `LayerOutput`s.

    Example:
        >>> [o.path for o in layer_outputs(models.mlp())]
        ['mlp/d1/output', 'mlp/d2/output', 'mlp/output']
    """
    import jax

    specs = jax.tree.map(input_spec, inputs if inputs is not None else symbolic_inputs(model))
    key = (len(model.variables), str(jax.tree.structure(specs)),
           tuple((s.shape, str(s.dtype)) for s in jax.tree.leaves(specs)))
    cached = _CACHE.get(model)
    if cached is None or cached[0] != key:
        cached = (key, _trace(model, specs))
        _CACHE[model] = cached
    return list(cached[1])


def symbolic_inputs(model):
    """The model's symbolic inputs (`model.input`), as Keras keeps them; an error when it has none."""
    import keras

    try:
        return model.inputs[0] if isinstance(model, keras.Sequential) else model.input
    except (AttributeError, IndexError, TypeError, ValueError) as error:
        raise ValueError(
            f"The model {model.name!r} has no symbolic inputs ({type(model).__name__} built without "
            f"keras.Input), so its layer outputs cannot be traced. Pass inputs=... (a batch, or "
            f"jax.ShapeDtypeStruct shapes) for one call. Keras said: {error}"
        ) from None


def input_spec(x):
    """The shape and dtype to trace a model with for `x` (an array or a Keras symbolic input: an unknown
    dimension, the batch, taken as 2)."""
    import jax

    shape = tuple(2 if d is None else int(d) for d in x.shape)
    return jax.ShapeDtypeStruct(shape, getattr(x.dtype, "name", x.dtype))


def _trace(model, specs) -> list[LayerOutput]:
    import jax
    from keras import StatelessScope, distribution

    mesh = distribution.DeviceMesh((1,), ("batch",), distribution.list_devices()[:1])
    recorder = _recorder(mesh)
    weights = [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in model.variables]

    def call(values, x):
        with StatelessScope(state_mapping=list(zip(model.variables, values))):
            return model(x, training=False)

    with recorder.scope():
        jaxpr = jax.make_jaxpr(call)(weights, specs).jaxpr
    shapes: dict[str, list] = {}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("sharding_constraint", "device_put"):
            scope = str(eqn.source_info.name_stack)
            shapes.setdefault(scope, []).append(tuple(tuple(v.aval.shape) for v in eqn.invars))
    outputs = []
    for path, scope in recorder.calls:
        found = shapes.get(scope)
        outputs.append(LayerOutput(path, scope, found.pop(0) if found else ()))
    return outputs


def _recorder(mesh):
    """A `ModelParallel` that notes every output path Keras asks for and answers "replicated"."""
    from keras.distribution import LayoutMap, ModelParallel, TensorLayout

    class Recorder(ModelParallel):
        def __init__(self):
            super().__init__(layout_map=LayoutMap(mesh), batch_dim_name=mesh.axis_names[0])
            self.calls: list[tuple[str, str]] = []

        def get_tensor_layout(self, path):
            self.calls.append((path, name_scope_path()))
            return TensorLayout((), mesh)

    return Recorder()
