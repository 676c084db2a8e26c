"""Collectives in compiled XLA programs, read from the program's records (`instructions`).

`jax.jit(f).lower(...).compile().as_text()` lists every collective the SPMD
partitioner inserted, with the groups of devices it runs over (`device_groups`)
and the operation it was inserted for (`op_names`). This module turns them into
plain data: kind, mesh axes, count and bytes.

Derived in notebook 02, which counts the collectives of a compiled gradient
by hand; `communication_report` uses this version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_utils.communication.device_groups import axes_of, group_size, groups as device_groups
from course_utils.communication.instructions import Array, Instruction, Program, read_program
from course_utils.communication.op_names import Source, parse_op_name
from course_utils.communication.runs import executions
from course_utils.communication.traffic import operand_bytes, ring_sent_bytes
from course_utils.communication.widened import Widening

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class Collective:
    """One kind of collective over some mesh axes, summed over the compiled step."""

    kind: str
    axes: tuple[str, ...]
    count: int
    bytes: int
    source: str  # "compiled" or the reason it is expected


@dataclass(frozen=True)
class CollectiveOp:
    """One collective instruction of a compiled program, with what XLA recorded about it.

    Attributes:
        name: The instruction's name in the program, e.g. "all-gather.30".
        kind: "all-reduce", "all-gather", "reduce-scatter", "all-to-all" or "collective-permute".
        axes: The mesh axes its device groups span.
        bytes: Bytes of its result on each device.
        shapes: The per-device shape of each result.
        sources: The operations it was inserted for (several when XLA combined
            collectives); empty when XLA recorded none.
        operand: The program input its operand comes from, unchanged but for
            copies and layouts: e.g. "state[0][7]" (trainable variable 7) or
            "data[0]['token_ids']"; "" when it is computed.
        parts: What XLA recorded for each array it moves, one tuple of sources
            per array: for a collective XLA combined (a tuple result), read from
            the `get-tuple-element` lines that take it apart; else `(sources,)`.
        operand_sources: What XLA recorded for the instruction that computes its
            (first) operand.
        dtypes: The element type of each result, as XLA writes it ("f32", "bf16", "s32").
        computed_dtypes: The element type each array was computed in: "bf16" where XLA CPU widened a bf16
            value to the f32 of `dtypes` (`widened`), else as `dtypes`.
        computation: The computation of the program it is written in ("main.12", or a fusion's:
            "all-reduce-scatter.1").
        times: How many times it runs in one call of the program: once per call of its computation
            (`executions`); 0 inside a loop, whose trip count the program does not write.
        sliced: Per array, whether the program only keeps a slice of the sum on each device (an all-reduce whose
            result is only sliced: what XLA CPU writes for a reduce-scatter).
    """

    name: str
    kind: str
    axes: tuple[str, ...]
    bytes: int
    shapes: tuple[tuple[int, ...], ...]
    sources: tuple[Source, ...]
    operand: str = ""
    parts: tuple[tuple[Source, ...], ...] = ()
    operand_sources: tuple[Source, ...] = ()
    group_size: int = 1
    dtypes: tuple[str, ...] = ()
    computed_dtypes: tuple[str, ...] = ()
    computation: str = ""
    times: int = 1
    sliced: tuple[bool, ...] = ()

    @property
    def operand_bytes(self) -> int:
        """Bytes of its operands on each device (`operand_bytes`)."""
        return operand_bytes(self.kind, self.bytes, self.group_size)

    @property
    def sent_bytes(self) -> int:
        """Bytes each device sends over the links, with the ring algorithm (`ring_sent_bytes`)."""
        return ring_sent_bytes(self.kind, self.bytes, self.group_size)


_PASS_THROUGH = ("bitcast", "copy", "fusion", "transpose", "reshape", "copy-start", "copy-done")
_MOVES = {"wrapped", "copy", "bitcast", "transpose", "reshape"} | {str(i) for i in range(1000)}


def parse_collectives(hlo: str, axis_names: tuple[str, ...], mesh_shape: tuple[int, ...]) -> list[Collective]:
    """Collectives in compiled HLO text, grouped by kind and mesh axes."""
    return summed(collective_ops(hlo, axis_names, mesh_shape))


def summed(ops: list[CollectiveOp]) -> list[Collective]:
    """Collective instructions summed per kind and mesh axes (count and bytes), in order of first appearance."""
    found: dict[tuple, list[int]] = {}
    for op in ops:
        entry = found.setdefault((op.kind, op.axes), [0, 0])
        entry[0] += 1
        entry[1] += op.bytes
    return [Collective(kind, axes, n, size, "compiled") for (kind, axes), (n, size) in found.items()]


def collective_ops(hlo: str | Program, axis_names: tuple[str, ...], mesh_shape: tuple[int, ...]) -> list[CollectiveOp]:
    """Every collective instruction of a compiled program (its text, or its records), in program order, with its
    sources. A TPU program writes a collective it overlaps with products ("async collective fusion") once in
    each piece of the chain that carries it: it is listed once.

    Example:
        >>> text = jax.jit(f).lower(x).compile().as_text()
        >>> [(c.kind, c.axes, c.sources[0].scope) for c in collective_ops(text, ("data",), (8,))]
    """
    program = read_program(hlo) if isinstance(hlo, str) else hlo
    runs = executions(program)
    widening = Widening(program)
    ops, chained = [], set()
    for instruction in program.instructions():
        kind = instruction.opcode.removesuffix("-start")
        if kind not in COLLECTIVES:
            continue
        if instruction.chain is not None:  # one collective of an asynchronous chain, written in each of its pieces
            if (instruction.channel, instruction.chain) in chained:
                continue
            chained.add((instruction.channel, instruction.chain))
        ops.append(_collective_op(program, instruction, kind, axis_names, mesh_shape, widening, runs))
    return ops


def _collective_op(program: Program, instruction: Instruction, kind: str, axis_names, mesh_shape, widening,
                   runs) -> CollectiveOp:
    arrays = list(instruction.arrays)
    if instruction.opcode.endswith("-start") and instruction.is_tuple:
        arrays = _started_outputs(arrays)
    sources = parse_op_name(instruction.op_name) if instruction.op_name else ()
    pieces = {user.index: _sources_of(user) for user, _ in program.users.get(instruction.name, [])
              if user.opcode == "get-tuple-element"} if instruction.is_tuple else {}
    groups = device_groups(instruction.attributes)
    operand = program.get(instruction.operands[0]) if instruction.operands else None
    dtypes = tuple(a.dtype for a in arrays)
    return CollectiveOp(
        name=instruction.name, kind=kind, axes=axes_of(groups, axis_names, mesh_shape),
        bytes=sum(a.bytes for a in arrays),
        group_size=group_size(kind, groups, axis_names, mesh_shape, instruction.attributes),
        shapes=tuple(a.shape for a in arrays), dtypes=dtypes, sources=sources,
        operand=_program_input(program, instruction.operands),
        parts=tuple(pieces.get(i, ()) for i in range(max(pieces) + 1)) if pieces else (sources,),
        operand_sources=_sources_of(operand) if operand is not None else (),
        computed_dtypes=widening.computed_dtypes(instruction, dtypes),
        computation=instruction.computation, times=runs.get(instruction.computation, 1),
        sliced=tuple(kind == "all-reduce" and _only_sliced(program, names)
                     for names in _arrays_of(program, instruction, len(arrays))))


_SLICES = ("slice", "dynamic-slice")
_FOLLOWED = ("bitcast", "copy", "reshape", "get-tuple-element", "convert")


def _arrays_of(program: Program, instruction: Instruction, arrays: int) -> list[list[str]]:
    """The names that carry each array of an instruction's result: itself, or what takes each element of its
    tuple."""
    if arrays == 1 or not instruction.is_tuple:
        return [[instruction.name]] * arrays
    users = program.users.get(instruction.name, [])
    return [[u.name for u, _ in users if u.opcode == "get-tuple-element" and u.index == i] for i in range(arrays)]


def _only_sliced(program: Program, names: list[str]) -> bool:
    """Whether every use of the values `names` (through moves, into fusions) is a slice of it, and there is one."""
    reached, seen, sliced = list(names), set(names), False
    for name in reached:
        for user, position in program.users.get(name, []):
            called = user.called("calls") if user.opcode == "fusion" else ()
            inner = program.parameter(called[0], position) if called else None
            follow = inner.name if inner is not None else user.name if user.opcode in _FOLLOWED else None
            if user.opcode in _SLICES and position == 0:
                sliced = True
            elif follow is None:
                return False
            elif follow not in seen and len(seen) < 64:
                seen.add(follow)
                reached.append(follow)
    return sliced


def _started_outputs(arrays: list[Array]) -> list[Array]:
    """The arrays an asynchronous collective delivers, from its `-start` instruction's tuple: XLA writes
    (operands, outputs, and for a permute two u32[] contexts); the outputs are the second half."""
    while arrays and (arrays[-1].dtype, arrays[-1].shape) == ("u32", ()):
        arrays = arrays[:-1]
    return arrays[len(arrays) // 2:] if len(arrays) >= 2 else arrays


def _sources_of(instruction: Instruction) -> tuple[Source, ...]:
    """The operations one instruction records (its `op_name`); empty when it records none."""
    return parse_op_name(instruction.op_name) if instruction.op_name else ()


def _program_input(program: Program, operands, depth: int = 8) -> str:
    """The parameter an operand is read from through copies and layout changes ("" if computed)."""
    producer = program.get(operands[0]) if len(operands) == 1 else None
    if producer is None or depth == 0:
        return ""
    if producer.opcode == "parameter":
        return producer.op_name.replace("\\'", "'")
    moves_only = producer.opcode != "fusion" or set(re.split(r"[_.]", producer.name)) <= _MOVES | {"fusion"}
    if producer.opcode in _PASS_THROUGH and moves_only:
        return _program_input(program, producer.operands, depth - 1)
    return ""
