"""How many times each computation of a compiled XLA program runs in one call of it.

A collective written once can run many times: in a loop's body (a TPU's windowed einsums send one
collective-permute per round), or in a computation several instructions call. `executions` follows the
program's call graph from its entry and reads each counted loop's trip count from its counter. It reads the
program's records (`instructions.read_program`); `hlo.collective_ops` gives each collective its `times` from
here, and `flops` multiplies a loop's products by its rounds.
"""

from __future__ import annotations

from course_utils.communication.instructions import Program, read_program

_LOOPED = ("body", "condition")


def executions(hlo: str | Program) -> dict[str, int]:
    """How many times each computation of a compiled program runs in one call of it: the entry once, any
    other as often as the instructions that call it run, a loop's body as often as the loop goes round
    (the `known_trip_count` XLA writes on a loop it analysed, else `_trip_count`, read from its counter). 0 for
    a loop whose count the program does not show, and for what its body calls.

    Example:
        >>> executions(compiled.as_text())["all-reduce-scatter.1"]
        1
    """
    program = read_program(hlo) if isinstance(hlo, str) else hlo
    runs = dict.fromkeys(program.computations, 0)
    runs[program.entry] = 1
    for caller in reversed(list(program.computations)):  # XLA writes a computation before those that call it
        for instruction in program.computations[caller].values():
            trips = 1
            if instruction.opcode == "while":  # the count XLA writes on a loop it analysed, else read from its counter
                known = instruction.known_trips
                trips = known if known is not None else _trip_count(program, instruction)
            for what, names in instruction.calls.items():
                for callee in names:
                    runs[callee] = runs.get(callee, 0) + runs[caller] * (trips if what in _LOOPED else 1)
    return runs


def _trip_count(program: Program, loop) -> int:
    """How many times a `while` goes round, from its counter as XLA writes a counted loop: the condition
    compares one element of the loop's tuple with a constant, the body adds a constant to it, and the loop
    starts it at a constant. 0 when the loop is not written that way."""
    (condition,), (body,) = loop.called("condition") or ("",), loop.called("body") or ("",)
    compare = program.root_of(condition)
    if compare is None or compare.opcode != "compare" or len(compare.operands) != 2 or not compare.direction:
        return 0
    index, limit, flipped = _element(program, compare.operands[0]), _constant(program, compare.operands[1]), False
    if index is None:
        index, limit, flipped = _element(program, compare.operands[1]), _constant(program, compare.operands[0]), True
    start_tuple = program.get(loop.operands[0]) if loop.operands else None
    body_root = program.root_of(body)
    if index is None or limit is None or start_tuple is None or start_tuple.opcode != "tuple" \
            or body_root is None or body_root.opcode != "tuple":
        return 0
    start = _constant(program, start_tuple.operands[index]) if index < len(start_tuple.operands) else None
    add = program.get(body_root.operands[index]) if index < len(body_root.operands) else None
    steps = [_constant(program, n) for n in add.operands if _element(program, n) != index] \
        if add is not None and add.opcode == "add" else []
    step = steps[0] if len(steps) == 1 and len(add.operands) == 2 else None
    if start is None or not step:
        return 0
    way = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(compare.direction, compare.direction) \
        if flipped else compare.direction
    span = {"LT": limit - start, "LE": limit - start + (1 if step > 0 else -1),
            "GT": limit - start, "GE": limit - start + (-1 if step < 0 else 1), "NE": limit - start}.get(way)
    if span is None or (way == "NE" and span % step):
        return 0
    return max(0, -(-span // step))


def _constant(program: Program, name: str) -> int | None:
    """The integer a constant holds, through copies, bitcasts and converts; None for anything else."""
    for _ in range(8):
        instruction = program.get(name)
        if instruction is None:
            return None
        if instruction.opcode == "constant":
            try:
                return int(instruction.constant)
            except (TypeError, ValueError):
                return None
        if instruction.opcode not in ("copy", "bitcast", "convert") or len(instruction.operands) != 1:
            return None
        name = instruction.operands[0]
    return None


def _element(program: Program, name: str) -> int | None:
    """The tuple index a get-tuple-element takes, through copies and bitcasts (XLA CPU copies a loop's counter
    before it adds to it); None for anything else."""
    for _ in range(8):
        instruction = program.get(name)
        if instruction is None:
            return None
        if instruction.opcode == "get-tuple-element":
            return instruction.index
        if instruction.opcode not in ("copy", "bitcast") or len(instruction.operands) != 1:
            return None
        name = instruction.operands[0]
    return None
