"""The sequence as a mesh axis: what a block keeps as the sequence grows, and ring attention.

Derived in notebook 11, which writes ring attention by hand (`jax.shard_map` and `lax.ppermute` inside a
Keras layer) and measures these figures; this module keeps the reusable remainder:

- `ring_attention(q, k, v, *, axis, causal)`: one device's part of ring attention, called inside
  `jax.shard_map`: the device keeps its block of queries while the blocks of keys and values go round the
  ring, `n - 1` steps of `lax.ppermute`, and an online softmax rescales what it has summed so far.
  `ring_self_attention(mesh, axis)` wraps it in `jax.shard_map`: a function of `(q, k, v)` a Keras layer calls.
- `full_attention(q, k, v, *, causal)`: the same attention on whole arrays, the reference.
- `block_memory(block, seqs)`: one decoder block's forward and backward pass compiled shape-only at each
  sequence length (XLA's temporary bytes), beside what its traced backward pass keeps, sorted by shape:
  arrays with two sequence dimensions (the s x s attention scores) and with one (the s x d activations).
- `attention_memory(seq, ...)`: bytes per device of one layer's attention, with the keys and values
  gathered whole (what XLA compiles when the sequence axis reaches attention) or passed round a ring.
- `ring_schedule(n, causal)`: which block of keys and values each device holds at each step (a figure's data).

Arrays are laid out (batch, sequence, heads, head_dim), as keras-hub's attention layers lay them out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def full_attention(q, k, v, *, causal: bool = True):
    """Softmax attention on whole arrays `(batch, seq, heads, head_dim)`: the reference the ring must equal."""
    import jax
    import jax.numpy as jnp

    scores = jnp.einsum("bthd,bshd->bhts", q, k) * q.shape[-1] ** -0.5
    if causal:
        t, s = q.shape[1], k.shape[1]
        scores = jnp.where(jnp.tril(jnp.ones((t, s), bool)), scores, -jnp.inf)
    return jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, axis=-1), v)


def ring_attention(q, k, v, *, axis: str, causal: bool = True):
    """One device's part of ring attention over the mesh axis `axis` (call it inside `jax.shard_map`).

    The device holds block `i` of the queries, keys and values (`(batch, seq / n, heads, head_dim)` each).
    It attends to the key/value block it holds, then passes that block to the next device of the ring and
    takes the previous device's: `n - 1` sends of the keys and `n - 1` of the values. An online softmax keeps,
    for each query, the largest score so far and the sum of exponentials below it, and rescales the partial
    output whenever a larger score arrives, so the result equals softmax attention over the whole sequence.
    With `causal`, a query sees keys at or before its own position in the whole sequence.

    Example:
        >>> attend = jax.shard_map(functools.partial(ring_attention, axis="seq"), mesh=mesh,
        ...                        in_specs=P(None, "seq"), out_specs=P(None, "seq"))
    """
    import jax
    import jax.numpy as jnp

    n, me = jax.lax.axis_size(axis), jax.lax.axis_index(axis)
    block = q.shape[1]
    q = q * q.shape[-1] ** -0.5
    ring = [(i, (i + 1) % n) for i in range(n)]

    def attend(state, k, v, held):
        out, top, total = state  # (b, t, h, d), (b, h, t), (b, h, t)
        scores = jnp.einsum("bthd,bshd->bhts", q, k)
        if causal:
            seen = me * block + jnp.arange(block)[:, None] >= held * block + jnp.arange(block)[None, :]
            scores = jnp.where(seen, scores, -jnp.inf)
        new_top = jnp.maximum(top, scores.max(-1))
        weights = jnp.exp(scores - new_top[..., None])
        rescale = jnp.exp(top - new_top)
        out = out * jnp.swapaxes(rescale, 1, 2)[..., None] + jnp.einsum("bhts,bshd->bthd", weights, v)
        return out, new_top, total * rescale + weights.sum(-1)

    def step(i, carry):
        state, k, v = carry
        state = attend(state, k, v, (me - i) % n)
        return state, jax.lax.ppermute(k, axis, ring), jax.lax.ppermute(v, axis, ring)

    b, _, h, _ = q.shape
    start = (jnp.zeros(q.shape, q.dtype), jnp.full((b, h, block), -jnp.inf, q.dtype), jnp.zeros((b, h, block), q.dtype))
    start = jax.lax.pcast(start, axis, to="varying")  # the same zeros on every device, soon different on each
    state, k, v = jax.lax.fori_loop(0, n - 1, step, (start, k, v))
    out, _, total = attend(state, k, v, (me - n + 1) % n)  # the last block: nothing left to send
    return out / jnp.swapaxes(total, 1, 2)[..., None]


def ring_self_attention(mesh, axis: str = "seq", *, causal: bool = True):
    """A function `(q, k, v) -> attention` that splits the sequence over `axis` of `mesh` and runs
    `ring_attention` on each device: what a Keras attention layer calls in place of its softmax.

    Args:
        mesh: A `keras.distribution.DeviceMesh` or a `jax.sharding.Mesh` with the axis `axis`.
        axis: The mesh axis the sequence is split over.
        causal: Whether each query sees only the keys at or before its position.
    """
    import functools

    import jax
    from jax.sharding import PartitionSpec

    jax_mesh = getattr(mesh, "backend_mesh", mesh)
    if axis not in jax_mesh.axis_names:
        raise ValueError(f"The mesh has no axis {axis!r}: its axes are {tuple(jax_mesh.axis_names)}. "
                         f"Name the axis the sequence is split over.")
    spec = PartitionSpec(None, axis)
    return jax.shard_map(functools.partial(ring_attention, axis=axis, causal=causal), mesh=jax_mesh,
                         in_specs=(spec, spec, spec), out_specs=spec)


@dataclass(frozen=True)
class BlockMemory:
    """One decoder block at one sequence length, for `batch` sequences, on one device.

    Attributes:
        seq, batch: The sequence length and the number of sequences.
        compiled: XLA's temporary bytes for the block's forward and backward pass (`memory_analysis()`).
        scores: Bytes the traced backward pass keeps in arrays with two sequence dimensions (s x s).
        tokens: Bytes it keeps in arrays with one sequence dimension (s x d and the like).
    """

    seq: int
    batch: int
    compiled: int
    scores: int
    tokens: int


def block_memory(block, seqs, *, batch: int = 1) -> list[BlockMemory]:
    """What one decoder block needs for a training step's forward and backward pass, at each sequence length.

    Shape-only: the block's weights are read for their shapes (a block of `abstract_model(...)` works) and
    nothing is allocated. The block is called with its input alone (keras-hub's blocks then mask causally).

    Args:
        block: A built Keras layer mapping `(batch, seq, hidden)` to the same shape, e.g.
            `abstract_model("gemma_7b_en").get_layer("decoder_block_0")`.
        seqs: Sequence lengths; none may equal a dimension of the block's weights (the arrays are sorted by
            which dimensions are the sequence).
        batch: Sequences per step.
    """
    import jax

    from course_utils.xla_settings import READING_COMPILE

    hidden = _hidden_size(block)
    dims = {int(d) for w in block.weights for d in w.shape}
    rows = []
    for seq in seqs:
        if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)) or seq < 1 or seq in dims:
            raise ValueError(f"Each sequence length must be a whole number above 0 that is no dimension of the "
                             f"block's weights {sorted(dims)}. Received: {seq!r}.")
        x = jax.ShapeDtypeStruct((batch, int(seq), hidden), block.compute_dtype)
        weights = [[jax.ShapeDtypeStruct(tuple(w.shape), w.dtype) for w in ws]
                   for ws in (block.trainable_variables, block.non_trainable_variables)]
        loss = lambda trainable, x: block.stateless_call(trainable, weights[1], x)[0].sum()
        compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(weights[0], x).compile(READING_COMPILE)
        kept = _kept_shapes(lambda trainable, x: jax.vjp(loss, trainable, x)[1], weights[0], x)
        by_seq = {0: 0, 1: 0, 2: 0}
        for shape, size in kept:
            by_seq[min(shape.count(int(seq)), 2)] += size
        rows.append(BlockMemory(int(seq), batch, compiled.memory_analysis().temp_size_in_bytes, by_seq[2], by_seq[1]))
    return rows


def _hidden_size(block) -> int:
    """The last dimension of the input a layer was built for (Keras keeps its build shapes)."""
    inputs = getattr(block, "_build_shapes_dict", None) or {}
    shapes = [s for s in inputs.values() if isinstance(s, tuple)]
    if not shapes or not isinstance(shapes[0][-1], int):
        raise ValueError(f"block_memory needs a built layer whose input is (batch, seq, hidden). Received "
                         f"{type(block).__name__} {getattr(block, 'name', '')!r}, built with {inputs or 'no shape'}.")
    return shapes[0][-1]


def _kept_shapes(backward_of, *args) -> list[tuple[tuple[int, ...], int]]:
    """(shape, bytes) of every array a traced backward pass reads that is not one of its inputs."""
    import jax

    jaxpr = jax.make_jaxpr(lambda *a: jax.tree.leaves(backward_of(*a)))(*args).jaxpr
    inputs = set(jaxpr.invars)
    return [(tuple(v.aval.shape), math.prod(v.aval.shape) * v.aval.dtype.itemsize) for v in jaxpr.outvars
            if hasattr(v, "aval") and type(v).__name__ != "Literal" and v not in inputs]


@dataclass(frozen=True)
class AttentionMemory:
    """Bytes per device one layer's attention holds at once, shape-only, for one sequence split over `devices`.

    Attributes:
        seq, devices: The sequence length and the devices it is split over.
        queries: The device's block of queries.
        gathered_kv: Keys and values of the whole sequence (XLA's all-gather).
        ring_kv: Two blocks of keys and values: the one held and the one arriving.
        gathered_scores, ring_scores: float32 scores of the device's queries against all keys, or against one
            block (0 with a fused attention kernel, which never writes them whole).
    """

    seq: int
    devices: int
    queries: int
    gathered_kv: int
    ring_kv: int
    gathered_scores: int
    ring_scores: int

    @property
    def gathered(self) -> int:
        return self.queries + self.gathered_kv + self.gathered_scores

    @property
    def ring(self) -> int:
        return self.queries + self.ring_kv + self.ring_scores


def attention_memory(seq: int, *, devices: int, heads: int, kv_heads: int, head_dim: int, itemsize: int = 2,
                     fused: bool = True) -> AttentionMemory:
    """Bytes per device of one layer's attention for one sequence of `seq` tokens split over `devices`.

    Example:
        >>> attention_memory(1_048_576, devices=8, heads=32, kv_heads=8, head_dim=128).gathered_kv / 2**30
        4.0
    """
    if seq % devices:
        raise ValueError(f"{seq} tokens do not split into {devices} equal blocks. Received: seq={seq}, "
                         f"devices={devices}; pad the sequence to a multiple of {devices}.")
    block = seq // devices
    kv = 2 * kv_heads * head_dim * itemsize  # bytes of keys and values per token
    scores = 0 if fused else heads * 4
    return AttentionMemory(seq, devices, block * heads * head_dim * itemsize, seq * kv, 2 * block * kv,
                           block * seq * scores, block * block * scores)


def longest_sequence(memory_bytes: float, *, ring: bool, devices: int, **shape) -> int:
    """The longest sequence (a multiple of `devices`) whose attention fits `memory_bytes` per device,
    gathered (`ring=False`) or passed round a ring; `shape` as `attention_memory` takes it."""
    fits = lambda blocks: getattr(attention_memory(blocks * devices, devices=devices, **shape),
                                  "ring" if ring else "gathered") <= memory_bytes
    low, high = 0, 1
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low * devices


@dataclass(frozen=True)
class RingStep:
    """What one device does at one step of ring attention: the key/value block it holds, and how much of it
    its queries see ("all", "diagonal": the causal triangle of its own block, or "none": all masked)."""

    device: int
    step: int
    block: int
    seen: str


def ring_schedule(n: int, *, causal: bool = True) -> list[RingStep]:
    """Which block of keys and values each of `n` devices holds at each of the `n` steps (device i holds its
    own block first, then block i - 1, i - 2, ...), and what its queries see of it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"A ring has a whole number of devices, at least 1. Received: n={n!r}.")
    steps = []
    for device in range(n):
        for step in range(n):
            block = (device - step) % n
            seen = "all" if not causal or block < device else "diagonal" if block == device else "none"
            steps.append(RingStep(device, step, block, seen))
    return steps
