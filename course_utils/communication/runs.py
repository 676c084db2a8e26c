"""How many times each computation of a compiled XLA program runs in one call of it, read from its text.

A collective written once can run many times: in a loop's body (a TPU's windowed einsums send one
collective-permute per round), or in a computation several instructions call. `executions` follows the
program's call graph from its entry and reads each counted loop's trip count from its counter.
`communication.hlo.collective_ops` gives each collective its `times` from here.
"""

from __future__ import annotations

import re

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(?:\(.*?\)|\S+)\s+([\w\-]+)\(([^)]*)\)")
COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_KNOWN_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_CALLS = re.compile(r"\b(calls|to_apply|body|condition|branch_computations|called_computations)="
                    r"(\{[^}]*\}|%[\w.\-]+)")


def executions(hlo: str) -> dict[str, int]:
    """How many times each computation of a compiled program runs in one call of it: the entry once, any
    other as often as the instructions that call it run, a loop's body as often as the loop goes round
    (the `known_trip_count` XLA writes on a loop it analysed, else `_trip_count`, read from its counter).
    0 for a loop whose count the program does not show, and for what its body calls.

    Example:
        >>> executions(compiled.as_text())["all-reduce-scatter.1"]
        1
    """
    return runs_of(*read_computations(hlo.splitlines()))


def read_computations(lines: list[str]):
    """The program's computations in written order, each one's instructions (name -> opcode, operands, line;
    those of lines outside any computation under ""), each one's ROOT, and the entry's name: one reading for
    `executions` and `collective_ops`."""
    order, instructions, roots, current, entry = [], {}, {}, "", ""
    for line in lines:
        header = COMPUTATION.match(line)
        if header:
            current = header.group(1)
            order.append(current)
            instructions[current] = {}
            entry = current if line.startswith("ENTRY") else entry
            continue
        instruction = INSTRUCTION.match(line)
        if instruction:  # an instruction outside any computation (a piece of a program) is kept under ""
            name = instruction.group(1)
            operands = re.findall(r"%([\w.\-]+)", instruction.group(3))
            instructions.setdefault(current, {})[name] = (instruction.group(2), operands, line)
            if line.lstrip().startswith("ROOT"):
                roots[current] = name
    return order, instructions, roots, entry


def runs_of(order, instructions, roots, entry) -> dict[str, int]:
    """`executions` of a program already read (`read_computations`)."""
    runs = dict.fromkeys(order, 0)
    runs[entry] = 1
    for caller in reversed(order):  # XLA writes a computation before those that call it
        for opcode, operands, line in instructions[caller].values():
            called = {what: re.findall(r"%([\w.\-]+)", names) for what, names in _CALLS.findall(line)}
            trips = 1
            if opcode == "while":
                known = _KNOWN_TRIPS.search(line)  # XLA CPU writes the count of a loop it analysed
                trips = int(known.group(1)) if known else \
                    _trip_count(instructions, roots, caller, operands, called["condition"][0], called["body"][0])
            for what, names in called.items():
                for callee in names:
                    runs[callee] = runs.get(callee, 0) + runs[caller] * (trips if what in ("body", "condition") else 1)
    return runs


def _trip_count(instructions, roots, caller: str, operands: list[str], condition: str, body: str) -> int:
    """How many times a `while` goes round, from its counter as XLA writes a counted loop: the condition
    compares one element of the loop's tuple with a constant, the body adds a constant to it, and the loop
    starts it at a constant. 0 when the loop is not written that way."""
    def constant(computation: str, name: str):
        for _ in range(8):  # through copies and bitcasts
            opcode, inner, line = instructions[computation].get(name, ("", [], ""))
            if opcode == "constant":
                value = re.search(r"constant\((-?\d+)\)", line)
                return int(value.group(1)) if value else None
            if opcode not in ("copy", "bitcast", "convert") or len(inner) != 1:
                return None
            name = inner[0]
        return None

    def element(computation: str, name: str):
        opcode, inner, line = instructions[computation].get(name, ("", [], ""))
        index = re.search(r"index=(\d+)", line)
        return int(index.group(1)) if opcode == "get-tuple-element" and index else None

    opcode, compared, line = instructions[condition].get(roots.get(condition, ""), ("", [], ""))
    direction = re.search(r"direction=(\w+)", line)
    if opcode != "compare" or len(compared) != 2 or not direction:
        return 0
    index, limit, flipped = element(condition, compared[0]), constant(condition, compared[1]), False
    if index is None:
        index, limit, flipped = element(condition, compared[1]), constant(condition, compared[0]), True
    start_tuple = instructions[caller].get(operands[0] if operands else "", ("", [], ""))
    body_root = instructions[body].get(roots.get(body, ""), ("", [], ""))
    if index is None or limit is None or start_tuple[0] != "tuple" or body_root[0] != "tuple":
        return 0
    start = constant(caller, start_tuple[1][index]) if index < len(start_tuple[1]) else None
    add = instructions[body].get(body_root[1][index] if index < len(body_root[1]) else "", ("", [], ""))
    steps = [constant(body, n) for n in add[1] if element(body, n) != index] if add[0] == "add" else []
    step = steps[0] if len(steps) == 1 and len(add[1]) == 2 else None
    if start is None or not step:
        return 0
    way = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction.group(1), direction.group(1)) \
        if flipped else direction.group(1)
    span = {"LT": limit - start, "LE": limit - start + (1 if step > 0 else -1),
            "GT": limit - start, "GE": limit - start + (-1 if step < 0 else 1), "NE": limit - start}.get(way)
    if span is None or (way == "NE" and span % step):
        return 0
    return max(0, -(-span // step))
