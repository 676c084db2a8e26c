"""Ring attention equals full attention (forward and backward, causal or not, on any ring of devices); a block's
memory by sequence length sorts what it keeps by shape; attention memory and the longest sequence are shape
arithmetic; the ring's schedule says which block each device holds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from keras import distribution

from course_utils import (abstract_model, attention_memory, block_memory, collective_ops, full_attention,
                          longest_sequence, ring_schedule, ring_self_attention)

GEMMA = dict(vocabulary_size=64, num_layers=1, num_query_heads=2, num_key_value_heads=2, hidden_dim=32,
             intermediate_dim=64, head_dim=8)


def _qkv(shape=(2, 32, 2, 8)):
    return [jnp.asarray(np.random.default_rng(i).standard_normal(shape), "float32") for i in range(3)]


@pytest.mark.parametrize("devices, causal", [(8, True), (4, False), (2, True)])
def test_ring_attention_equals_full_attention_forward_and_backward(devices, causal):
    mesh = distribution.DeviceMesh((devices,), ["seq"], devices=jax.devices()[:devices])
    ring = ring_self_attention(mesh, causal=causal)
    full = lambda q, k, v: full_attention(q, k, v, causal=causal)
    q, k, v = _qkv()
    assert float(jnp.abs(jax.jit(ring)(q, k, v) - jax.jit(full)(q, k, v)).max()) < 1e-5
    loss = lambda f: lambda *a: (f(*a) ** 2).sum()
    for a, b in zip(jax.jit(jax.grad(loss(full), argnums=(0, 1, 2)))(q, k, v),
                    jax.jit(jax.grad(loss(ring), argnums=(0, 1, 2)))(q, k, v)):
        assert float(jnp.abs(a - b).max()) <= 1e-5 * float(jnp.abs(a).max())


def test_forgetting_the_causal_mask_is_not_causal_attention():
    mesh = distribution.DeviceMesh((4,), ["seq"], devices=jax.devices()[:4])
    q, k, v = _qkv()
    wrong = jax.jit(ring_self_attention(mesh, causal=False))(q, k, v)
    assert float(jnp.abs(wrong - full_attention(q, k, v)).max()) > 0.1


def test_the_ring_sends_keys_and_values_n_minus_1_times():
    mesh = distribution.DeviceMesh((8,), ["seq"])
    spec = jax.ShapeDtypeStruct((1, 64, 2, 8), "float32")
    ops = collective_ops(jax.jit(ring_self_attention(mesh)).lower(spec, spec, spec).compile().as_text(), ("seq",), (8,))
    assert [(op.kind, op.times, op.shapes[0]) for op in ops] == [("collective-permute", 7, (1, 8, 2, 8))] * 2


def test_a_mesh_without_the_axis_is_refused_with_its_axes():
    with pytest.raises(ValueError, match=r"no axis 'seq': its axes are \('batch', 'model'\)"):
        ring_self_attention(distribution.DeviceMesh((2, 4), ["batch", "model"]))


def test_block_memory_sorts_what_a_block_keeps_by_its_sequence_dimensions():
    block = abstract_model(__import__("keras_hub").models.GemmaBackbone, GEMMA).get_layer("decoder_block_0")
    short, long = block_memory(block, (24, 48))
    assert (short.seq, long.seq, short.batch) == (24, 48, 1)
    assert long.tokens == 2 * short.tokens and long.scores == 4 * short.scores  # s x d, s x s
    assert short.scores >= 2 * 24 * 24 * 4  # at least one (heads, s, s) float32 copy of the scores
    assert 0 < short.compiled < long.compiled
    with pytest.raises(ValueError, match=r"no dimension of the block's weights"):
        block_memory(block, (32,))  # 32 is the hidden size: the arrays could not be sorted


def test_attention_memory_is_shape_arithmetic():
    sizes = attention_memory(1024, devices=8, heads=4, kv_heads=2, head_dim=16, itemsize=2, fused=False)
    kv = 2 * 2 * 16 * 2  # keys and values per token
    assert sizes.gathered_kv == 1024 * kv and sizes.ring_kv == 2 * 128 * kv
    assert sizes.gathered_scores == 128 * 1024 * 4 * 4 and sizes.ring_scores == 128 * 128 * 4 * 4
    assert sizes.ring < sizes.gathered
    assert attention_memory(1024, devices=8, heads=4, kv_heads=2, head_dim=16).gathered_scores == 0  # fused
    with pytest.raises(ValueError, match="pad the sequence to a multiple of 8"):
        attention_memory(1001, devices=8, heads=4, kv_heads=2, head_dim=16)


def test_the_longest_sequence_fits_and_one_block_more_does_not():
    shape = dict(heads=32, kv_heads=8, head_dim=128)
    for ring in (False, True):
        longest = longest_sequence(80e9, ring=ring, devices=8, fused=False, **shape)
        assert longest % 8 == 0
        fits = lambda s: getattr(attention_memory(s, devices=8, fused=False, **shape), "ring" if ring else "gathered")
        assert fits(longest) <= 80e9 < fits(longest + 8)


def test_the_ring_schedule_passes_each_block_to_the_next_device():
    steps = ring_schedule(4)
    held = {(s.device, s.step): s.block for s in steps}
    assert all(held[(d + 1) % 4, t + 1] == held[d, t] for d in range(4) for t in range(3))
    assert [s.seen for s in steps if s.device == 2] == ["diagonal", "all", "all", "none"]
    assert {s.seen for s in ring_schedule(4, causal=False)} == {"all"}
    with pytest.raises(ValueError, match="Received: n=0"):
        ring_schedule(0)
