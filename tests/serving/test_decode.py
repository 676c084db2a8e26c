"""A real model's decode step compiled shape-only, read per device, and timed on named hardware."""

import keras
import pytest
from keras import distribution

keras_hub = pytest.importorskip("keras_hub")

from course_utils import abstract_model, make_mesh, without_axis  # noqa: E402
from course_utils.hardware import DeviceSet, Link  # noqa: E402
from course_utils.serving import (cache_bytes_per_token, catch_up, decode_points, decode_time, loading_peaks,  # noqa: E402
                                  read_decode)

GEMMA = dict(vocabulary_size=256, num_layers=4, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
             intermediate_dim=128, head_dim=16)


@pytest.fixture(scope="module")
def serving():
    mesh = make_mesh((2, 4), ("batch", "model"))
    return distribution.ModelParallel(
        layout_map=without_axis(keras_hub.models.GemmaBackbone.get_layout_map(mesh), "batch"), batch_dim_name="batch")


def test_a_deep_model_read_from_one_and_two_blocks_is_the_whole_model_read(serving):
    shape_only = abstract_model(keras_hub.models.GemmaBackbone, GEMMA, dtype="bfloat16")
    extended = read_decode(shape_only, serving, batch=4, tokens=32)
    whole = read_decode(abstract_model(keras_hub.models.GemmaBackbone, {**GEMMA, "num_layers": 2}, dtype="bfloat16"),
                        serving, batch=4, tokens=32)
    assert "1 and 2 of its 4 blocks" in extended.how and whole.how == "compiled whole"
    assert extended.weight_bytes == loading_peaks(shape_only, serving).blocks
    assert extended.cache_bytes == 4 * 4 * 2 * 32 * 8 * 16 * 2 // 8 == 4 * 32 * cache_bytes_per_token(GEMMA) // 8
    per_block = (extended.flops - whole.flops) / 2
    assert per_block > 0 and extended.collectives[0].count == 2 * 4 + 1  # attention and MLP outputs, the lookup
    assert extended.bytes_read == extended.weight_bytes + extended.cache_bytes


def test_a_preset_is_read_by_name_and_anything_else_refused(serving):
    with pytest.raises(ValueError, match="preset name"):
        read_decode("gemma_99b", serving, batch=2, tokens=8)


def test_the_two_clocks_and_where_computing_catches_up():
    h100 = "8xH100-80GB"
    time = decode_time(3.35e9, 9.9e11, h100)
    assert (time.memory, time.compute, time.bound) == (pytest.approx(1e-3), pytest.approx(1e-3), "memory")
    assert decode_time(16e9, 0.0, "v5e-8").memory == pytest.approx(16e9 / 8.19e11)  # the book's 19 ms
    slow = decode_time(0.0, 9.9e11, h100, efficiency=0.5)
    assert slow.compute == pytest.approx(2e-3) and slow.bound == "compute"
    with pytest.raises(ValueError, match="efficiency"):
        decode_time(1.0, 1.0, h100, efficiency=0.0)
    bare = DeviceSet("no bandwidth", "x", 1, 1e12, 1e9, Link("l", 1e9, "s"), per_node=1)
    with pytest.raises(ValueError, match="memory_bytes_per_second"):
        decode_time(1.0, 1.0, bare)


def test_computing_catches_the_weights_at_c_over_w_and_never_a_growing_cache():
    from course_utils.serving.decode import DecodeProgram

    weights, per_sequence = 2e9, 1e9  # bf16: 1e9 parameters per device, two FLOPs each per sequence
    programs = [DecodeProgram("m", (1, 8), b, 1, int(weights), int(b * 1e6), b * 2 * per_sequence) for b in (8, 512)]
    points = decode_points(programs, "8xH100-80GB")
    assert [p[0] for p in points] == [8, 512]
    assert catch_up(points) == pytest.approx(9.9e14 / 3.35e12)  # C / W for bf16 weights
    long = [DecodeProgram("m", (1, 8), b, 1, int(weights), int(b * 1e8), b * 2 * per_sequence) for b in (8, 512)]
    assert catch_up(decode_points(long, "8xH100-80GB"), with_cache=True) is None
