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

from course_utils.communication.runs import INSTRUCTION, read_computations, runs_of
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

    @property
    def operand_bytes(self) -> int:
        """Bytes of its operands on each device (`operand_bytes`)."""
        return operand_bytes(self.kind, self.bytes, self.group_size)

    @property
    def sent_bytes(self) -> int:
        """Bytes each device sends over the links, with the ring algorithm (`ring_sent_bytes`)."""
        return ring_sent_bytes(self.kind, self.bytes, self.group_size)


_OP = re.compile(r"=\s*(\(.*?\)|[a-z0-9]+\[[0-9,]*\](?:\{[^}]*\})?)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_ARRAY = re.compile(r"([a-z]+[0-9]*)\[([0-9,]*)\]")
# A TPU program overlaps a collective with the products around it by writing it in every piece of an
# "async collective fusion" chain (the start, each continuation, the done), with the same channel and chain.
_CHAIN = re.compile(r"channel_id=(\d+),.*\bchain_id=\"(\d+)\"")
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
          "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}
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


def collective_ops(hlo: str, axis_names: tuple[str, ...], mesh_shape: tuple[int, ...]) -> list[CollectiveOp]:
    """Every collective instruction in compiled HLO text, in program order, with its sources. A TPU program
    writes a collective it overlaps with products ("async collective fusion") once in each piece of the
    chain that carries it: it is listed once.

    Example:
        >>> text = jax.jit(f).lower(x).compile().as_text()
        >>> [(c.kind, c.axes, c.sources[0].scope) for c in collective_ops(text, ("data",), (8,))]
    """
    lines = hlo.splitlines()
    computations = read_computations(lines)
    runs = runs_of(*computations)
    # every instruction of the program: name -> (opcode, operands, line), and the computation it is in
    producers = {name: found for instructions in computations[1].values() for name, found in instructions.items()}
    where = {name: c for c, instructions in computations[1].items() for name in instructions}
    taken_apart = {}
    for opcode, operands, line in producers.values():
        index = re.search(r"index=(\d+)", line)
        if opcode == "get-tuple-element" and index and operands:
            taken_apart.setdefault(operands[0], {})[int(index.group(1))] = _sources(line)
    ops, chained = [], set()
    widening = Widening(producers, computations[2], where)
    for line in lines:
        match = _OP.search(line)
        if not match:
            continue
        chain = _CHAIN.search(line)
        if chain:  # one collective of an asynchronous chain, written again in each of its pieces: counted once
            if chain.groups() in chained:
                continue
            chained.add(chain.groups())
        result, kind = match.groups()
        arrays = [(t, tuple(int(d) for d in dims.split(",") if d)) for t, dims in _ARRAY.findall(result)]
        if f"{kind}-start(" in line and result.startswith("("):
            arrays = _started_outputs(arrays)
        size = sum(DTYPE_BYTES.get(t, 4) * math.prod(dims) for t, dims in arrays)
        instruction = INSTRUCTION.match(line)
        name, operands = (instruction.group(1), re.findall(r"%([\w.\-]+)", instruction.group(3))) \
            if instruction else ("", [])
        sources = _sources(line)
        pieces = taken_apart.get(name, {}) if result.startswith("(") else {}
        groups = _groups(line)
        ops.append(CollectiveOp(
            name=name, kind=kind, axes=_axes_of(groups, axis_names, mesh_shape), bytes=size,
            group_size=_group_size(kind, groups, axis_names, mesh_shape, line),
            shapes=tuple(dims for _, dims in arrays), dtypes=tuple(t for t, _ in arrays), sources=sources,
            operand=_program_input(operands, producers),
            parts=tuple(pieces.get(i, ()) for i in range(max(pieces) + 1)) if pieces else (sources,),
            operand_sources=_sources(producers[operands[0]][2]) if operands and operands[0] in producers else (),
            computed_dtypes=widening.computed_dtypes(name, line, operands, tuple(t for t, _ in arrays)),
            computation=where.get(name, ""), times=runs.get(where.get(name, ""), 1),
        ))
    return ops


def _started_outputs(arrays: list) -> list:
    """The arrays an asynchronous collective delivers, from its `-start` instruction's tuple: XLA writes
    (operands, outputs, and for a permute two u32[] contexts); the outputs are the second half."""
    while arrays and arrays[-1] == ("u32", ()):
        arrays = arrays[:-1]
    return arrays[len(arrays) // 2:] if len(arrays) >= 2 else arrays


def _sources(line: str) -> tuple[Source, ...]:
    """The operations one instruction's line records (its `op_name`); empty when it records none."""
    op_name = _OP_NAME.search(line)
    return parse_op_name(op_name.group(1)) if op_name else ()


def _program_input(operands, producers, depth: int = 8) -> str:
    """The parameter an operand is read from through copies and layout changes ("" if computed)."""
    if len(operands) != 1 or depth == 0 or operands[0] not in producers:
        return ""
    opcode, inner, line = producers[operands[0]]
    if opcode == "parameter":
        op_name = _OP_NAME.search(line)
        return op_name.group(1).replace("\\'", "'") if op_name else ""
    moves_only = opcode != "fusion" or set(re.split(r"[_.]", operands[0])) <= _MOVES | {"fusion"}
    if opcode in _PASS_THROUGH and moves_only:
        return _program_input(inner, producers, depth - 1)
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
