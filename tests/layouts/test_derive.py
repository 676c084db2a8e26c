"""A layout map derived from a model's graph: checked, not trusted.

For each architecture (a Sequential MLP, a functional transformer block of keras.layers, a small CNN, keras-hub
Gemma, Llama and a mixture of experts): the map builds, `check_layout_map` finds nothing wrong with it, training
under it equals one device (the course's step-by-step equivalence), and its compiled step's forward pass closes
each Megatron pair with one all-reduce over the model axis, and no other (a CNN's convolutions, split by output
channels, are gathered instead); on keras-hub models it sends no more than the official map.
"""

import keras
import numpy as np
import pytest
from keras import distribution

from course_utils import check_layout_map, compare_runs, make_mesh, run_training
from course_utils.layouts.derive import derive_layout_map

MESH_AXES = ("batch", "model")


def _mlp():
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu", name="up"),
                              keras.layers.Dense(16, name="down"), keras.layers.Dense(4, name="head")], name="mlp")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return model


def _block():
    x = keras.Input((8, 32))
    # no biases: a key's bias has no gradient (softmax ignores what it adds to every score), so a step changes it by
    # rounding alone, which the step-by-step equivalence cannot judge against itself
    attended = keras.layers.MultiHeadAttention(4, 8, use_bias=False, name="attention")(x, x)
    h = keras.layers.LayerNormalization(name="norm")(x + attended)
    wide = keras.layers.Dense(128, activation="gelu", name="ffw_up")(h)
    out = keras.layers.Dense(32, name="ffw_down")(wide)
    logits = keras.layers.Dense(4, name="head")(keras.layers.GlobalAveragePooling1D()(h + out))
    model = keras.Model(x, logits, name="block")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return model


def _cnn():
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(8, 3, padding="same", name="conv1"),
                              keras.layers.ReLU(), keras.layers.Conv2D(16, 3, padding="same", name="conv2"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4, name="head")], name="cnn")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return model


def _data(shape, n=32):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, *shape)).astype("float32"), rng.integers(0, 4, size=(n,))


@pytest.mark.parametrize("build, shape, pairs", [(_mlp, (16,), [(("mlp/up",), "mlp/down")]),
                                                  (_block, (8, 32), [(("attention/query", "attention/key",
                                                                       "attention/value"), "attention/attention_output"),
                                                                      (("ffw_up",), "ffw_down")]),
                                                  (_cnn, (8, 8, 3), [])],
                         ids=["sequential MLP", "functional transformer block", "small CNN"])
def test_a_derived_map_trains_as_one_device_and_each_pair_closes_with_one_all_reduce(build, shape, pairs):
    from course_utils import communication_report

    mesh = make_mesh((2, 4), MESH_AXES)
    derived = derive_layout_map(build(), mesh)
    assert [(tuple(p), c) for p, c in derived.pairs] == pairs
    model = build()
    assert check_layout_map(derived.layout_map, model) == []
    dist = distribution.ModelParallel(layout_map=derived.layout_map, batch_dim_name="batch")
    data = _data(shape)
    single = run_training(build, data, batch_size=16)
    sharded = run_training(build, data, distribution=dist, batch_size=16)
    assert compare_runs(single, sharded).equivalent
    with dist.scope():
        laid_out = build()
    report = communication_report(laid_out, dist, (16, *shape))
    forward = [r for r in report.by_layer().rows if r["kind"] == "all-reduce" and r["axes"] == ("model",)
               and r["pass"] == "forward"]
    assert sum(r["count"] for r in forward) == len(pairs), forward
    if build is _cnn:  # each convolution split by its output channels; the next layer gathers them
        assert derived.layout_map["cnn/conv1/kernel"].axes[-1] == "model"
        assert any(r["layer"] == "cnn/conv2" and r["kind"] == "all-gather" and r["axes"] == ("model",)
                   for r in report.by_layer().rows)


def test_every_weight_has_a_rule_or_a_reason_and_the_heads_that_do_not_divide_stay_whole():
    import keras_hub

    backbone = keras_hub.models.GemmaBackbone(vocabulary_size=256, num_layers=2, num_query_heads=4,
                                              num_key_value_heads=1, hidden_dim=32, intermediate_dim=64, head_dim=8)
    derived = derive_layout_map(backbone, make_mesh((2, 4), MESH_AXES))
    covered = {w for rule in derived.rows for w in rule.weights if not w.endswith("/output")}
    assert covered | {p for p, _ in derived.whole} == {v.path for v in backbone.weights}
    pinned = {w for rule in derived.rows for w in rule.weights if w.endswith("/output")}
    assert "decoder_block_1/ffw_linear/output" in pinned and "decoder_block_1/ffw_gating/output" not in pinned
    key = next(r for r in derived.rows if "decoder_block_0/attention/key/kernel" in r.weights)
    assert "model" not in key.axes and "key/value heads fewer than query heads" in key.reason
    assert key.weights == ("decoder_block_0/attention/key/kernel", "decoder_block_1/attention/key/kernel")
    assert derived.layout_map["decoder_block_1/attention/query/kernel"].axes[0] == "model"  # the heads
    assert len(derived.rows) < len({v.path for v in backbone.weights})  # one rule serves every block
    assert check_layout_map(derived.layout_map, backbone) == []


