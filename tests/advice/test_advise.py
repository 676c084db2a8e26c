"""The advisor on a tiny keras-hub Llama and on a plain Keras model: candidates, ranking, what it reads
from each compiled program, and its mistakes."""

import keras
import pytest

from course_utils import advise
from course_utils.advice.program import FsdpRun, read_step
from course_utils.communication.train_step import compile_train_step, training_batch
from course_utils.memory.presets import abstract_model
from course_utils.xla_settings import READING_COMPILE

keras_hub = pytest.importorskip("keras_hub")

LLAMA = dict(vocabulary_size=512, num_layers=2, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
             intermediate_dim=256)


LLAMA_ASKED = dict(devices="8xH100-80GB", batch=16, seq=32)


@pytest.fixture(scope="module")
def llama_and_advice():
    llama = abstract_model(keras_hub.models.LlamaBackbone, LLAMA)
    return llama, advise(llama, **LLAMA_ASKED, mesh_shapes=[(2, 4), (8, 1)])


@pytest.fixture(scope="module")
def llama_advice(llama_and_advice):
    return llama_and_advice[1]


def test_every_layout_that_applies_is_a_candidate_on_each_shape(llama_advice):
    found = {(r.layout, r.mesh_shape) for r in llama_advice}
    assert found == {("official map", (2, 4)), ("official, batch kept split", (2, 4)), ("tensor parallel", (2, 4)),
                     ("official, sequence split", (2, 4)),
                     ("corrected map", (2, 4)), ("derived map", (2, 4)), ("data parallel", (8, 1)),
                     ("ZeRO-2", (8, 1)), ("official map", (8, 1)), ("official, batch kept split", (8, 1)), ("FSDP", (8, 1))}
    assert all(r.verdict == "fits" and r.program.flops > 0 and r.program.memory.peak > 0 for r in llama_advice)


def test_the_ranking_is_by_estimated_step_time_and_the_corrected_map_sends_less(llama_advice):
    steps = [r.time.step for r in llama_advice]
    assert steps == sorted(steps) and llama_advice.best is llama_advice.rows[0]
    official, corrected = (llama_advice.row(name, (2, 4)) for name in ("official map", "corrected map"))
    assert corrected.program.sent() < official.program.sent()
    assert corrected.time.communication_total < official.time.communication_total
    derived = llama_advice.row("derived map", (2, 4))  # derived from the graph: no contradiction to correct
    assert derived.program.sent() < official.program.sent()
    assert "Estimates for 8xH100-80GB" in repr(llama_advice) and "not measurements" in repr(llama_advice)


def test_the_sequence_split_trades_the_blocks_all_reduces_for_gathers_and_holds_less(llama_advice):
    # lesson 11's rule: each block's output split along the sequence over "model"
    split, kept = (llama_advice.row(name, (2, 4)) for name in ("official, sequence split", "official, batch kept split"))
    forward = {t.kind for t in split.program.transfers if t.pass_ == "forward" and t.axes == ("model",)}
    assert "all-gather" in forward and "all-reduce" not in forward
    assert any(t.kind == "all-reduce" and t.pass_ == "forward" and t.axes == ("model",) for t in kept.program.transfers)
    assert split.program.memory.peak < kept.program.memory.peak  # the activations between blocks held a quarter each


def test_a_deep_model_is_read_from_one_block_and_two(llama_advice):
    row = llama_advice.row("official map", (2, 4))
    assert "compiled with 1 and 2 of its 2 blocks" in row.program.how
    whole = read_step(*_llama_step(row, LLAMA), fsdp=FsdpRun())  # as advise counts FSDP as it runs
    # two blocks extended from one and two is two blocks compiled: exactly
    assert (row.program.flops, row.program.memory.peak, row.program.sent()) == (
        whole.flops, whole.memory.peak, whole.sent())


def _llama_step(row, config):
    from course_utils.advice.candidates import candidates
    from course_utils.memory.compiled import language_model_step

    backbone = abstract_model(keras_hub.models.LlamaBackbone, config)
    candidate = next(c for c in candidates(backbone, 8, shapes=[row.mesh_shape]) if c.layout == row.layout)
    model, tokens = language_model_step(keras_hub.models.LlamaBackbone, backbone.get_config(), 16, 32)
    return model, candidate.distribution(), tokens


