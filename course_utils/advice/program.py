"""One compiled training step, read for the advisor: memory, FLOPs and collectives per device, as an
accelerator would run them.

The step is Keras's own, compiled by XLA as `fit` lays it out (`communication.train_step.compile_train_step`,
the state donated), for a real or a shape-only model; nothing is allocated. It is compiled with XLA's
backend optimisations off (`xla_settings.READING_COMPILE`), four times faster: they change neither the
collectives, nor the FLOPs, nor the buffers `memory_analysis()` counts (tests/advice checks the three). From
the one compiled program come XLA's `memory_analysis()` (`memory.compiled.StepMemory`), its
`cost_analysis()` FLOPs (per device) and its collectives (`communication.hlo.collective_ops`).

The program is XLA's CPU program. Two of its differences from a GPU's or a TPU's are corrected here, each
array at a time, and counted in `Transfer.corrected`:
- XLA CPU moves (and computes) bf16 values as f32, widening them with converts of its own: each array moves
  in the type the program computed it in (`CollectiveOp.computed_dtypes`): bf16 where XLA widened a bf16
  value, f32 where the model computes in f32 (a softmax, a norm) or casts to it.
- XLA CPU sums a gradient that each device keeps only a shard of (a weight split over the axis it is summed
  over: FSDP) with an all-reduce and a slice; an accelerator's XLA writes a reduce-scatter, which sends half
  as much: (n-1)/n of the bytes, not 2(n-1)/n.
What stays the CPU's: which collectives the partitioner chose, and the FLOPs (`cost_analysis` counts a loop's
body once; each loop's products are counted again for every further round its counter states, and a loop whose
count the program does not write is named in `StepProgram.undercounted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from course_utils.communication.flops import LoopFlops, loop_flops, product_flops
from course_utils.communication.hlo import collective_ops
from course_utils.communication.instructions import Array, read_program
from course_utils.communication.traffic import ring_sent_bytes
from course_utils.communication.train_step import compile_train_step, training_batch
from course_utils.layouts.hybrid import REPLICA_AXIS
from course_utils.memory.compiled import StepMemory, extended_memory, memory_of
from course_utils.xla_settings import READING_COMPILE, keyed_without_names

PASSES = ("forward", "backward", "other")
FSDP_AXIS = "batch"  # the axis the advisor's meshes split the batch and FSDP's weights over
DATA_AXES = (REPLICA_AXIS, FSDP_AXIS)  # the axes the batch is split over, so gradients summed over (HSDP adds replica)


@dataclass(frozen=True)
class FsdpRun:
    """How a run sends what FSDP sends, where XLA's CPU program writes it otherwise.

    Attributes:
        regather: ZeRO-3 as PyTorch's FSDP runs it by default (reshard after forward): every weight gathered in
            the forward pass is gathered again in the backward pass (the CPU program keeps it from the forward pass,
            ZeRO-2's way, at the memory of every gathered weight).
        reduce_bytes: The bytes of each element of a gradient summed over the batch axis: 4 (float32, as FSDP2
            and torchtitan reduce), 2 (bfloat16), or 0 (the type the program computed it in).
    """

    regather: bool = True
    reduce_bytes: int = 4


@dataclass(frozen=True)
class Transfer:
    """The collectives of one kind over one set of mesh axes in one pass, as an accelerator would send them.

    Attributes:
        kind: "all-reduce", "all-gather", "reduce-scatter", "all-to-all" or "collective-permute" (a CPU
            all-reduce whose arrays each device keeps a shard of counts as the reduce-scatter it stands for).
        axes: The mesh axes its device groups span.
        pass_: "forward", "backward" or "other" (the optimizer's update, or no source recorded).
        group_size: Devices in each group.
        count: How many instructions.
        cpu_sent: Bytes one device sends with the ring algorithm, as the CPU program moves them.
        sent: The same, as an accelerator would: each array in the type the program computed it in (bf16
            where XLA CPU widened it), reduce-scatters where the CPU wrote an all-reduce and a slice.
    """

    kind: str
    axes: tuple[str, ...]
    pass_: str
    group_size: int
    count: int
    cpu_sent: int
    sent: int

    @property
    def key(self) -> tuple:
        return self.kind, self.axes, self.pass_, self.group_size


@dataclass(frozen=True)
class StepProgram:
    """What one device does in one compiled training step: its memory, its FLOPs, what it sends.

    Attributes:
        memory: XLA's buffer assignment (`StepMemory`: its `peak` is the bytes a device needs).
        flops: Floating-point operations per device: XLA's `cost_analysis()["flops"]`, each loop's products
            counted as often as the loop goes round (`communication.flops`).
        transfers: The collectives, summed by kind, axes and pass (`Transfer`).
        how: How it was found: "compiled whole", or extended from one and two blocks.
        source: The program it was read from: XLA's CPU program (`read_step`, its bytes corrected) or a TPU's
            own (`tpu.read_tpu_step`).
    """

    memory: StepMemory
    flops: float
    transfers: tuple[Transfer, ...]
    how: str = "compiled whole"
    source: str = "XLA's CPU program"
    undercounted: tuple[str, ...] = ()  # computations whose loop's trip count the program does not write
    recomputed: float = 0.0  # FLOPs per device done again in the backward pass (rematerialised blocks' forward)

    def sent(self, pass_: str | None = None) -> int:
        """Bytes one device sends, as an accelerator would, in one pass or in the whole step."""
        return sum(t.sent for t in self.transfers if pass_ in (None, t.pass_))

    @property
    def corrected(self) -> float:
        """The share of the CPU program's bytes the accelerator would not send (bf16, reduce-scatters)."""
        cpu = sum(t.cpu_sent for t in self.transfers)
        return 1 - self.sent() / cpu if cpu else 0.0


def read_step(model, distribution, batch, *, fsdp: FsdpRun | None = None) -> StepProgram:
    """Compiles one training step of `model` under `distribution` and reads it (shape-only; nothing allocated).

    Args:
        model: A compiled Keras model, real or shape-only (`memory.presets.abstract_model`).
        distribution: The distribution the step runs under.
        batch: `(x, y)` as `jax.ShapeDtypeStruct`s or arrays, or the input's shape.
        fsdp: How a run sends what FSDP sends (`FsdpRun`); None: as the program is written (each weight gathered
            once, gradients summed in the type they were computed in).
    """
    # keyed without its names: a model built again (Keras numbers its unnamed layers anew) finds the program the
    # first one compiled; nothing the advisor reads depends on a layer's number
    with keyed_without_names():
        compiled = compile_train_step(model, distribution, training_batch(model, batch), options=READING_COMPILE,
                                      donate=True)
    memory = memory_of(compiled)
    mesh = distribution.device_mesh
    program = read_program(compiled.as_text())
    ops = collective_ops(program, tuple(mesh.axis_names), tuple(mesh.shape))
    transfers = [_transfer(op, fsdp) for op in ops]
    if fsdp is not None and fsdp.regather:  # ZeRO-3: every weight gathered in the forward pass is gathered again
        transfers += [replace(t, pass_="backward") for t, op in zip(transfers, ops)
                      if op.kind == "all-gather" and t.pass_ == "forward" and _gathers_an_input(program, op.name)]
    flops = flops_of(compiled, program)
    return StepProgram(memory, flops.flops, summed_transfers(transfers), undercounted=flops.undercounted)


def flops_of(compiled, program=None) -> LoopFlops:
    """Floating-point operations per device of a compiled program: XLA's count (`cost_analysis()["flops"]`), each
    loop's products counted as often as it goes round (`communication.flops.loop_flops`)."""
    program = program or read_program(compiled.as_text())
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    if cost is None:  # XLA's GPU compiler has no cost analysis: the program's products, counted from its records
        return loop_flops(program, float(sum(product_flops(program, i) for i in program.instructions())))
    return loop_flops(program, float(cost.get("flops", 0.0)))


def extended(one: StepProgram, two: StepProgram, depth: int) -> StepProgram:
    """A model of `depth` alike blocks, from its programs with one block and with two: what the second
    block added, counted once for every further block (memory, FLOPs and every transfer)."""
    def grow(a, b):
        return max(0, a + (depth - 1) * (b - a))

    memory = extended_memory(one.memory, two.memory, depth,
                             how=f"compiled with 1 and 2 of its {depth} blocks, each further block counted as the second")
    first = {t.key: t for t in one.transfers}
    second = {t.key: t for t in two.transfers}
    transfers = []
    for key in dict.fromkeys([*first, *second]):
        a = first.get(key, replace(second.get(key), count=0, cpu_sent=0, sent=0))
        b = second.get(key, replace(a, count=0, cpu_sent=0, sent=0))
        transfers.append(replace(a, count=grow(a.count, b.count), cpu_sent=grow(a.cpu_sent, b.cpu_sent),
                                 sent=grow(a.sent, b.sent)))
    return StepProgram(memory, grow(one.flops, two.flops), tuple(t for t in transfers if t.count), how=memory.how,
                       source=one.source, undercounted=tuple(dict.fromkeys(one.undercounted + two.undercounted)))


def pass_of(op) -> str:
    """The pass a collective instruction belongs to, from what XLA recorded of its source."""
    return "backward" if any(s.backward for s in op.sources) else "forward" if op.sources else "other"


def _transfer(op, fsdp: FsdpRun | None = None) -> Transfer:
    pass_ = pass_of(op)
    n = op.group_size
    cpu = sent = 0
    scattered = False
    gradient = fsdp is not None and fsdp.reduce_bytes and op.kind in ("all-reduce", "reduce-scatter") and \
        pass_ != "forward" and any(a in DATA_AXES for a in op.axes)
    for i, (dtype, computed, shape) in enumerate(zip(op.dtypes, op.computed_dtypes or op.dtypes, op.shapes)):
        # a sum each device keeps only a slice of (a gradient of a weight split over the axis it is summed over):
        # what the program does with the result says so, not the shape
        scatter = bool(op.sliced) and op.sliced[i]
        cpu += ring_sent_bytes(op.kind, Array(dtype, shape).bytes, n)
        moved = Array(computed, shape).bytes if not gradient or not dtype.startswith("f") else \
            math.prod(shape) * fsdp.reduce_bytes
        sent += round(moved * (n - 1) / n) if scatter else ring_sent_bytes(op.kind, moved, n)
        scattered |= scatter
    kind = "reduce-scatter" if scattered else op.kind
    return Transfer(kind, op.axes, pass_, n, 1, cpu, sent)


def _gathers_an_input(program, name: str, depth: int = 8) -> bool:
    """Whether an all-gather's operand is one of the step's inputs (a weight's shard, FSDP's gather), read through
    the casts and copies between (XLA CPU converts a weight to bf16 before it gathers it)."""
    instruction = program.get(name)
    for _ in range(depth):
        operands = instruction.operands if instruction is not None else ()
        instruction = program.get(operands[0]) if len(operands) == 1 or (
            instruction is not None and instruction.opcode == "all-gather" and operands) else None
        if instruction is None or instruction.opcode == "parameter":
            return instruction is not None
        if instruction.opcode not in ("convert", "bitcast", "copy", "reshape", "transpose", "fusion"):
            return False
    return False


def summed_transfers(transfers: list[Transfer]) -> tuple[Transfer, ...]:
    found: dict[tuple, Transfer] = {}
    for t in transfers:
        had = found.get(t.key)
        found[t.key] = t if had is None else replace(had, count=had.count + t.count, cpu_sent=had.cpu_sent + t.cpu_sent,
                                                     sent=had.sent + t.sent)
    return tuple(found.values())
