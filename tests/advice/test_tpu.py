"""The TPU's own program: how many times each collective runs (loops read from their counters), what an
asynchronous collective delivers, and, where libtpu is installed (`make tpu-targets`), a step compiled for a
TPU slice and read."""

import warnings

import pytest

from course_utils.communication.hlo import collective_ops
from course_utils.communication.runs import executions
from course_utils.hardware import DeviceSet, Link

LOOP = """HloModule step

%body (p: (u32[], f32[8])) -> (u32[], f32[8]) {
  %p = (u32[], f32[8]) parameter(0)
  %i = u32[] get-tuple-element(%p), index=0
  %x = f32[8] get-tuple-element(%p), index=1
  %permute = (f32[8]{0}, f32[8]{0}, u32[]{:S(2)}, u32[]{:S(2)}) collective-permute-start(%x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  %done = f32[8]{0} collective-permute-done(%permute)
  %step = u32[] constant(STEP)
  %next = u32[] add(%i, %step)
  ROOT %out = (u32[], f32[8]) tuple(%next, %done)
}

%cond (q: (u32[], f32[8])) -> pred[] {
  %q = (u32[], f32[8]) parameter(0)
  %j = u32[] get-tuple-element(%q), index=0
  %limit = u32[] constant(LIMIT)
  ROOT %less = pred[] compare(%j, %limit), direction=LT
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %zero = u32[] constant(START)
  %first = u32[] copy(%zero)
  %init = (u32[], f32[8]) tuple(%first, %a)
  %loop = (u32[], f32[8]) while(%init), condition=%cond, body=%body
  %all = f32[32]{0} all-gather(%a), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %r = f32[8] get-tuple-element(%loop), index=1
}
"""


def _program(start, step, limit):
    return LOOP.replace("START", str(start)).replace("STEP", str(step)).replace("LIMIT", str(limit))


@pytest.mark.parametrize("start, step, limit, rounds", [(0, 1, 4, 4), (0, 2, 4, 2), (1, 2, 8, 4), (0, 3, 8, 3),
                                                        (5, 1, 4, 0)])
def test_a_loops_collectives_run_once_per_round_of_its_counter(start, step, limit, rounds):
    text = _program(start, step, limit)
    assert executions(text)["body"] == rounds
    ops = {op.kind: op for op in collective_ops(text, ("x",), (4,))}
    assert ops["collective-permute"].times == rounds
    assert ops["all-gather"].times == 1


def test_a_loop_whose_counter_is_not_a_constant_runs_an_unknown_number_of_times():
    text = _program(0, 1, 4).replace("%limit = u32[] constant(4)", "%limit = u32[] get-tuple-element(%q), index=0")
    assert executions(text)["body"] == 0


def test_an_asynchronous_collective_delivers_its_output_not_its_operand_and_contexts():
    (permute,) = [op for op in collective_ops(_program(0, 1, 4), ("x",), (4,)) if op.kind == "collective-permute"]
    assert permute.shapes == ((8,),) and permute.bytes == 8 * 4
    assert permute.computation == "body"


def test_a_topology_must_be_a_tpu_slice_of_as_many_chips():
    link = Link("ICI", 1e11, "test")
    with pytest.raises(ValueError, match="has 8 chips, not 4 devices"):
        DeviceSet("mine", "TPU", 4, 1e14, 16e9, link, per_node=4, kind="tpu", topology="v5e:2x4")
    with pytest.raises(ValueError, match="names a TPU slice"):
        DeviceSet("mine", "GPU", 8, 1e14, 16e9, link, per_node=8, kind="gpu", topology="v5e:2x4")


def test_program_tpu_needs_a_tpu_set_and_says_so():
    from course_utils.advice.arguments import target_of
    from course_utils.hardware import device_set

    with pytest.raises(ValueError, match="is not one"):
        target_of("tpu", device_set("8xH100-80GB"))
    with pytest.raises(ValueError, match="program is 'cpu'"):
        target_of("xpu", device_set("v5e-8"))
    with pytest.raises(ValueError, match="program='gpu' compiles for GPUs; v5e-8 is a TPU set"):
        target_of("gpu", device_set("v5e-8"))
    assert target_of("cpu", device_set("v5e-8")) is None


needs_libtpu = pytest.mark.skipif(not __import__("course_utils.advice.tpu", fromlist=["available"]).available(),
                                  reason="libtpu is not installed (make tpu-targets)")


