"""The course's tools on real keras-hub models: tiny Gemma, Llama and Qwen under their own layout maps.

Random weights from configs (vocabulary 128, 2 layers, 4 heads, hidden 64); nothing is downloaded.
"""

import re

import keras
import keras_hub
import numpy as np
import pytest
from keras import distribution

from course_utils import (check_layout_map, communication_report, explain_layout, make_mesh, memory_report,
                          placement)
from course_utils.layouts.layer_outputs import layer_outputs

CONFIG = dict(vocabulary_size=128, num_layers=2, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
              intermediate_dim=128)
BACKBONES = {
    "gemma": (keras_hub.models.GemmaBackbone, dict(CONFIG, head_dim=16)),
    "llama": (keras_hub.models.LlamaBackbone, CONFIG),
    "qwen": (keras_hub.models.QwenBackbone, CONFIG),
}


@pytest.fixture(scope="module")
def mesh():
    return make_mesh((2, 4), ("batch", "model"))


def official(name, mesh, **changes):
    """A tiny backbone of `name` built under its own get_layout_map(mesh), with that map."""
    cls, config = BACKBONES[name]
    layout_map = cls.get_layout_map(mesh)
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    keras.utils.set_random_seed(0)
    with dist.scope():
        model = cls(**{**config, **changes})
    return model, layout_map, dist


@pytest.fixture(scope="module")
def backbones(mesh):
    return {name: official(name, mesh) for name in BACKBONES}


def with_rules(mesh, rules):
    layout_map = distribution.LayoutMap(mesh)
    for key, axes in rules.items():
        layout_map[key] = axes
    return layout_map