def test_backend_optimisations_change_neither_memory_nor_flops_nor_collectives(mlp):
    from keras import distribution

    from course_utils.communication.hlo import collective_ops

    dist = distribution.DataParallel()
    with dist.scope():
        model = _compiled(mlp())
    batch = training_batch(model, (64, 16))
    fast, full = (compile_train_step(model, dist, batch, options=o, donate=True) for o in (READING_COMPILE, None))
    assert fast.memory_analysis().temp_size_in_bytes == full.memory_analysis().temp_size_in_bytes
    assert fast.cost_analysis()["flops"] == full.cost_analysis()["flops"]
    ops = [[(o.kind, o.axes, o.bytes) for o in collective_ops(c.as_text(), ("batch",), (8,))] for c in (fast, full)]
    assert ops[0] == ops[1] and ops[0]


def _compiled(model):
    model.compile(optimizer="adam", loss="mse")
    return model


def test_a_plain_keras_model_gets_data_parallel_fsdp_and_its_derived_tensor_parallel_maps_on_every_shape(mlp):
    model = _compiled(mlp())
    advice = advise(model, devices="8xH100-80GB", batch=64)
    assert {(r.layout, r.mesh_shape) for r in advice} == {
        ("data parallel", (8, 1)), ("ZeRO-2", (8, 1)), ("FSDP", (8, 1)), ("tensor parallel", (4, 2)),
        ("FSDP + tensor parallel", (4, 2)),
        ("tensor parallel", (2, 4)), ("FSDP + tensor parallel", (2, 4)), ("tensor parallel", (1, 8))}
    dp, fsdp = advice.row("data parallel", (8, 1)), advice.row("FSDP", (8, 1))
    assert fsdp.program.memory.arguments < dp.program.memory.arguments  # the weights and slots split 8 ways
    zero = advice.row("ZeRO-2", (8, 1))  # Adam's state split, the weights whole: between the two, and no more bytes
    assert fsdp.program.memory.arguments < zero.program.memory.arguments < dp.program.memory.arguments
    assert zero.program.sent() == pytest.approx(dp.program.sent(), rel=0.01)
    tp = advice.row("tensor parallel", (1, 8))
    assert tp.program.memory.arguments < dp.program.memory.arguments
    assert any(t.kind == "all-reduce" and t.axes == ("model",) and t.pass_ == "forward" for t in tp.program.transfers)
    only = advise(model, devices="8xH100-80GB", batch=64, mesh_shapes=[(2, 4)])
    assert {r.layout for r in only} == {"tensor parallel", "FSDP + tensor parallel"} and only.best.program
    # one layout asked for, on every shape: the same rows as among all of them
    asked = advise(model, devices="8xH100-80GB", batch=64, only="FSDP + tensor parallel")
    assert [r.mesh_shape for r in asked] == [(4, 2), (2, 4)] or [r.mesh_shape for r in asked] == [(2, 4), (4, 2)]
    assert asked.row("FSDP + tensor parallel", (2, 4)).program == only.row("FSDP + tensor parallel", (2, 4)).program


def test_the_advisors_mistakes_say_what_to_give(mlp):
    with pytest.raises(ValueError, match=r"2x8xH100-80GB has 16 devices .* this kernel has 8. Call setup_devices\(16\)"):
        advise(_compiled(mlp()), devices="2x8xH100-80GB", batch=64)
    with pytest.raises(ValueError, match=r"batch is the global batch, a whole number above 0. Received: batch=0"):
        advise(_compiled(mlp()), devices="8xH100-80GB", batch=0)
    with pytest.raises(ValueError, match=r"seq is the tokens per sequence \(e.g. seq=2048\), a whole number above 0. "
                                         r"Received: seq=None"):
        advise("gemma_2b_en", devices="8xH100-80GB", batch=8)
    with pytest.raises(ValueError, match=r"mesh_shapes are \(batch, model\) shapes of 8 devices"):
        advise(_compiled(mlp()), devices="8xH100-80GB", batch=64, mesh_shapes=[(3, 3)])
    uncompiled = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"advise needs a compiled model; .* has no optimizer. Call model.compile"):
        advise(uncompiled, devices="8xH100-80GB", batch=64)
    row = advise(_compiled(mlp()), devices="8xH100-80GB", batch=12, mesh_shapes=[(8, 1)]).rows[0]
    assert row.verdict == "cannot split" and "batch of 12 does not split over 8" in row.problem