@needs_libtpu
def test_the_tpu_program_of_fsdp_counts_its_windowed_loops_and_agrees_with_the_cpu_on_flops(monkeypatch):
    from keras import distribution

    from course_utils.advice.program import read_step
    from course_utils.advice.tpu import read_tpu_step
    from course_utils.layouts.layout_map import make_layout_map
    from course_utils.mesh import make_mesh
    from course_utils.models import mlp_block
    from course_utils.program_cache import installed

    block = mlp_block(width=512, hidden=2048)
    layout_map = make_layout_map(make_mesh((8, 1), ("batch", "model")), {".*kernel": ("batch", None)})
    cache, written = installed(), []
    if cache:  # what this process writes to the compilation cache (the lessons' kernels write there too)
        monkeypatch.setattr(cache, "put", lambda key, value, put=cache.put: (written.append(key), put(key, value)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning that a cached TPU program cannot be loaded here
        tpu = read_tpu_step(block, layout_map, (8, 1), (8 * 1024, 512), "v5p:2x2x2")
    # a program for a TPU that is not there cannot be loaded back: it is not kept in the compilation cache
    assert not [key for key in written if key.startswith("jit_train_step")]
    cpu = read_step(block, distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), (8 * 1024, 512))
    assert "TPU's own program" in tpu.source and "v5p:2x2x2" in tpu.source
    permutes = [t for t in tpu.transfers if t.kind == "collective-permute"]
    # the gradients' reduce-scatters are windowed: permutes in loops that go round more than once
    assert permutes and sum(t.count for t in permutes) > len(permutes)
    # each gradient (2 MiB of bf16) leaves a device at least as the ring's reduce-scatter sends it: 7/8 of it
    assert sum(t.sent for t in permutes) >= 2 * 7 / 8 * 512 * 2048 * 2
    # the TPU's cost analysis counts a windowed loop's body once; each further round its counter states is counted
    # too (the TPU writes its products as convolutions), so the two programs agree on the step's FLOPs
    assert tpu.flops == pytest.approx(cpu.flops, rel=0.01) and not tpu.undercounted
    assert cpu.flops == pytest.approx(6 * 1024 * 2 * 512 * 2048, rel=0.01)


@needs_libtpu
@pytest.mark.compiles_long  # the TPU's programs at three points, with one block and two
def test_the_levers_read_the_tpus_own_program_at_the_steps_tokens():
    import keras_hub

    from course_utils import advise
    from course_utils.memory.presets import abstract_model

    # one block, compiled whole (a deep model's one and two blocks: the GPU's levers test), at a quarter of the cost
    llama = abstract_model(keras_hub.models.LlamaBackbone, dict(
        vocabulary_size=512, num_layers=1, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
        intermediate_dim=256), dtype="mixed_bfloat16")
    asked = dict(devices="v5e-8", batch=8, seq=256, mesh_shapes=[(8, 1)], only="FSDP", program="tpu")
    compiled = advise(llama, **asked).row("FSDP", (8, 1))
    fused = advise(llama, attention="fused", **asked).row("FSDP", (8, 1))
    assert "TPU's own program" in fused.program.source and "with the step's tokens" in fused.program.memory.how
    # a row of 256 tokens, 8 heads: 2 MiB of f32 scores a block, which the TPU's compiler keeps as compiled (at 1,024
    # tokens it keeps little of them): fused, none is kept, and never much more than as compiled
    assert fused.program.memory.arguments < fused.program.memory.peak < compiled.program.memory.peak / 2
    assert fused.program.flops == compiled.program.flops


CHAIN = """HloModule step

%start (p0: f32[4]) -> (f32[4], f32[16]) {
  %p0 = f32[4]{0} parameter(0)
  %all-gather.1 = f32[16]{0} all-gather(%p0), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}, frontend_attributes={chain_id="3"}
  ROOT %cc.1 = (f32[4]{0}, f32[16]{0}) custom-call(%all-gather.1), custom_call_target="AsyncCollectiveStart"
}

%continued (p1: f32[4], p2: f32[16], p3: f32[8]) -> (f32[8], f32[4], f32[16]) {
  %p1 = f32[4]{0} parameter(0)
  %p3 = f32[8]{0} parameter(2)
  %product = f32[8]{0} multiply(%p3, %p3)
  %all-gather.2 = f32[16]{0} all-gather(%p1), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}, frontend_attributes={chain_id="3"}
  %p2 = f32[16]{0} parameter(1)
  ROOT %t = (f32[8]{0}, f32[4]{0}, f32[16]{0}) tuple(%product, %p1, %all-gather.2)
}

%done (p4: f32[4], p5: f32[16]) -> f32[16] {
  %p4 = f32[4]{0} parameter(0)
  %all-gather.3 = f32[16]{0} all-gather(%p4), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}, frontend_attributes={chain_id="3"}
  ROOT %cc.2 = f32[16]{0} custom-call(%all-gather.3), custom_call_target="AsyncCollectiveDone"
}

ENTRY %main (a: f32[4], b: f32[8]) -> (f32[16], f32[8], f32[16]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  %s = (f32[4]{0}, f32[16]{0}) fusion(%a), kind=kCustom, calls=%start
  %s0 = f32[4]{0} get-tuple-element(%s), index=0
  %s1 = f32[16]{0} get-tuple-element(%s), index=1
  %c = (f32[8]{0}, f32[4]{0}, f32[16]{0}) fusion(%s0, %s1, %b), kind=kCustom, calls=%continued
  %c0 = f32[8]{0} get-tuple-element(%c), index=0
  %c1 = f32[4]{0} get-tuple-element(%c), index=1
  %c2 = f32[16]{0} get-tuple-element(%c), index=2
  %d = f32[16]{0} fusion(%c1, %c2), kind=kCustom, calls=%done
  %other = f32[16]{0} all-gather(%a), channel_id=7, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %r = (f32[16]{0}, f32[8]{0}, f32[16]{0}) tuple(%d, %c0, %other)
}
"""


def test_a_collective_written_in_each_piece_of_its_asynchronous_chain_is_sent_once():
    # a TPU program overlaps an all-gather with a product by writing it in the chain's start, each
    # continuation and its done (same channel, same chain); a second all-gather on the same channel is another
    gathers = [op for op in collective_ops(CHAIN, ("x",), (4,)) if op.kind == "all-gather"]
    assert [(op.name, op.computation, op.times) for op in gathers] == [("all-gather.1", "start", 1),
                                                                     ("other", "main", 1)]
    assert executions(CHAIN)["continued"] == 1


@needs_libtpu
@pytest.mark.parametrize("layout, mesh_shape", [("official map", (2, 4)), ("official map", (8, 1)),
                                                ("official, batch kept split", (8, 1))])
def test_the_tpu_program_sends_about_what_the_corrected_cpu_program_says(layout, mesh_shape):
    # Two readings of one Llama step: the TPU's own program, and XLA's CPU program with its widening and
    # all-reduce + slice corrected. Their partitioners choose alike, not the same (the TPU gathers in other
    # places, keeps Adam's update sharded in other ways), so the totals agree within 1.5x, not exactly; a
    # collective counted once per piece of a TPU's async chain would make it up to 2.75x.
    import keras_hub

    from course_utils.advice.candidates import candidates
    from course_utils.advice.program import read_step
    from course_utils.advice.tpu import read_tpu_step
    from course_utils.memory.compiled import language_model_step
    from course_utils.memory.presets import abstract_model

    config = dict(vocabulary_size=512, num_layers=1, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
                  intermediate_dim=256)  # lesson 10's tiny Llama
    backbone = abstract_model(keras_hub.models.LlamaBackbone, config, dtype="mixed_bfloat16")
    model, tokens = language_model_step(type(backbone), backbone.get_config(), 8, 32)
    (candidate,) = [c for c in candidates(backbone, 8, None, [mesh_shape]) if c.layout == layout]
    cpu = read_step(model, candidate.distribution(), tokens)
    tpu = read_tpu_step(model, candidate.layout_map, mesh_shape, tokens, "v5e:2x4")
    assert 1 / 1.5 < tpu.sent() / cpu.sent() < 1.5


def test_a_damaged_libtpu_is_named_with_how_to_install_it_again_and_the_kernel_lives(tmp_path, monkeypatch):
    # a libtpu cut short: loaded in this process it would kill it (SIGBUS); it is loaded in a process of its own
    from course_utils.advice import tpu

    damaged = tmp_path / "libtpu"
    (damaged / "libtpu").mkdir(parents=True)
    (damaged / "libtpu" / "__init__.py").write_text("import ctypes, os\nctypes.string_at(0)\n")  # dies by a signal
    monkeypatch.setattr(tpu, "FOLDER", damaged)
    tpu.loads_whole.cache_clear()
    with pytest.raises(tpu.TpuCompilerMissing, match=r"libtpu in .* is damaged: a process that loaded it was killed "
                                                     r"by SIG\w+. Install it again: rm -rf .* && make tpu-targets"):
        tpu.loads_whole("v5e:2x4")
    tpu.loads_whole.cache_clear()
