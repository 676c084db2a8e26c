"""The memory levers real runs pull, applied to compiled steps: fused attention drops what grows with the square of
the sequence, rematerialisation keeps each block's input, micro-batches run the step several times."""

import keras_hub
import pytest

from course_utils import advise
from course_utils.advice.levers import Levers, equal_tokens_fitted, fitted, own_points, seq_points
from course_utils.memory.presets import abstract_model

LLAMA = dict(vocabulary_size=512, num_layers=4, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
             intermediate_dim=256)


def test_the_fit_is_exact_through_its_three_points():
    terms = fitted({s: 7 + 3 * s + 2 * s * s for s in (64, 128, 256)}, 256)
    assert (round(terms.constant), round(terms.linear), round(terms.quadratic)) == (7, 3 * 256, 2 * 256 * 256)
    assert seq_points(1024) == (256, 512, 1024)


@pytest.mark.parametrize("rows, seq, expected", [
    (16, 64, ((64, 16), (32, 32), (32, 16))),  # a quarter of the length is already short
    (16, 1024, ((512, 32), (256, 64), (256, 32))),  # halved until at most 32
    (8, 65536, ((16384, 32), (8192, 64), (8192, 32))),
    (8, 32, ((32, 8), (16, 16), (16, 8))),
])
def test_an_accelerators_program_is_compiled_short_with_the_steps_tokens(rows, seq, expected):
    points = own_points(rows, seq)
    assert points == expected
    assert points[0][0] * points[0][1] == points[1][0] * points[1][1] == rows * seq == 2 * points[2][0] * points[2][1]
    assert all(r % rows == 0 for r, _ in points)  # the rows split wherever the step's rows split


def test_the_equal_tokens_fit_is_exact_for_what_a_token_keeps_and_what_its_scores_add():
    # a + b T + c T s: 7 bytes whatever the step, 3 a token, 2 a token and a position of its sequence
    points = own_points(8, 4096)
    terms = equal_tokens_fitted({(r, s): 7 + 3 * r * s + 2 * r * s * s for r, s in points}, 4096)
    tokens = 8 * 4096
    assert (round(terms.constant), round(terms.linear), round(terms.quadratic)) == (7, 3 * tokens, 2 * tokens * 4096)
    with pytest.raises(ValueError, match="takes the three own_points"):
        equal_tokens_fitted({(64, 256): 1}, 1024)


@pytest.fixture(scope="module")
def levered():
    llama = abstract_model(keras_hub.models.LlamaBackbone, LLAMA, dtype="mixed_bfloat16")
    shapes = [(8, 1)]  # FSDP alone: the tests read its row
    return {name: advise(llama, devices="8xH100-80GB", batch=16, seq=seq, mesh_shapes=shapes, only="FSDP", **kwargs)
            for name, seq, kwargs in (("compiled", 1024, {}), ("fused", 1024, dict(attention="fused")),
                                      ("fused 2x", 2048, dict(attention="fused")),
                                      ("fused remat", 1024, dict(attention="fused", remat=True)),
                                      ("micro", 1024, dict(attention="fused", micro_batch=8)))}


def _row(advice):
    return advice.row("FSDP", (8, 1))


@pytest.mark.compiles_long  # the module's steps at three sequence lengths
def test_fused_attention_drops_what_grows_with_the_square_of_the_sequence(levered):
    compiled, fused, doubled = (_row(levered[k]).program.memory.peak for k in ("compiled", "fused", "fused 2x"))
    assert fused < compiled / 2  # at 1,024 tokens a row, the scores of 8 heads dwarf the rest
    activations = _row(levered["fused"]).program.memory.temporaries
    # fused, the activations grow with the sequence, not its square: twice the tokens, at most twice the bytes
    assert _row(levered["fused 2x"]).program.memory.temporaries < 2.05 * activations
    assert doubled < 2 * fused and "attention fused" in _row(levered["fused"]).program.memory.how
    # the CPU program's activations, narrowed, are about twice the GPU's own: the notes say so where it applies
    said = "about twice what the GPU's own program keeps"
    assert any(said in line for line in levered["fused"].notes())
    assert not any(said in line for line in levered["compiled"].notes())


@pytest.mark.compiles_long  # the module's steps at three sequence lengths
def test_rematerialisation_keeps_each_blocks_input_and_computes_a_forward_pass_again(levered):
    fused, remat = _row(levered["fused"]), _row(levered["fused remat"])
    assert remat.program.memory.peak < fused.program.memory.peak
    assert remat.program.recomputed == pytest.approx(remat.program.flops / 3)
    assert remat.time.compute_total == pytest.approx(fused.time.compute_total * 4 / 3, rel=1e-6)
    assert "blocks rematerialised" in remat.program.memory.how


@pytest.mark.compiles_long  # the module's steps at three sequence lengths
def test_micro_batches_hold_one_micro_batch_and_run_the_step_as_often(levered):
    whole, micro = _row(levered["fused"]), _row(levered["micro"])
    assert micro.micro_steps == 2 and micro.program.memory.peak < whole.program.memory.peak
    assert micro.tokens == whole.tokens  # the same work a step
    assert micro.time.compute_total == pytest.approx(whole.time.compute_total, rel=0.05)
    assert "2 micro-batches of 8" in levered["micro"].title


@pytest.mark.parametrize("given, words", [
    (dict(attention="flash"), r"attention is one of \('as compiled', 'fused'\)"),
    (dict(remat="yes"), r"remat is True .* Received: remat='yes'"),
    (dict(micro_batch=3), r"micro_batch=3 does not divide the batch of 16"),
    (dict(micro_batch=0), r"micro_batch is the rows of one micro-step, a whole number above 0"),
    (dict(attention="fused", seq=30), r"give a seq that divides by 4, at least 16. Received: seq=30"),
])
def test_the_levers_are_checked_before_anything_compiles(given, words):
    llama = abstract_model(keras_hub.models.LlamaBackbone, LLAMA)
    with pytest.raises(ValueError, match=words):
        advise(llama, devices="8xH100-80GB", **{"batch": 16, "seq": 32, **given})


def test_the_default_is_no_lever():
    assert Levers() == Levers("as compiled", False, None) and not Levers().memory and Levers().steps(16) == 1


def test_a_micro_batch_the_batch_axis_cannot_split_is_a_reason_not_a_crash(mlp):
    model = mlp()
    model.compile(optimizer="adam", loss="mse")
    advice = advise(model, devices="8xH100-80GB", batch=16, micro_batch=4, mesh_shapes=[(8, 1), (4, 2)])
    split = [r for r in advice if r.mesh_shape == (8, 1)]
    assert split and all(r.verdict == "cannot split" and "a micro-batch of 4 does not split over 8 devices of the "
                         "batch axis" in r.problem for r in split)
    assert all(r.program is not None for r in advice if r.mesh_shape == (4, 2))  # 4 rows split over 4


def test_on_an_accelerators_own_program_a_block_whose_scores_fit_below_zero_keeps_its_vectors():
    # the own fit's scores come from sequences of 32 tokens, scaled to the step's length: a little noise there is a
    # large negative number at 8,192 tokens, which must not be taken from what the block's tokens keep
    from course_utils.advice.levers import OWN_TYPES, Terms, levered_memory
    from course_utils.memory.compiled import StepMemory

    state = StepMemory(arguments=10, outputs=10, temporaries=0, aliased=10)
    whole, block = Terms(5, 1000, 50), Terms(2, 400, -300)
    memory = levered_memory(whole, block, state, state, 4, Levers("fused"), OWN_TYPES, block_input=1, held=7)
    assert memory.temporaries == 7 + 1000 + 3 * 400