@pytest.mark.parametrize("given, words", [
    (dict(efficiency="0.4"), r"efficiency is the share of peak FLOP/s .* Received: efficiency='0.4'"),
    (dict(efficiency=0), r"Received: efficiency=0\."),
    (dict(efficiency=5), r"Received: efficiency=5\."),
    (dict(batch=10**12), r"batch=1,000,000,000,000 makes arrays of 1,000,000,000,000 elements; JAX counts"),
    (dict(layouts="garbage"), r"layouts is a dict \{name: rules\}.*Received a str"),
    (dict(layouts=[("a", {})]), r"layouts is a dict .*Received a list"),
    (dict(layouts={"data parallel": {}}), r"'data parallel' is the name of one of the advisor's own .* another name"),
    (dict(layouts={"mine": {".*kernel": ("data", None)}}), r"layouts\['mine'\]\['.\*kernel'\] names \['data'\], "
                                                           r"not axes of the advisor's meshes"),
    (dict(layouts={"mine": 3}), r"layouts\['mine'\] is a dict of rules .* Received a int"),
    (dict(program="npu"), r"program is 'cpu' .*Received: program='npu'"),
    (dict(only="FDSP"), r"only names the layouts to try, some of \('data parallel', .*Received: only='FDSP' \('FDSP' is"),
    (dict(only=()), r"only names the layouts to try.*Received: only=\(\)"),
])
def test_every_argument_is_checked_before_anything_compiles(mlp, given, words, monkeypatch):
    import course_utils.advice.advise as module

    monkeypatch.setattr(module, "Steps", lambda *a, **k: pytest.fail("compiled before checking its arguments"))
    with pytest.raises((ValueError, TypeError), match=words):
        advise(_compiled(mlp()), devices="8xH100-80GB", **{"batch": 64, **given})


def test_a_model_that_is_not_built_or_raises_on_its_own_is_named_as_such(mlp):
    with pytest.raises(ValueError, match=r"needs a built model; .* has no variables yet. Build it first"):
        advise(keras.Sequential([keras.layers.Dense(2)]), devices="8xH100-80GB", batch=64)

    class Fails(keras.layers.Layer):
        def call(self, x, training=None):
            if training:
                raise ValueError("my layer's own mistake")
            return x

    x = keras.Input((4,))
    broken = keras.Model(x, Fails()(keras.layers.Dense(4)(x)))
    broken.compile(optimizer="adam", loss="mse")
    with pytest.raises((RuntimeError, ValueError), match=r"my layer's own mistake"):
        advise(broken, devices="8xH100-80GB", batch=64, mesh_shapes=[(8, 1)])


def test_no_candidate_says_why_instead_of_an_empty_table():
    from course_utils.advice.ranking import Advice
    from course_utils.hardware import device_set

    empty = Advice([], devices=device_set("8xH100-80GB"), title="t", efficiency=1.0,
                   empty="no layout applies to m on the mesh shapes [(2, 4)]")
    assert "No candidate: no layout applies" in str(empty)
    with pytest.raises(ValueError, match=r"No candidate to choose from: no layout applies"):
        empty.best


def test_the_same_programs_timed_on_other_hardware(llama_advice):
    v5e = llama_advice.on("v5e-8")
    assert {(r.layout, r.mesh_shape) for r in v5e} == {(r.layout, r.mesh_shape) for r in llama_advice}
    row, before = v5e.row("official map", (2, 4)), llama_advice.row("official map", (2, 4))
    assert row.program is before.program  # nothing compiled again
    assert row.time.compute_total == pytest.approx(before.time.compute_total * 9.9e14 / 1.97e14)
    assert "on v5e-8," in v5e.title
    with pytest.raises(ValueError, match=r"compiled for 8 devices; v5p-128 has 64"):
        llama_advice.on("v5p-128")


def test_a_gpu_step_over_what_jax_takes_at_its_start_says_how_to_run_it(llama_advice):
    """JAX's client allocates 75 % of each GPU's memory when it starts: a step that fits the GPU but not that share
    runs with XLA_CLIENT_MEM_FRACTION raised, and the notes say so for the steps it concerns, on GPUs only."""
    from dataclasses import replace

    from course_utils.hardware import device_set

    assert not any("XLA_CLIENT_MEM_FRACTION" in line for line in llama_advice.notes())  # a tiny model on an H100
    row = llama_advice.row("official map", (2, 4))
    small = replace(device_set("8xH100-80GB"), name="8 small GPUs", memory_bytes=row.program.memory.peak / 0.95)
    on_small = llama_advice.on(small)
    (note,) = [line for line in on_small.notes() if "XLA_CLIENT_MEM_FRACTION" in line]
    assert "official map on (2, 4)" in note and on_small.row("official map", (2, 4)).verdict == "tight"
    assert "XLA_CLIENT_MEM_FRACTION set to 0.95 or more" in note  # what the largest of them needs, rounded up
    over = [r for r in on_small if r.verdict in ("fits", "tight") and r.program.memory.peak > 0.75 * small.memory_bytes]
    assert len(over) >= 1 and all(f"{r.layout} on " in note for r in over[:3])
    tpu = replace(small, kind="tpu", name="8 small TPUs")
    assert not any("XLA_CLIENT_MEM_FRACTION" in line for line in llama_advice.on(tpu).notes())