@pytest.mark.parametrize("preset", ["gemma", "llama", "qwen_moe"])
def test_on_keras_hub_models_it_trains_as_one_device_and_sends_no_more_than_the_official_map(preset):
    import keras_hub

    from course_utils import communication_report, compare_communication

    cls, config = {
        "gemma": (keras_hub.models.GemmaBackbone, dict(vocabulary_size=256, num_layers=1, num_query_heads=4,
                                                       num_key_value_heads=4, hidden_dim=32, intermediate_dim=64,
                                                       head_dim=8)),
        "llama": (keras_hub.models.LlamaBackbone, dict(vocabulary_size=256, num_layers=1, num_query_heads=4,
                                                       num_key_value_heads=4, hidden_dim=32, intermediate_dim=64)),
        "qwen_moe": (keras_hub.models.QwenMoeBackbone, dict(vocabulary_size=256, num_layers=1, num_query_heads=4,
                                                            num_key_value_heads=2, hidden_dim=32, intermediate_dim=64,
                                                            moe_intermediate_dim=16, shared_expert_intermediate_dim=32,
                                                            num_experts=4, top_k=2)),
    }[preset]
    mesh = make_mesh((2, 4), MESH_AXES)

    def build():
        tokens = keras.Input((8,), dtype="int32")
        hidden = cls(**config)({"token_ids": tokens, "padding_mask": keras.ops.ones_like(tokens)})
        model = keras.Model(tokens, keras.layers.Dense(4, name="head")(hidden[:, 0, :]))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        return model

    derived = derive_layout_map(build(), mesh)
    assert check_layout_map(derived.layout_map, build()) == []
    tokens = np.random.default_rng(0).integers(0, 256, size=(16, 8))
    data = (tokens, np.arange(16) % 4)
    dist = distribution.ModelParallel(layout_map=derived.layout_map, batch_dim_name="batch")
    assert compare_runs(run_training(build, data, batch_size=8),
                        run_training(build, data, distribution=dist, batch_size=8)).equivalent
    official_map = cls.get_layout_map(mesh)
    official = distribution.ModelParallel(layout_map=official_map, batch_dim_name="batch")
    batch = (tokens[:8], np.arange(8) % 4)
    reports = {}
    for name, d in (("derived", dist), ("official", official)):
        with d.scope():
            reports[name] = communication_report(build(), d, batch)
    compared = compare_communication(reports)
    sent = {name: sum(r.sent_bytes for r in report.collectives) for name, report in reports.items()}
    assert sent["derived"] <= sent["official"], (sent, compared)


def test_where_the_official_map_cannot_split_one_key_value_head_the_derived_map_keeps_it_whole():
    import keras_hub

    from course_utils.memory.fit import cannot_split

    mesh = make_mesh((2, 4), MESH_AXES)
    backbone = keras_hub.models.GemmaBackbone(vocabulary_size=256, num_layers=1, num_query_heads=4,
                                              num_key_value_heads=1, hidden_dim=32, intermediate_dim=64, head_dim=8)
    official = distribution.ModelParallel(layout_map=type(backbone).get_layout_map(mesh), batch_dim_name="batch")
    derived = derive_layout_map(backbone, mesh)
    assert "attention/key/kernel" in str(cannot_split(backbone, official))
    assert cannot_split(backbone, distribution.ModelParallel(layout_map=derived.layout_map,
                                                             batch_dim_name="batch")) is None


def test_every_weight_left_whole_says_why():
    mesh = make_mesh((2, 4), MESH_AXES)
    whole = dict(derive_layout_map(_block(), mesh, fsdp=False).whole)
    assert set(whole) == {"norm/gamma", "norm/beta", "ffw_down/bias", "head/kernel", "head/bias"}
    assert whole["ffw_down/bias"].startswith("not split over 'model': the bias of ffw_down, added after the all-reduce")
    assert whole["head/kernel"].startswith("no rule over 'model' takes it (it is not in a Megatron pair, not an "
                                           "output projection that widens")  # 32 to 4 narrows
    assert all(why.endswith("; FSDP is off (fsdp=False)") for why in whole.values())
    neither = dict(derive_layout_map(_mlp(), mesh, tensor_parallel=False, fsdp=False).whole)
    assert set(neither) == {v.path for v in _mlp().weights} and all(
        why.startswith("no axis splits the model (tensor_parallel=False") for why in neither.values())
    assert dict(derive_layout_map(_block(), mesh).whole) == {}  # FSDP splits every weight of this block over batch


def test_why_gives_a_weights_layout_and_its_reason_split_or_whole():
    derived = derive_layout_map(_mlp(), make_mesh((2, 4), MESH_AXES), fsdp=False)
    assert derived.why("mlp/down/kernel").startswith("('model', None): rows of a Megatron pair: mlp/down sums over "
                                                     "the split result of mlp/up")
    assert derived.why("mlp/head/kernel").startswith("whole: no rule over 'model' takes it")
    with pytest.raises(KeyError, match=r"'mlp/up/gamma' is no weight of the model this map was derived for. Its "
                                        r"weights: \['mlp/down/bias', "):
        derived.why("mlp/up/gamma")


def test_what_it_refuses_says_what_to_do():
    mesh = make_mesh((2, 4), MESH_AXES)
    with pytest.raises(ValueError, match=r"needs a built model.*Build it first"):
        derive_layout_map(keras.Sequential([keras.layers.Dense(4)]), mesh)
    with pytest.raises(ValueError, match=r"model_axis='heads' is not an axis of the mesh, whose axes are "
                                         r"\('batch', 'model'\)"):
        derive_layout_map(_mlp(), mesh, model_axis="heads")
    with pytest.raises(TypeError, match=r"needs a keras.distribution.DeviceMesh"):
        derive_layout_map(_mlp(), (2, 4))
    fsdp_only = derive_layout_map(_mlp(), make_mesh((8,), ("batch",)))
    assert fsdp_only.pairs == () and all("model" not in r.axes for r in fsdp_only.rows)
