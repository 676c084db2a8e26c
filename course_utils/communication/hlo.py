"""Collectives in compiled XLA programs, read from the program's text.

`jax.jit(f).lower(...).compile().as_text()` lists every collective the SPMD
partitioner inserted, with the groups of devices it runs over. This module
turns those lines into plain data: kind, mesh axes, count and bytes.

Derived in notebook 02, which counts the collectives of a compiled gradient
by hand; `communication_report` uses this version.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from course_utils.communication.instructions import Array, Instruction, Program, read_program
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
class Source:
    """The operation a compiled instruction came from, read from its `metadata={op_name=...}`.

    Attributes:
        scope: The JAX name stack of the operation with transformations
            unwrapped, e.g. "gemma_backbone/decoder_block_0/ffw_gating"
            (Keras layers open one name scope each).
        op: The JAX primitive, e.g. "dot_general" or "reduce_sum".
        backward: True inside the gradient (a `transpose(...)` of the forward pass).
        detail: Name scopes that are not layers, e.g. an einsum's equation "btd,df->btf".
    """

    scope: str
    op: str
    backward: bool
    detail: str = ""


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
    groups = _groups(instruction.attributes)
    operand = program.get(instruction.operands[0]) if instruction.operands else None
    dtypes = tuple(a.dtype for a in arrays)
    return CollectiveOp(
        name=instruction.name, kind=kind, axes=_axes_of(groups, axis_names, mesh_shape),
        bytes=sum(a.bytes for a in arrays),
        group_size=_group_size(kind, groups, axis_names, mesh_shape, instruction.attributes),
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


def parse_op_name(op_name: str) -> tuple[Source, ...]:
    """The operations named by one `op_name`, e.g. "jit(step)/transpose(jvp(m))/d1/dot_general".

    Transformations (`jvp(...)`, `transpose(...)`) are unwrapped, jitted
    function names (`jit(...)`) dropped; a combined name "a/(b/x:c/y)" is
    one source per alternative.
    """
    sources = []
    for parts, backward in _expand(_split(op_name, "/"), False):
        names = [p for p in parts if p]
        if not names:
            continue
        scopes = [n for n in names[:-1] if not _is_detail(n)]
        details = [n for n in names[:-1] if _is_detail(n)]
        sources.append(Source("/".join(scopes), names[-1], backward, " ".join(details)))
    return tuple(sources)


def _expand(parts: list[str], backward: bool):
    """Yields (plain names, backward) for each alternative spelled by `parts`."""
    if not parts:
        yield [], backward
        return
    head, rest = parts[0], parts[1:]
    wrapper = re.fullmatch(r"([\w\-]+)\((.*)\)", head)
    if head.startswith("(") and head.endswith(")"):
        alternatives = [_split(a, "/") for a in _split(head[1:-1], ":")]
    elif wrapper and wrapper.group(1) in ("jit", "pjit"):
        alternatives = [[]]
    elif wrapper:
        alternatives = [_split(wrapper.group(2), "/")]
        backward = backward or wrapper.group(1) == "transpose"
    else:
        alternatives = None
    if alternatives is None:
        for tail, back in _expand(rest, backward):
            yield [head] + tail, back
        return
    for alternative in alternatives:
        for inner, back in _expand(alternative, backward):
            for tail, back2 in _expand(rest, back):
                yield inner + tail, back2


def _split(text: str, sep: str) -> list[str]:
    """Splits `text` at `sep` outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def _is_detail(name: str) -> bool:
    return "->" in name or "," in name


def _axes_of(groups, axis_names, mesh_shape) -> tuple[str, ...]:
    """The mesh axes along which a collective's device groups (`_groups`) vary."""
    if groups is None:
        return ()
    coords = [np.array(np.unravel_index(np.asarray(g), mesh_shape)) for g in groups if len(g) > 1]
    varying = {i for c in coords for i in range(len(mesh_shape)) if len(set(c[i])) > 1}
    return tuple(a for i, a in enumerate(axis_names) if i in varying)


def _group_size(kind: str, groups, axis_names, mesh_shape, line: str) -> int:
    """How many devices take part in each group of a collective: a collective-permute's ring is the devices
    its pairs join (along the axes they vary over); the others' groups are listed."""
    if groups is None:
        return 1
    if kind == "collective-permute" or "source_target_pairs" in line:
        sizes = dict(zip(axis_names, mesh_shape))
        return math.prod(sizes[a] for a in _axes_of(groups, axis_names, mesh_shape)) or 1
    return max(len(g) for g in groups)


def _iota(dims: str, perm: str | None) -> np.ndarray:
    sizes = [int(v) for v in dims.split(",")]
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    return ids.transpose([int(v) for v in perm.split(",")]) if perm else ids


def _groups(line: str):
    """Device groups of a collective, as lists of positions in the mesh's device order.

    XLA writes them in one of three forms: a named mesh with the axes that
    group devices (`mesh['axis_0'=2,'axis_1'=4] {'axis_0'}`, optionally with
    `device_ids=([2,4]T(1,0))`), an iota (`[2,4]<=[8]`), or explicit lists.
    """
    named = re.search(r"replica_groups=mesh\[([^\]]*)\](?:,\s*device_ids=\(\[([0-9,]+)\](?:T\(([0-9,]+)\))?\))?"
                      r"\s*\{([^}]*)\}", line)
    if named:
        sizes = [int(v) for v in re.findall(r"=(\d+)", named.group(1))]
        ids = (_iota(named.group(2), named.group(3)) if named.group(2) else np.arange(math.prod(sizes)))
        ids = ids.reshape(sizes)
        chosen = [int(i) for i in re.findall(r"'axis_(\d+)'", named.group(4))]
        rest = [i for i in range(len(sizes)) if i not in chosen]
        return ids.transpose(rest + chosen).reshape(-1, math.prod(sizes[i] for i in chosen)).tolist()
    iota = re.search(r"replica_groups=\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", line)
    if iota:
        groups = int(iota.group(1).split(",")[0])
        return _iota(iota.group(2), iota.group(3)).reshape(groups, -1).tolist()
    explicit = re.search(r"(?:replica_groups|source_target_pairs)=\{(\{[0-9,{} ]*\})\}", line)
    if explicit:
        return [[int(v) for v in g.split(",") if v] for g in re.findall(r"\{([0-9,]*)\}", explicit.group(1))]
    return None