def test_a_layout_that_cannot_split_a_weight_says_which_in_words():
    gemma = abstract_model(keras_hub.models.GemmaBackbone, dict(vocabulary_size=256, num_layers=1, num_query_heads=4,
                                                               num_key_value_heads=1, hidden_dim=32, intermediate_dim=64,
                                                               head_dim=8))
    advice = advise(gemma, devices="8xH100-80GB", batch=8, seq=16, mesh_shapes=[(2, 4), (8, 1)])
    official = advice.row("official map", (2, 4))
    assert official.verdict == "cannot split" and official.program is None
    assert "key/kernel (1, 32, 8): dimension 0, of size 1, does not divide into 4 parts along 'model'" in official.problem
    verdicts = [r.verdict for r in advice]  # those that cannot run are ranked after every candidate that runs
    assert verdicts[0] == "fits" and verdicts.index("cannot split") == verdicts.count("fits") and verdicts[-1] == "cannot split"


def test_a_keras_hub_language_model_without_an_official_map_is_advised_as_one():
    """GPT-2 has a causal language model in keras-hub but no `get_layout_map`: it is trained on tokens, as a Llama
    is, and its candidates are the layouts derived from its graph."""
    gpt2 = abstract_model(keras_hub.models.GPT2Backbone, dict(vocabulary_size=256, num_layers=1, num_heads=4,
                                                             hidden_dim=32, intermediate_dim=128, dropout=0.0,
                                                             max_sequence_length=16))
    advice = advise(gpt2, devices="8xH100-80GB", batch=8, seq=16, mesh_shapes=[(8, 1)])
    assert "8 x 16 tokens" in advice.title
    assert {r.layout for r in advice} == {"data parallel", "ZeRO-2", "FSDP"}
    assert all(r.verdict == "fits" for r in advice)
    assert advice.row("FSDP", (8, 1)).memory_gib < advice.row("data parallel", (8, 1)).memory_gib


def test_advising_twice_compiles_nothing_again(llama_and_advice, monkeypatch):
    from course_utils.program_cache import installed

    cache = installed()
    if cache is None:
        pytest.skip("the compilation cache is off")
    llama, _ = llama_and_advice  # advised once already, on (2, 4) and (8, 1)
    written = []
    monkeypatch.setattr(cache, "put", lambda key, value, put=cache.put: (written.append(key), put(key, value)))
    again = advise(llama, **LLAMA_ASKED, mesh_shapes=[(2, 4)])
    # the second build numbers Keras's unnamed layers anew (llama_rotary_embedding_1): its programs are the first's
    assert again.rows and [key for key in written if key.startswith("jit_train_step")] == []


def test_calibrated_on_one_measured_candidate_predicts_the_others_with_one_efficiency(mlp):
    advice = advise(_compiled(mlp(hidden=1024)), devices="8xH100-80GB", batch=8192)
    best = advice.best
    mfu = round(0.5 * best.time.compute_total / best.time.communication_total, 4)  # its compute 2x its collectives
    ran = advice.on(advice.devices, efficiency=mfu)  # a "measured" run at that MFU
    measured = ran.row(best.layout, best.mesh_shape).time.step
    assert ran.row(best.layout, best.mesh_shape).time.bound == "compute" and 1e-3 < mfu < 1
    again = advice.calibrated(best.layout, best.mesh_shape, measured)
    assert again.row(best.layout, best.mesh_shape).time.step == pytest.approx(measured, rel=1e-6)
    assert again.efficiency == pytest.approx(mfu, rel=1e-6)
    assert {(r.layout, r.mesh_shape) for r in again} == {(r.layout, r.mesh_shape) for r in advice}
    for r in again:  # every other candidate's compute scaled by the same factor, its collectives unchanged
        before = advice.row(r.layout, r.mesh_shape).time
        assert r.time.compute_total == pytest.approx(before.compute_total / again.efficiency, rel=1e-6)
        assert r.time.communication_total == pytest.approx(before.communication_total, rel=1e-9)
        assert r.time.step == pytest.approx(ran.row(r.layout, r.mesh_shape).time.step, rel=1e-6)
    assert [r.time.step for r in again] == sorted(r.time.step for r in again)  # ranked again


