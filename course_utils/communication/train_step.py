"""One real training step, compiled: Keras's `train_step`, laid out as `fit` lays it out, compiled by XLA.

`compiled_train_step` gives the compiled program's text, which `hlo` reads; `training_batch` turns a
batch (or just the input's shape) into the shapes and dtypes the step is compiled for.
"""

from __future__ import annotations

import numpy as np

from course_utils.keras_internals import forget_deferred, is_shape_only, symbolic_build
from course_utils.layouts.layout_map import layout_for, optimizer_owners
from course_utils.xla_settings import READING_COMPILE, layer_names_kept


def jax_leaves(tree) -> list:
    import jax

    return jax.tree.leaves(tree)


def training_batch(model, batch, target_shape=None, target_dtype=None) -> tuple:
    """`(x, y[, sample_weight])` as `jax.ShapeDtypeStruct`s, from a batch or from the input's shape."""
    import jax

    if isinstance(batch, (tuple, list)) and batch and all(isinstance(d, (int, np.integer)) for d in batch):
        x = jax.ShapeDtypeStruct(tuple(int(d) for d in batch), _input_dtype(model))
        return x, _default_targets(model, x, target_shape, target_dtype)
    if target_shape is not None or target_dtype is not None:
        raise ValueError("target_shape and target_dtype go with a batch given as a shape; with a real batch "
                         f"(x, y), y says them. Received: target_shape={target_shape}, target_dtype={target_dtype}.")
    parts = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"batch must be (x, y) or (x, y, sample_weight) as fit takes it, or the input's "
                         f"shape. Received a {type(batch).__name__} of {len(parts)} items.")
    try:
        return jax.tree.map(lambda a: jax.ShapeDtypeStruct(tuple(a.shape), np.dtype(a.dtype)), parts)
    except (AttributeError, TypeError) as error:
        raise ValueError(f"Every leaf of batch needs .shape and .dtype (arrays or jax.ShapeDtypeStruct). "
                         f"Received: {batch!r:.200}. ({error})") from None


def _input_dtype(model) -> str:
    inputs = getattr(model, "inputs", None) or []
    return inputs[0].dtype if inputs else "float32"


def _default_targets(model, x, target_shape, target_dtype):
    import jax
    import keras

    if target_shape is None:
        output = model.compute_output_spec(keras.KerasTensor(x.shape, x.dtype))
        target_shape = tuple(output.shape)
        if _sparse_loss(model):
            target_shape = target_shape[:-1]
    dtype = target_dtype or ("int32" if _sparse_loss(model) else "float32")
    return jax.ShapeDtypeStruct(tuple(target_shape), dtype)


def _sparse_loss(model) -> bool:
    loss = getattr(model, "loss", None)
    if isinstance(loss, str):
        return "sparse" in loss
    names = (getattr(loss, "name", None), getattr(loss, "__name__", None), getattr(getattr(loss, "fn", None), "__name__", None))
    return any("sparse" in str(n) for n in names if n)


def compiled_train_step(model, distribution, batch, *, options: dict | None = READING_COMPILE) -> str:
    """The text of Keras's training step compiled by XLA under `distribution` (`compile_train_step`)."""
    return compile_train_step(model, distribution, batch, options=options).as_text()


def compile_train_step(model, distribution, batch, *, options: dict | None = READING_COMPILE, donate: bool = False):
    """Keras's training step of `model`, compiled by XLA under `distribution`: a `jax.stages.Compiled`.

    The model may be real or shape-only (`memory.presets.abstract_model`): the step is compiled for the
    shapes, dtypes and layouts of its state (`step_state`), never for its values, so nothing is allocated.

    Args:
        model: A compiled, built model.
        distribution: The distribution the step runs under.
        batch: `(x, y[, sample_weight])` of `jax.ShapeDtypeStruct`s (see `training_batch`);
            each is laid out as `fit` lays out data (`distribution.get_data_layout`).
        options: XLA compiler options. The default, `xla_settings.READING_COMPILE`,
            turns XLA's backend optimisations off: they do not change the
            collectives the partitioner inserts, and cost most of the time.
            None: XLA's defaults (what `fit` runs; for its memory).
        donate: Give the state's buffers to the step, as `fit` does (`donate_argnums=0`): the new
            state is written where the old one was, which `memory_analysis()` counts as aliased.
    """
    import jax
    import keras

    def laid_out(spec):
        return jax.ShapeDtypeStruct(spec.shape, spec.dtype,
                                    sharding=distribution.get_data_layout(spec.shape).backend_layout)

    batch = jax.tree.map(laid_out, batch)
    with distribution.scope():
        if model.variables and all(is_shape_only(v) for v in model.variables):
            # a shape-only model's optimizer and metrics shape-only too: built for real they would be laid out
            # on the devices (a replicated Adam state: twice the weights on every device)
            with keras.StatelessScope(initialize_variables=False):
                symbolic_build(model, batch)
            forget_deferred([*model.optimizer.variables, *model.metrics_variables])
        else:
            symbolic_build(model, batch)
        state = step_state(model, distribution)
        shardings = jax.tree.map(lambda spec: spec.sharding, state)
        step = jax.jit(model.train_step, out_shardings=(None, shardings), donate_argnums=0 if donate else ())
        with layer_names_kept():
            lowered = step.lower(state, batch)
        return lowered.compile(compiler_options=options)


def step_state(model, distribution) -> tuple:
    """The state Keras's step takes (trainable, non-trainable, optimizer and metrics variables) as
    `jax.ShapeDtypeStruct`s laid out by `distribution`, as `fit` lays them out: each weight by Keras's own
    lookup, each optimizer slot as its weight (`layouts.layout_map.layout_rows`' rule) or, under ZeRO
    (`layouts.zero.zero_parallel`), split as its `state_layout` says, read from shapes."""
    import jax

    optimizer = model.optimizer
    weights = {v.path: v for v in model.trainable_variables}
    owners = optimizer_owners(optimizer.variables, model.trainable_variables)

    def spec(variable, owner=None):
        layout = layout_for(distribution, owner if owner is not None else variable)
        if owner is not None and hasattr(distribution, "state_layout"):  # ZeRO: the state split, not the weight
            layout = distribution.state_layout(layout, tuple(variable.shape))
        return jax.ShapeDtypeStruct(tuple(variable.shape), jax.dtypes.canonicalize_dtype(variable.dtype),
                                    sharding=layout.backend_layout)

    return ([spec(v) for v in model.trainable_variables], [spec(v) for v in model.non_trainable_variables],
            [spec(v, weights.get(owners.get(v.path))) for v in optimizer.variables],
            [spec(v) for v in model.metrics_variables])
