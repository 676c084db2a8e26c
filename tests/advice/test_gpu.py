"""A GPU's own program, compiled by XLA's GPU compiler through JAX's CUDA plugin on a machine without a GPU
(`make gpu-targets`; `make test` installs it): it compiles, and it sends and holds what the corrected CPU program
says an accelerator would."""

import keras_hub
import pytest

from course_utils.advice import gpu
from course_utils.hardware import device_set
from course_utils.memory.presets import abstract_model

needs_plugin = pytest.mark.skipif(not gpu.available(), reason="the CUDA plugin is not installed (make gpu-targets)")
TINY = dict(vocabulary_size=512, num_layers=1, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
            intermediate_dim=256)  # lesson 10's tiny Llama


def test_the_h100_is_described_to_xla_from_its_device_set_and_another_chip_is_refused():
    config = gpu.target_config(device_set("8xH100-80GB"))
    assert "core_count: 132" in config and "device_memory_size: 80000000000" in config
    assert "memory_bandwidth: 3350000000000" in config and "major: 9" in config
    with pytest.raises(ValueError, match=r"program='gpu' knows the GPUs .* v5e-8 is made of"):
        gpu.target_config(device_set("v5e-8"))


@needs_plugin
@pytest.mark.parametrize("layout, mesh_shape", [("official map", (2, 4)), ("FSDP", (8, 1))])
def test_the_gpus_own_program_sends_what_the_corrected_cpu_program_says_and_holds_less(layout, mesh_shape):
    from course_utils.advice.candidates import candidates
    from course_utils.advice.program import read_step
    from course_utils.memory.compiled import language_model_step

    backbone = abstract_model(keras_hub.models.LlamaBackbone, TINY, dtype="mixed_bfloat16")
    model, tokens = language_model_step(type(backbone), backbone.get_config(), 8, 32)
    (candidate,) = [c for c in candidates(backbone, 8, None, [mesh_shape]) if c.layout == layout]
    own = gpu.read_gpu_step(model, candidate.layout_map, mesh_shape, tokens, device_set("8xH100-80GB"))
    cpu = read_step(model, candidate.distribution(), tokens)
    assert "GPU's own program" in own.source and own.flops > 0
    # the GPU keeps bf16 as bf16: less than XLA CPU's f32 copies; what it sends is what the CPU's correction says
    assert own.memory.peak < cpu.memory.peak
    assert 0.9 < own.sent() / cpu.sent() < 1.1
    assert {t.kind for t in own.transfers} <= {"all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                                "collective-permute"}


@needs_plugin
@pytest.mark.compiles_long  # every candidate's GPU program
def test_advise_reads_the_gpus_own_program():
    from course_utils import advise

    backbone = abstract_model(keras_hub.models.LlamaBackbone, TINY, dtype="mixed_bfloat16")
    # two of the five candidates on (8, 1): one whose weights are whole, one whose weights are split
    advice = advise(backbone, devices="8xH100-80GB", batch=8, seq=32, mesh_shapes=[(8, 1)], program="gpu",
                    only=("data parallel", "FSDP"))
    assert advice.program == "gpu" and {r.layout for r in advice} == {"data parallel", "FSDP"}
    assert all("GPU's own program" in r.program.source for r in advice)


@needs_plugin
@pytest.mark.compiles_long  # the GPU's programs at three points, with one block and two
def test_the_levers_on_the_gpus_own_program_hold_what_it_holds_at_the_steps_tokens_without_the_scores():
    from course_utils import advise
    from course_utils.advice.candidates import candidates
    from course_utils.advice.levers import own_points
    from course_utils.memory.compiled import language_model_step

    # wide and with few heads, so that a token's vectors outweigh its scores at a short length
    config = dict(vocabulary_size=512, num_layers=4, num_query_heads=2, num_key_value_heads=2, hidden_dim=512,
                  intermediate_dim=1024)
    backbone = abstract_model(keras_hub.models.LlamaBackbone, config, dtype="mixed_bfloat16")
    asked = dict(devices="8xH100-80GB", batch=64, seq=128, mesh_shapes=[(8, 1)], attention="fused", only="FSDP")
    own = advise(backbone, program="gpu", **asked).row("FSDP", (8, 1))
    assert "with the step's tokens a device" in own.program.memory.how and "attention fused" in own.program.memory.how
    # (that the GPU keeps fewer and narrower buffers than the CPU's program says is the test above, and the FLOPs
    # are the CPU program's by construction: `Steps._own_fit`)
    # all four blocks compiled whole by the GPU's compiler at a short length (sequences of 32: the scores are small),
    # with the step's tokens and with half of them: what half the tokens free is half of what the step's tokens
    # keep, which the advisor found from one block and two (its activations: the temporaries less what it holds
    # whatever the tokens, each gradient's shard and two blocks' gathered weights)
    from course_utils.advice.steps import gradients_and_gathered

    (rows, short), _, (half, _) = own_points(64, 128)
    (candidate,) = [c for c in candidates(backbone, 8, None, [(8, 1)]) if c.layout == "FSDP"]
    held = {}
    for r in (rows, half):
        model, tokens = language_model_step(type(backbone), backbone.get_config(), r, short)
        held[r] = gpu.read_gpu_step(model, candidate.layout_map, (8, 1), tokens, device_set("8xH100-80GB")).memory
    kept = own.program.memory.temporaries - gradients_and_gathered(backbone, candidate)
    freed = held[rows].temporaries - held[half].temporaries
    assert 0.9 < 2 * freed / kept < 1.1
