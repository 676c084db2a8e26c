"""A compiled XLA program read once, into records: every instruction of every computation.

`read_program(compiled.as_text())` gives a `Program`: its computations in written order, each a dict of
`Instruction`s (name, opcode, result arrays, operands, and the attributes the course reads: device groups,
channel and chain, `op_name`, the computations it calls, its tuple index, parameter number, constant, compare
direction, a loop's known trip count, a dot's contracting dimensions), each computation's ROOT, and the entry. Every reader of a program
reads these records (`hlo.collective_ops`, `runs.executions`, `widened.Widening`, `flops.dot_flops`); none
searches the program's text again.

Every element type XLA writes has its size (`ELEMENT_BITS`: f8 types one byte, s4/u4 half of one); a type it
does not know stops the reading with its name (`UnknownElementType`), never a guess.

Example:
    >>> program = read_program(jax.jit(f).lower(x).compile().as_text())
    >>> [i.name for i in program.instructions() if i.opcode == "all-reduce"]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

# bits of one element of each type XLA writes (xla/xla_data.proto's PrimitiveType, as HLO text spells it)
ELEMENT_BITS = {
    "pred": 8, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16,
    "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f4e2m1fn": 4, "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e4m3b11fnuz": 8, "f8e5m2": 8,
    "f8e5m2fnuz": 8, "f8e8m0fnu": 8, "token": 0,
}
_HEADER = re.compile(r"^(ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_NAME = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=\s*")
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CALLS = re.compile(r"\b(calls|to_apply|body|condition|branch_computations|called_computations)="
                    r"(\{[^}]*\}|%[\w.\-]+)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")
_CHAIN = re.compile(r"\bchain_id=\"(\d+)\"")
_INDEX = re.compile(r"\bindex=(\d+)")
_DIRECTION = re.compile(r"\bdirection=(\w+)")
_CONTRACTING = re.compile(r"\blhs_contracting_dims=\{([0-9,]*)\}")
_BATCH = re.compile(r"\blhs_batch_dims=\{([0-9,]*)\}")
_KNOWN_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


class UnknownElementType(ValueError):
    """A program writes an element type this reader has no size for."""


@dataclass(frozen=True)
class Array:
    """One array an instruction produces: its element type as XLA writes it ("bf16") and its shape."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        """Bytes it takes, whole bytes (four s4 elements: 2)."""
        return -(-element_bits(self.dtype) * self.size // 8)


def element_bits(dtype: str) -> int:
    """Bits of one element of `dtype` as XLA writes it; an unknown type is an error naming it."""
    try:
        return ELEMENT_BITS[dtype]
    except KeyError:
        raise UnknownElementType(f"The program holds an element type this reader does not know: {dtype!r}. Known: "
                                 f"{', '.join(sorted(ELEMENT_BITS))}. Add its size to ELEMENT_BITS in "
                                 f"course_utils/communication/instructions.py.") from None


@dataclass(frozen=True)
class Instruction:
    """One instruction of a compiled program, as its line writes it.

    Attributes:
        name: Its name ("all-reduce.3"), without the `%`.
        opcode: "all-reduce", "fusion", "dot", "parameter"...
        arrays: The arrays it produces (each element of a tuple result, in order).
        is_tuple: Whether its result is a tuple.
        operands: The instructions it reads, by name, in order.
        computation: The computation it is written in.
        root: Whether it is its computation's ROOT.
        op_name: The JAX operation XLA recorded for it (`metadata={op_name=...}`), "" when none.
        calls: The computations it calls, per attribute: {"calls": ("fused.1",), "to_apply": ("add",)...}.
        index: A get-tuple-element's index (None otherwise).
        parameter: A parameter's number (None otherwise).
        constant: A constant's literal as written ("0", "{1, 2}"), None otherwise.
        direction: A compare's direction ("LT"), None otherwise.
        channel: Its channel id, None when it has none.
        chain: The chain id of an asynchronous collective fusion (a TPU's), None when none.
        known_trips: The trip count XLA writes on a loop it analysed (`backend_config`), None otherwise.
        contracting: A dot's contracting dimensions of its first operand (empty otherwise).
        batch_dims: A dot's batch dimensions of its first operand (empty otherwise).
        attributes: What the line writes after the operands (for what no field above reads).
    """

    name: str
    opcode: str
    arrays: tuple[Array, ...]
    is_tuple: bool
    operands: tuple[str, ...]
    computation: str
    root: bool = False
    op_name: str = ""
    calls: dict = field(default_factory=dict, compare=False, hash=False)
    index: int | None = None
    parameter: int | None = None
    constant: str | None = None
    direction: str | None = None
    channel: int | None = None
    chain: str | None = None
    known_trips: int | None = None
    contracting: tuple[int, ...] = ()
    batch_dims: tuple[int, ...] = ()
    attributes: str = ""

    @property
    def dtype(self) -> str | None:
        """The element type of a single-array result; None for a tuple."""
        return None if self.is_tuple or len(self.arrays) != 1 else self.arrays[0].dtype

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.arrays)

    def called(self, *attributes: str) -> tuple[str, ...]:
        """The computations it calls through `attributes` (all of them when none is named)."""
        return tuple(c for a, names in self.calls.items() if not attributes or a in attributes for c in names)


@dataclass(frozen=True)
class Program:
    """A compiled program's computations, in the order written, each one's instructions by name.

    Attributes:
        computations: {computation: {instruction name: Instruction}}; instructions written outside any
            computation (a piece of a program) are kept under "".
        roots: Each computation's ROOT instruction.
        entry: The entry computation's name.
    """

    computations: dict[str, dict[str, Instruction]]
    roots: dict[str, str]
    entry: str

    def instructions(self):
        """Every instruction, in program order."""
        for instructions in self.computations.values():
            yield from instructions.values()

    @cached_property
    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions()}

    def get(self, name: str) -> Instruction | None:
        return self.by_name.get(name)

    def root_of(self, computation: str) -> Instruction | None:
        return self.computations.get(computation, {}).get(self.roots.get(computation, ""))

    @cached_property
    def users(self) -> dict[str, list[tuple[Instruction, int]]]:
        """Each instruction's name -> the instructions that read it, with the operand position they read it at."""
        found: dict[str, list[tuple[Instruction, int]]] = {}
        for user in self.instructions():
            for position, operand in enumerate(user.operands):
                found.setdefault(operand, []).append((user, position))
        return found

    @cached_property
    def callers(self) -> dict[str, Instruction]:
        """Each fused computation -> the fusion instruction that calls it."""
        return {c: i for i in self.instructions() if i.opcode == "fusion" for c in i.called("calls")}

    def parameter(self, computation: str, number: int) -> Instruction | None:
        """Parameter `number` of `computation`."""
        return next((i for i in self.computations.get(computation, {}).values() if i.parameter == number), None)


def read_program(text: str) -> Program:
    """Every instruction of a compiled program's text (`compiled.as_text()`), as records."""
    computations: dict[str, dict[str, Instruction]] = {}
    roots, current, entry = {}, "", ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(2)
            computations[current] = {}
            entry = current if header.group(1) else entry
            continue
        instruction = read_instruction(line, current)
        if instruction is not None:
            computations.setdefault(current, {})[instruction.name] = instruction
            if instruction.root:
                roots[current] = instruction.name
    return Program(computations, roots, entry)


def read_instruction(line: str, computation: str = "") -> Instruction | None:
    """One instruction from its line; None for a line that writes none (a header, a brace, a comment)."""
    named = _NAME.match(line)
    if not named:
        return None
    rest = line[named.end():]
    result, rest = _leading_type(rest)
    opcode = _OPCODE.match(rest)
    if not opcode:
        return None
    inside, attributes = _parenthesised(rest[opcode.end() - 1:])
    arrays = tuple(Array(t, tuple(int(d) for d in dims.split(",") if d)) for t, dims in _ARRAY.findall(result))
    for array in arrays:
        element_bits(array.dtype)
    op = opcode.group(1)
    found = {name: _int(pattern, attributes) for name, pattern in (("index", _INDEX), ("channel", _CHANNEL))}
    op_name = _OP_NAME.search(attributes)
    chain, direction = _CHAIN.search(attributes), _DIRECTION.search(attributes)
    return Instruction(
        name=named.group(2), opcode=op, arrays=arrays, is_tuple=result.startswith("("),
        operands=tuple(_OPERAND.findall(inside)), computation=computation, root=bool(named.group(1)),
        op_name=op_name.group(1) if op_name else "",
        calls={what: tuple(_OPERAND.findall(names)) for what, names in _CALLS.findall(attributes)},
        index=found["index"] if op == "get-tuple-element" else None,
        parameter=int(inside) if op == "parameter" and inside.strip().isdigit() else None,
        constant=inside.strip() if op == "constant" else None,
        direction=direction.group(1) if direction and op == "compare" else None,
        channel=found["channel"], chain=chain.group(1) if chain else None,
        known_trips=_int(_KNOWN_TRIPS, attributes) if op == "while" else None,
        contracting=_dims(_CONTRACTING, attributes), batch_dims=_dims(_BATCH, attributes), attributes=attributes)


def _leading_type(text: str) -> tuple[str, str]:
    """(the result type written first, what follows it): a tuple's balanced parentheses, or one word."""
    text = text.lstrip()
    if text.startswith("("):
        inside, rest = _parenthesised(text)
        return f"({inside})", rest
    word = re.match(r"\S+", text)
    return (word.group(0), text[word.end():]) if word else ("", text)


def _parenthesised(text: str) -> tuple[str, str]:
    """(what the parentheses opening `text` hold, what follows them), nesting and quoted text respected."""
    depth, quoted = 0, False
    for position, ch in enumerate(text):
        if ch == '"' and (position == 0 or text[position - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return text[1:position], text[position + 1:]
    return text[1:], ""


def _int(pattern: re.Pattern, text: str) -> int | None:
    found = pattern.search(text)
    return int(found.group(1)) if found else None


def _dims(pattern: re.Pattern, text: str) -> tuple[int, ...]:
    found = pattern.search(text)
    return tuple(int(d) for d in found.group(1).split(",") if d) if found else ()
