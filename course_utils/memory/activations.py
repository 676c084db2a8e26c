"""What a training step keeps for its backward pass: activations, from the model's own traced program.

`saved_for_backward` traces a keras-hub language model's loss with `jax.vjp` inside
`jax.make_jaxpr`: shapes only, nothing computed, nothing allocated, so Gemma 7B at a sequence of
2,048 is traced in a fraction of a second. What the backward pass reads that is not an input of the
loss (a weight, a token) is an activation the step keeps. The model is traced with one decoder block
and with two: their difference is one block's activations, scaled to the preset's depth.

XLA keeps a little less than the traced program names (it fuses some of them away): on the CPU, a
tiny Gemma's compiled gradient holds about 0.8 of them, at every batch size (tests/memory/test_activations.py
checks it against `compiled.memory_analysis()`). Rematerialisation (`jax.checkpoint` of each block)
trades them for compute: the step then keeps each block's input and recomputes the rest, one block
at a time, in the backward pass.
"""

from __future__ import annotations

import math

import numpy as np
from dataclasses import dataclass


@dataclass(frozen=True)
class Activations:
    """Bytes a training step keeps for its backward pass, for one global batch (on one device, unsplit).

    Attributes:
        batch, seq: The global batch: `batch` sequences of `seq` tokens.
        blocks: The model's decoder blocks.
        per_block: Bytes one decoder block keeps.
        outside: Bytes kept outside the blocks (the embedding, the final norm, the logits and the loss).
        block_input: Bytes of one block's input, what each block keeps when rematerialised.
        dtype: The dtype the activations are computed in.
    """

    batch: int
    seq: int
    blocks: int
    per_block: int
    outside: int
    block_input: int
    dtype: str

    def total(self, *, remat: bool = False) -> int:
        """All of it; rematerialised, each block's input plus one block recomputed at a time."""
        if remat:
            return self.outside + self.blocks * self.block_input + self.per_block
        return self.outside + self.blocks * self.per_block


def saved_for_backward(model, batch: int, seq: int) -> Activations:
    """The activations a keras-hub language model's training step keeps, traced from shapes.

    Args:
        model: A keras-hub backbone (real or shape-only, e.g. `abstract_model("gemma_7b_en")`);
            its config is traced again with one and with two decoder blocks.
        batch: Sequences in the global batch.
        seq: Tokens per sequence.

    Example:
        >>> saved_for_backward(abstract_model("gemma_7b_en"), 1, 2048).total() / 2**30
        84.5...
    """
    for name, value in (("batch", batch), ("seq", seq)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive whole number. Received: {name}={value!r}.")
    batch, seq = int(batch), int(seq)
    config = model.get_config()
    if "num_layers" not in config:
        raise ValueError(f"saved_for_backward traces a keras-hub backbone with num_layers in its config; "
                         f"{type(model).__name__} has none. Received: {model.name!r}.")
    one, two = (_traced_bytes(type(model), {**config, "num_layers": k}, batch, seq) for k in (1, 2))
    per_block = two - one
    dtype = _compute_dtype(model)
    hidden = config["hidden_dim"]
    return Activations(batch=batch, seq=seq, blocks=config["num_layers"], per_block=per_block,
                       outside=one - per_block, block_input=batch * seq * hidden * _itemsize(dtype), dtype=dtype)


def _traced_bytes(backbone_class, config: dict, batch: int, seq: int) -> int:
    """Bytes of what the backward pass of the language model's loss reads, inputs aside."""
    return sum(size * itemsize for size, itemsize, _ in _residuals(backbone_class, config, batch, seq))


@dataclass(frozen=True)
class KeptTypes:
    """The share of a step's kept activations' bytes that their own types take, against f32 for every one: how
    much of what XLA CPU keeps (it computes and keeps bf16 values as f32) an accelerator keeps. Each for the
    activations that grow with the sequence (a token's vectors) and with its square (attention's scores: two
    sequence dimensions), outside the decoder blocks (the embedding, the logits and the loss) and in each block.
    """

    linear: float
    quadratic: float
    block_linear: float
    block_quadratic: float
    block_linear_bytes: int = 0  # what one block keeps that grows with the sequence, in its own types, whole batch
    block_quadratic_bytes: int = 0  # what one block keeps that grows with its square, in its own types, whole batch


def kept_types(backbone_class, config: dict, batch: int, seq: int) -> KeptTypes:
    """`KeptTypes` of a keras-hub language model's step, from its traced residuals with one block and with two
    (shapes only)."""
    one, two = (_kept_bytes(_residuals(backbone_class, {**config, "num_layers": n}, batch, seq)) for n in (1, 2))
    shares = []
    for quadratic in (False, True):
        own, wide = one[quadratic]
        block_own, block_wide = two[quadratic][0] - own, two[quadratic][1] - wide
        outside_own, outside_wide = own - block_own, wide - block_wide
        shares += [outside_own / outside_wide if outside_wide > 0 else 1.0,
                   block_own / block_wide if block_wide > 0 else 1.0]
    return KeptTypes(linear=shares[0], block_linear=shares[1], quadratic=shares[2], block_quadratic=shares[3],
                     block_linear_bytes=two[False][0] - one[False][0], block_quadratic_bytes=two[True][0] - one[True][0])


def _kept_bytes(residuals) -> dict[bool, tuple[int, int]]:
    """{grows with seq squared: (bytes in their own types, bytes were each f32 or wider)}."""
    return {q: (sum(n * size for n, size, r in residuals if r == q), sum(n * max(size, 4) for n, size, r in residuals
                                                                            if r == q)) for q in (False, True)}


def _residuals(backbone_class, config: dict, batch: int, seq: int) -> list[tuple[int, int, bool]]:
    """(elements, bytes each, grows with seq squared) of every value the loss's backward pass reads, inputs
    aside."""
    import jax

    from course_utils.memory.presets import causal_lm_of, shape_only_backbone

    lm = causal_lm_of(shape_only_backbone(backbone_class, config))
    specs = lambda variables: [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables]
    tokens = jax.ShapeDtypeStruct((batch, seq), "int32")
    x = {"token_ids": tokens, "padding_mask": tokens}

    def saved(trainable, non_trainable, x, y):
        import keras

        def loss(weights):
            logits, _ = lm.stateless_call(weights, non_trainable, x, training=True)
            return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))

        return jax.tree.leaves(jax.vjp(loss, trainable)[1])

    jaxpr = jax.make_jaxpr(saved)(specs(lm.trainable_variables), specs(lm.non_trainable_variables), x, tokens).jaxpr
    inputs = set(jaxpr.invars)
    return [(math.prod(v.aval.shape), v.aval.dtype.itemsize, list(v.aval.shape).count(seq) >= 2)
            for v in jaxpr.outvars if hasattr(v, "aval") and not _is_literal(v) and v not in inputs]


def _is_literal(var) -> bool:
    return type(var).__name__ == "Literal"


def _compute_dtype(model) -> str:
    policy = getattr(model, "dtype_policy", None)
    return str(getattr(policy, "compute_dtype", None) or "float32")


def _itemsize(dtype: str) -> int:
    import numpy as np

    return 2 if "16" in dtype else np.dtype(dtype).itemsize
