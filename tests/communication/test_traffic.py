"""What a step's collectives send (operand bytes, the ring algorithm's count), per axis and pass; the
expectation's coverage; two layouts of one model compared."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import distribution

from course_utils import communication_report, make_layout_map, make_mesh
from course_utils.communication.attribution import FSDP, RESHARD
from course_utils.communication.traffic import compare_communication, operand_bytes, ring_sent_bytes

# 8 query and key/value heads: the official map splits heads over 'model' (8) and over 'batch' (up to 8)
LLAMA = dict(vocabulary_size=128, num_layers=2, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
             intermediate_dim=128)
QKV = "transformer_layer.*self_attention.*(query|key|value).kernel"


@pytest.mark.parametrize("kind, result, operand, sent", [
    ("all-gather", 4_000, 1_000, 3_000),  # each device's quarter goes round the ring
    ("reduce-scatter", 1_000, 4_000, 3_000),
    ("all-reduce", 4_000, 4_000, 6_000),  # a reduce-scatter, then an all-gather
    ("all-to-all", 4_000, 4_000, 3_000),
    ("collective-permute", 4_000, 4_000, 4_000),
])
def test_operand_and_ring_bytes_follow_the_ring_algorithm(kind, result, operand, sent):
    assert operand_bytes(kind, result, 4) == operand and ring_sent_bytes(kind, result, 4) == sent
    assert ring_sent_bytes(kind, result, 1) == 0  # a group of one device sends nothing


def test_a_data_parallel_step_sends_twice_seven_eighths_of_its_gradients(tiny):
    dp = tiny.data_parallel()
    report = communication_report(tiny.built_under(dp), dp, (32, 16))
    table = report.traffic()
    sent = table.sent_over("data")
    assert sent == sum(round(r.bytes * 2 * 7 / 8) for r in report.collectives)
    assert sent >= round(tiny.gradient_bytes * 2 * 7 / 8)
    assert {r.pass_ for r in table.rows} <= {"forward", "backward", "forward+backward", "optimizer", ""}
    assert report.coverage == 1.0 and "the expectation models 100% of the step's collective bytes" in report.notes()[0]
    assert any(line.startswith(f"Cost: {table.total_sent:,} bytes sent per device") for line in report.notes())


def _llama_step(mesh, rules=None):
    official = keras_hub.models.LlamaBackbone.get_layout_map(mesh)
    layout_map = official if rules is None else make_layout_map(mesh, rules)
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    keras.utils.set_random_seed(0)
    with dist.scope():
        backbone = keras_hub.models.LlamaBackbone(**LLAMA)
        model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = {"token_ids": np.zeros((8, 16), "int32"), "padding_mask": np.ones((8, 16), "int32")}
    return communication_report(model, dist, (x, np.zeros((8, 16), "int32"))), official


def _corrected(official):
    """keras-hub #2827's proposal: the heads the query produces split over 'model', as attention_output takes them."""
    rules = {key: tuple(layout.axes) for key, layout in official.items() if key != QKV}
    return {**rules, "transformer_layer.*self_attention.*query.kernel": ("batch", "model", None),
            "transformer_layer.*self_attention.*(key|value).kernel": ("batch", None, None)}


def test_an_axis_of_one_device_files_nothing_under_fsdp_and_the_corrected_llama_map_is_cheaper():
    mesh = make_mesh((1, 8), ("batch", "model"))
    official, layout_map = _llama_step(mesh)
    corrected, _ = _llama_step(mesh, _corrected(layout_map))
    assert FSDP not in official.unmodelled()  # 'batch' has one device: no weight is split over it
    assert official.coverage > 0.3  # the model axis' partial sums are modelled again
    comparison = compare_communication({"official": official, "corrected": corrected})
    assert comparison.cheapest == "corrected" and comparison.totals[0] > 1.2 * comparison.totals[1]
    differences = [max(r.sent) - min(r.sent) for r in comparison.rows]
    assert differences == sorted(differences, reverse=True)
    assert comparison.notes()[0].startswith("corrected sends the fewest bytes per device")
    with pytest.raises(ValueError, match="compares two or more reports"):
        compare_communication({"official": official})


def test_resharding_is_named_apart_with_what_it_moves():
    official, _ = _llama_step(make_mesh((2, 4), ("batch", "model")))
    moved = [r for r in official.collectives if r.kind == "all-to-all"]
    assert moved and all(r.reason.startswith("resharding:") for r in moved)
    assert RESHARD in official.unmodelled()
    assert official.coverage < 0.1  # the official map's step is mostly what the expectation does not model