@pytest.mark.parametrize("measured, words", [
    (1e-12, r"faster than the estimate at the roofline"),
    (1e6, r"slower than the estimate at 0\.1 % of peak"),
    (-1.0, r"measured is the seconds .* Received: measured=-1\.0"),
    ("0.4", r"Received: measured='0\.4'"),
])
def test_calibrated_refuses_a_measurement_no_efficiency_reaches(mlp, measured, words):
    advice = advise(_compiled(mlp()), devices="8xH100-80GB", batch=64)
    with pytest.raises(ValueError, match=words):
        advice.calibrated(advice.best.layout, advice.best.mesh_shape, measured)
    with pytest.raises(KeyError, match=r"No candidate 'nonsense'"):
        advice.calibrated("nonsense", (8, 1), 1.0)


def test_the_notes_say_which_link_each_mesh_axis_crosses(mlp):
    from dataclasses import replace

    from course_utils import device_set

    two_nodes = replace(device_set("2x8xH100-80GB"), name="2x4xH100-80GB", devices=8, per_node=4)
    advice = advise(_compiled(mlp()), devices=two_nodes, batch=64, mesh_shapes=[(8, 1), (2, 4)])
    line = next(n for n in advice.notes() if n.startswith("The link each mesh axis crosses"))
    # (2, 4): the batch axis joins one GPU of each node (its own card), the model axis stays in a node
    assert "(2, 4): batch over InfiniBand NDR (one 400 Gb/s ConnectX-7 per GPU), 1 per node, 5e+10 B/s, model over " \
           "NVLink 4 (NVSwitch), 4.5e+11 B/s" in line
    assert "(8, 1): batch over InfiniBand NDR (one 400 Gb/s ConnectX-7 per GPU), 4 per node, 2e+11 B/s" in line
    assert "The link each mesh axis crosses" in repr(advice)


def test_on_two_nodes_hsdp_keeps_fsdp_gathers_inside_a_node_and_sends_only_gradient_sums_across(mlp):
    from dataclasses import replace

    from course_utils import device_set

    two_nodes = replace(device_set("2x8xH100-80GB"), name="2x4xH100-80GB", devices=8, per_node=4)
    advice = advise(_compiled(mlp(hidden=256)), devices=two_nodes, batch=64)
    # every (batch, model) shape, then (replica, batch, model) = (2 nodes, b, m) with b > 1; data and tensor
    # parallelism alone split nothing over "batch", so they are not repeated on three axes
    assert {r.mesh_shape for r in advice if len(r.mesh_shape) == 3} == {(2, 4, 1), (2, 2, 2)}
    assert {r.layout for r in advice if r.mesh_shape == (2, 4, 1)} == {"FSDP"}
    hsdp, fsdp, dp = (advice.row("FSDP", (2, 4, 1)), advice.row("FSDP", (8, 1)),
                      advice.row("data parallel", (8, 1)))
    across = [t for t in hsdp.program.transfers if "replica" in t.axes]
    assert across and all(t.kind in ("all-reduce", "reduce-scatter") and t.pass_ == "backward" for t in across)
    assert {t.axes for t in hsdp.program.transfers if t.kind == "all-gather"} == {("batch",)}
    # each node holds the weights split 4 ways (FSDP over 8 splits them 8 ways, data parallel not at all)
    assert fsdp.program.memory.arguments < hsdp.program.memory.arguments < dp.program.memory.arguments
    assert hsdp.time.step < fsdp.time.step  # its gathers on NVLink, not through the NICs
    assert hsdp.tokens == 64 / 8
    text = repr(advice)
    assert "2 x (4, 1)" in text and "replica: InfiniBand, batch: NVLink" in text
    assert "HSDP (2 x (4, 1), 2 x (2, 2)): 2 x (b, m) is 2 replicas of a (b, m) (batch, model) mesh" in text
    one_node = advise(_compiled(mlp(hidden=256)), devices="8xH100-80GB", batch=64, mesh_shapes=None)
    assert all(len(r.mesh_shape) == 2 for r in one_node)


def test_a_three_axis_mesh_can_be_asked_for_and_a_batch_it_cannot_split_is_a_reason(mlp):
    model = _compiled(mlp())
    advice = advise(model, devices="8xH100-80GB", batch=4, mesh_shapes=[(2, 2, 2)])
    assert {r.layout for r in advice} == {"FSDP + tensor parallel"}
    with pytest.raises(ValueError, match=r"\(replica, batch, model\) shapes for HSDP, e.g. \(2, 4, 1\)"):
        advise(model, devices="8xH100-80GB", batch=4, mesh_shapes=[(2, 2, 1)])
    odd = advise(model, devices="8xH100-80GB", batch=6, mesh_shapes=[(2, 2, 2)])
    assert odd.rows[0].verdict == "cannot split"
    assert odd.rows[0].problem == "the batch of 6 does not split over 4 devices of the replica and batch axes"
