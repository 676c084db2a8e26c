"""The compiled program read once, into records: the same collectives as the line reader it replaced, on real
programs, and every element type's size."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from course_utils.communication.hlo import collective_ops
from course_utils.communication.instructions import (ELEMENT_BITS, Array, UnknownElementType, read_instruction,
                                                     read_program)
from course_utils.communication.runs import executions

DATA = Path(__file__).resolve().parents[1] / "data" / "hlo"
# Real programs (compiled at 2bdebd5, shape-only) and what the line reader of that commit read in them: an MLP
# block under FSDP on 8 devices, XLA's CPU program and a TPU v5p's (windowed loops), and lesson 10's tiny Llama
# under its official map on (2, 4), XLA's CPU program and a TPU v5e's (asynchronous collective chains).
PROGRAMS = ("mlp_fsdp_cpu", "mlp_fsdp_tpu", "tiny_llama_cpu", "tiny_llama_tpu")


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_records_give_the_collectives_and_runs_the_line_reader_gave(name):
    text = gzip.open(DATA / f"{name}.hlo.gz", "rt").read()
    expected = json.load(gzip.open(DATA / f"{name}.expected.json.gz", "rt"))
    program = read_program(text)
    ops = collective_ops(program, tuple(expected["axes"]), tuple(expected["shape"]))
    read = json.loads(json.dumps([dataclasses.asdict(o) for o in ops], default=str))
    assert [{k: v for k, v in op.items() if k != "sliced"} for op in read] == expected["ops"]  # sliced: new
    runs, before = executions(program), expected["executions"]
    assert runs == executions(text) and runs.keys() == before.keys()
    # the same, but for loops the line reader could not count (0): now read from the count XLA writes on a loop
    # it analysed, or from the counter through XLA CPU's copies (the tiny Llama's embedding gradient: 256 rounds)
    assert {c: (before[c], n) for c, n in runs.items() if n != before[c]} == {
        c: (0, n) for c, n in runs.items() if n != before[c] and before[c] == 0}
    assert len(ops) > 2
    if name == "mlp_fsdp_tpu":  # its gradients' reduce-scatters are windowed: permutes in loops that go round
        assert max(o.times for o in ops if o.kind == "collective-permute") > 1


def test_every_element_type_has_its_size_and_an_unknown_one_is_named():
    assert Array("f8e4m3fn", (8, 4)).bytes == 32 and Array("s4", (4,)).bytes == 2 and Array("c64", (2,)).bytes == 16
    assert Array("f4e2m1fn", (3,)).bytes == 2 and Array("pred", ()).bytes == 1 and ELEMENT_BITS["bf16"] == 16
    line = "  %all-gather.1 = f8e4m3fn[8,4]{1,0} all-gather(%p), channel_id=1, replica_groups={{0,1}}, dimensions={0}"
    instruction = read_instruction(line, "main")
    assert (instruction.opcode, instruction.arrays, instruction.bytes) == ("all-gather", (Array("f8e4m3fn", (8, 4)),), 32)
    with pytest.raises(UnknownElementType, match=r"'f9e9'.*Add its size to ELEMENT_BITS"):
        read_instruction("  %x = f9e9[4]{0} parameter(0)")


def test_a_line_is_read_whole_nested_tuples_quoted_parentheses_and_all():
    line = ('  ROOT %t.3 = (f32[4]{0}, (bf16[2,3]{1,0}, /*index=2*/s32[])) fusion(f32[4]{0} %a, %b.1), kind=kLoop, '
            'calls=%fused.7, metadata={op_name="jit(step)/transpose(jvp(m))/d1/dot_general" source_file="x(y).py"}')
    i = read_instruction(line, "main")
    assert (i.name, i.opcode, i.root, i.is_tuple, i.operands) == ("t.3", "fusion", True, True, ("a", "b.1"))
    assert [a.dtype for a in i.arrays] == ["f32", "bf16", "s32"] and i.called("calls") == ("fused.7",)
    assert i.op_name == "jit(step)/transpose(jvp(m))/d1/dot_general"
    dot = read_instruction("  %d = f32[8,16]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, "
                           "rhs_contracting_dims={0}")
    assert dot.contracting == (1,) and dot.batch_dims == ()
    assert read_instruction("}") is None and read_instruction("ENTRY %main (a: f32[4]) -> f32[4] {") is None


def test_a_loops_products_count_once_per_round_its_counter_states():
    from course_utils.communication.flops import loop_flops, product_flops

    # the TPU program of an FSDP MLP block (width 512, hidden 2048, 1024 rows a device): its gradients' windowed
    # einsums are convolutions inside loops that go round twice; the step does 6 x 1024 x 2 x 512 x 2048 FLOPs
    program = read_program(gzip.open(DATA / "mlp_fsdp_tpu.hlo.gz", "rt").read())
    once = sum(product_flops(program, i) for i in program.instructions())
    counted = loop_flops(program, once)
    assert once < 6 * 1024 * 2 * 512 * 2048 == counted.flops and counted.undercounted == ()


def test_a_keras_lstm_over_64_steps_is_counted_whole():
    import keras
    from keras import distribution

    from course_utils.advice.program import flops_of
    from course_utils.communication.train_step import compile_train_step, training_batch
    from course_utils.xla_settings import READING_COMPILE

    model = keras.Sequential([keras.Input((64, 32)), keras.layers.LSTM(128), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    compiled = compile_train_step(model, distribution.DataParallel(), training_batch(model, (16, 64, 32)),
                                  options=READING_COMPILE, donate=True)
    flops = flops_of(compiled)
    rows = 16 // 8  # a device's share of the batch
    products = 3 * 2 * rows * (64 * (32 + 128) * 4 * 128 + 128 * 10)  # forward and backward, each step's gates
    assert flops.counted < 0.05 * products < 0.95 * products < flops.flops < 1.05 * products


SUMS = """HloModule step

ENTRY %main (a: f32[512,256], b: f32[256,512], i: s32[]) -> (f32[512,256], f32[32,512]) {
  %a = f32[512,256]{1,0} parameter(0)
  %b = f32[256,512]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %zero = s32[] constant(0)
  %activation = f32[512,256]{1,0} all-reduce(%a), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %used = f32[512,256]{1,0} add(%activation, %activation)
  %gradient = f32[256,512]{1,0} all-reduce(%b), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %narrow = bf16[256,512]{1,0} convert(%gradient)
  %wide = f32[256,512]{1,0} convert(%narrow)
  %shard = f32[32,512]{1,0} dynamic-slice(%wide, %i, %zero), dynamic_slice_sizes={32,512}
  ROOT %r = (f32[512,256]{1,0}, f32[32,512]{1,0}) tuple(%used, %shard)
}
"""


def test_a_sum_counts_as_a_reduce_scatter_when_the_program_keeps_only_a_slice_of_it_whatever_its_shape():
    from course_utils.advice.program import _transfer

    ops = {op.name: op for op in collective_ops(SUMS, ("batch",), (8,))}
    # an activation summed and used whole, though a kernel of the model may have its shape: an all-reduce
    assert ops["activation"].sliced == (False,) and _transfer(ops["activation"]).kind == "all-reduce"
    # a gradient summed and then only sliced (through XLA CPU's converts): the reduce-scatter it stands for
    assert ops["gradient"].sliced == (True,) and _transfer(ops["gradient"]).kind == "reduce-scatter"