@pytest.mark.parametrize("name", list(BACKBONES))
def test_official_maps_are_clean_and_explained_as_built(backbones, name):
    model, layout_map, dist = backbones[name]
    assert check_layout_map(layout_map, model) == []
    report = explain_layout(model, dist)
    assert len(report.rows) == len(model.variables)
    for row, variable in zip(report.rows, model.variables):
        assert row.as_planned and row.placement == placement(variable), row.path
    embedding = report.row("token_embedding/embeddings")
    assert embedding.rule == "token_embedding/embeddings" and embedding.shard_shape == (128 // 4, 64 // 2)


@pytest.mark.parametrize("name", ["llama", "qwen"])
def test_one_key_value_head_reports_what_really_fails_to_build(mesh, name):
    cls, config = BACKBONES[name]
    unbuilt_map = cls.get_layout_map(mesh)
    plain = cls(**{**config, "num_key_value_heads": 1})  # built outside any distribution
    problems = check_layout_map(unbuilt_map, plain)
    assert {p.path for p in problems} == {f"transformer_layer_{i}/self_attention/{kv}/kernel"
                                          for i in range(2) for kv in ("key", "value")}
    assert all(p.kind == "bad_layout" and "size 1" in p.message and "2 equal parts along batch" in p.message
               for p in problems)
    with pytest.raises(Exception):  # the official map really cannot lay these kernels out
        official(name, mesh, num_key_value_heads=1)


def test_a_short_layout_is_valid_and_explained_as_padded(mesh):
    rules = {".*attention/query/kernel": ("model", "batch")}  # 2 entries for the (4, 64, 16) kernels
    layout_map = with_rules(mesh, rules)
    cls, config = BACKBONES["gemma"]
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with dist.scope():
        model = cls(**config)  # Keras builds it: JAX pads the layout with None
    assert check_layout_map(layout_map, model) == []
    row = explain_layout(model, dist).row("decoder_block_0/attention/query/kernel")
    assert row.axes == ("model", "batch", None) and row.shard_shape == (1, 32, 16)
    assert "2 of 3 entries, padded with None" in row.rule
    assert row.as_planned and row.placement == placement(model.get_layer("decoder_block_0").attention.query_dense.kernel)


def test_weightless_layer_outputs_are_looked_up_and_count_as_matched(mesh, backbones):
    model = backbones["llama"][0]
    paths = [o.path for o in layer_outputs(model)]
    assert "transformer_layer_0/self_attention_dropout/output" in paths
    assert any(re.fullmatch(r"transformer_layer_1/self_attention/llama_rotary_embedding(_\d+)?/output", p) for p in paths)
    layout_map = with_rules(mesh, {".*self_attention_dropout/output": ("batch", None, "model"),
                                   r".*rotary_embedding(_\d+)?/output": ("batch",)})
    assert check_layout_map(layout_map, model) == []
    with distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():
        out = model({"token_ids": np.zeros((2, 8), "int32"), "padding_mask": np.ones((2, 8), "int32")})
    assert out.shape == (2, 8, 64)  # Keras applied both output layouts in the call


def test_an_output_layout_longer_than_the_output_is_found_before_it_fails(mesh, backbones):
    model = backbones["qwen"][0]
    layout_map = with_rules(mesh, {".*feedforward_layernorm/output": ("batch", None, "model", None)})
    problems = check_layout_map(layout_map, model)
    assert {p.path for p in problems} == {f"transformer_layer_{i}/feedforward_layernorm/output" for i in range(2)}
    assert "rank 3" in problems[0].message and "4 entries but the tensor has 3" in problems[0].message
    with pytest.raises((IndexError, ValueError)):  # what the forward pass gives without the check
        with distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():
            model({"token_ids": np.zeros((2, 8), "int32"), "padding_mask": np.ones((2, 8), "int32")})


def test_bad_keys_are_problems_that_name_the_key(mesh, backbones):
    model, official_map, _ = backbones["gemma"]
    layout_map = with_rules(mesh, {"decoder_block.*(ffw_gating.kernel": (None, "model"), 7: ("model",)})
    problems = check_layout_map(layout_map, model)
    assert [p.kind for p in problems] == ["bad_key", "bad_key"]
    assert "'decoder_block.*(ffw_gating.kernel' is not a valid regular expression" in problems[0].message
    assert "Key 7 is a int" in problems[1].message and "string" in problems[1].message
    with pytest.raises(TypeError, match=r"needs a keras.distribution.LayoutMap. Received: dict .*make_layout_map"):
        check_layout_map({".*kernel": (None, "model")}, model)


@pytest.fixture(scope="module")
def causal_lm(mesh):
    backbone, layout_map, dist = official("gemma", mesh)
    with dist.scope():
        lm = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
        lm.compile(optimizer="adam")
    x = {"token_ids": np.zeros((8, 16), "int32"), "padding_mask": np.ones((8, 16), "bool")}
    y = np.zeros((8, 16), "int32")
    return lm, dist, communication_report(lm, dist, (x, y))


def test_causal_lm_collectives_are_attributed_to_its_layers(causal_lm):
    lm, dist, report = causal_lm
    known = {o.layer for o in layer_outputs(lm)} | {"(loss)", "(training step)"}
    rows = report.collectives
    assert sum(r.bytes for r in rows) == sum(c.bytes for c in report.compiled)
    assert all(set(r.layer.split(" + ")) <= known for r in rows if "more" not in r.layer)
    gathered = [r for r in rows if r.weight == "decoder_block_0/ffw_gating/kernel"]
    assert gathered and all(r.kind == "all-gather" and r.axes == ("batch",) and r.layer == "decoder_block_0/ffw_gating"
                            for r in gathered)
    assert "split ('batch', 'model')" in gathered[0].reason and "XLA gathers it" in gathered[0].reason
    forward = {r.layer for r in rows if r.pass_ == "forward"}
    assert "decoder_block_0/attention/attention_output" in forward
    table = report.by_layer()
    assert table.columns[:3] == ("layer", "op", "pass") and sum(r["bytes"] for r in table.rows) == sum(
        r.bytes for r in rows)


def test_causal_lm_report_agrees_on_what_it_models_and_shows_the_rest_apart(causal_lm):
    lm, dist, report = causal_lm
    assert report.agrees, report  # the official map's step does what its layout implies: no blanket DIFFER
    text = repr(report)
    assert "AGREE: the compiled program holds what the layout predicts, on what it models" in text
    assert "Not modelled, shown apart: weights split over the batch axis (FSDP)" in text
    assert "the optimizer's update of weights replicated over the batch axis" in text  # the norm scales
    parts = report.unmodelled()
    shown = sum(n for by_key in parts.values() for n in by_key.values())
    modelled = [r for r in report.collectives if r.name not in report._parts]
    assert shown + sum(r.bytes for r in modelled) == sum(c.bytes for c in report.compiled)  # every byte, once
    assert any("decoder_block_0/ffw_gating/kernel" in note for note in report.not_modelled)
    assert "compiled quickly" in text
    assert memory_report(lm, dist).max_total > 0


def test_a_backbone_with_dict_inputs_and_dense_targets(mesh, backbones):
    model, _, dist = official("qwen", mesh)
    with dist.scope():
        model.compile(optimizer="sgd", loss="mse")
    x = {"token_ids": np.zeros((4, 8), "int32"), "padding_mask": np.ones((4, 8), "int32")}
    report = communication_report(model, dist, (x, np.zeros((4, 8, 64), "float32")))
    assert report.compiled and all(r.layer for r in report.collectives)
    assert re.search(r"batch \(4, 8\), \(4, 8\)", report.title)


MOE = dict(vocabulary_size=128, num_layers=1, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
           intermediate_dim=128, moe_intermediate_dim=32, num_experts=4, top_k=2)
FAMILIES = {**{name: BACKBONES[name] for name in ("gemma", "llama")},
            "qwen_moe": (keras_hub.models.QwenMoeBackbone, dict(MOE, shared_expert_intermediate_dim=32)),
            "qwen3_moe": (keras_hub.models.Qwen3MoeBackbone, dict(MOE, head_dim=16))}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_quick_compile_moves_the_bytes_of_xlas_full_compile_on_every_official_map(mesh, name):
    from course_utils.communication.report import compiled_train_step, training_batch
    from course_utils.xla_settings import READING_COMPILE
    from course_utils.communication.hlo import parse_collectives

    cls, config = FAMILIES[name]
    dist = distribution.ModelParallel(layout_map=cls.get_layout_map(mesh), batch_dim_name="batch")
    with dist.scope():
        model = cls(**config)
        model.compile(optimizer="adam", loss="mse")
    x = {"token_ids": np.zeros((4, 8), "int32"), "padding_mask": np.ones((4, 8), "int32")}
    batch = training_batch(model, (x, np.zeros((4, 8, 64), "float32")))
    quick, full = ({(c.kind, c.axes): c.bytes for c in parse_collectives(
        compiled_train_step(model, dist, batch, options=options), ("batch", "model"), (2, 4))}
        for options in (READING_COMPILE, None))
    assert quick == full  # XLA may combine a few collectives differently (Qwen3Moe: 13 or 14), never other bytes


def test_fsdp_with_the_batch_kept_split_agrees_on_what_it_models(mesh):
    """Gemma's map with two /output rules: XLA gathers every weight over batch, and its gradient is
    combined over batch as FSDP implies (all-reduced whole, or reduce-scattered): AGREE."""
    cls, config = BACKBONES["gemma"]
    layout_map = cls.get_layout_map(mesh)
    layout_map["token_embedding/output"] = ("batch", None, None)
    layout_map[r"decoder_block_\d+/output"] = ("batch", None, None)
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with dist.scope():
        lm = keras_hub.models.GemmaCausalLM(backbone=cls(**config), preprocessor=None)
        lm.compile(optimizer="adam")
    x = {"token_ids": np.zeros((8, 16), "int32"), "padding_mask": np.ones((8, 16), "bool")}
    report = communication_report(lm, dist, (x, np.zeros((8, 16), "int32")))
    assert report.agrees, report
    gathers = [r for r in report.collectives if r.kind == "all-gather" and r.weight.endswith("ffw_gating/kernel")]
    assert gathers and all(r.axes == ("batch",) for r in gathers)
    assert any("(FSDP)" in e.source for e in report.expected)
