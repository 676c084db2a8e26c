"""The type each array of a collective was computed in, where XLA CPU widened it: bf16 moved as f32.

XLA's CPU backend computes and moves bf16 values as f32. It widens them with converts of its own, on
either side of a collective: before it (a bf16 value converted up, then gathered), or after it (a product
computed in f32, summed, then converted down to the bf16 the model asked for). An accelerator moves those
arrays in bf16. The model's own casts (`astype`, a norm or softmax computed in f32) are converts too, but
XLA records them as `convert_element_type` operations; those arrays move as the model computes them.

`communication.hlo.collective_ops` gives each collective its `computed_dtypes` from here; the advisor
counts the bytes an accelerator would send with them (`advice.program`).
"""

from __future__ import annotations

import re

NARROW = ("bf16", "f16")
_MOVES = {"bitcast", "copy", "reshape", "transpose", "slice", "dynamic-slice", "broadcast", "concatenate", "pad",
          "copy-start", "copy-done", "dynamic-update-slice"}
_CALLS = re.compile(r"\bcalls=%([\w.\-]+)")
_RESULT_TYPE = re.compile(r"\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*([a-z]+[0-9]*)\[")
_MAX_STEPS = 40


class Widening:
    """A compiled program's instructions, read for the widening converts around its collectives.

    Args:
        producers: Every instruction of the program: name -> (opcode, operand names, line).
        roots: Each computation's ROOT instruction.
        where: Each instruction's computation.
    """

    def __init__(self, producers: dict, roots: dict, where: dict):
        self.producers, self.roots, self.where = producers, roots, where
        self._users: dict[str, list[tuple[str, int]]] | None = None
        self._callers: dict[str, str] = {}
        self._parameters: dict[tuple[str, int], str] | None = None

    def computed_dtypes(self, name: str, line: str, operands: list[str], dtypes: tuple[str, ...]) -> tuple[str, ...]:
        """The type each of a collective's arrays was computed in: bf16 where XLA widened a bf16 value for it
        (a convert of its own on the operand, or narrowing the result; a sum "..._promoted"), else as written."""
        to_apply = re.search(r"to_apply=%([\w.\-]+)", line)
        promoted = bool(to_apply and to_apply.group(1).endswith("_promoted"))
        found = []
        for i, dtype in enumerate(dtypes):
            narrow = None
            if dtype == "f32":
                narrow = "bf16" if promoted else self._widened(operands[i]) if i < len(operands) else None
                narrow = narrow or self._narrowed(self._result(name, i, len(dtypes)))
            found.append(narrow if narrow in NARROW else dtype)
        return tuple(found)

    def _widened(self, name: str, steps: int = _MAX_STEPS) -> str | None:
        """The narrower type `name`'s value had before a convert of XLA's own widened it; None if none did."""
        if steps == 0 or name not in self.producers:
            return None
        opcode, operands, line = self.producers[name]
        if opcode == "convert" and operands and not _model_cast(line):
            return _result_type(self.producers.get(operands[0], ("", [], ""))[2])
        if opcode == "fusion":
            called = _CALLS.search(line)
            return self._widened(self.roots.get(called.group(1), ""), steps - 1) if called else None
        if opcode == "parameter":
            argument = self._argument(name, line)
            return self._widened(argument, steps - 1) if argument else None
        if opcode in _MOVES and operands:
            return self._widened(operands[0], steps - 1)
        return None

    def _narrowed(self, names: list[str]) -> str | None:
        """The narrower type a convert of XLA's own gives the value of `names` (one array) after it, through
        moves and into fusions, nearest first; None if none does."""
        seen, reached = set(names), list(names)
        for name in reached:  # grows as it goes: breadth first
            for user, index in self.users().get(name, []):
                opcode, _, line = self.producers[user]
                if opcode == "convert" and not _model_cast(line) and _result_type(line) in NARROW:
                    return _result_type(line)
                called = _CALLS.search(line) if opcode == "fusion" else None
                follow = self._parameter(called.group(1), index) if called else \
                    user if opcode in _MOVES and index == 0 else None
                if follow and follow not in seen and len(seen) < _MAX_STEPS:
                    seen.add(follow)
                    reached.append(follow)
        return None

    def _result(self, name: str, index: int, arrays: int) -> list[str]:
        """The names that carry array `index` of a collective's result: itself, or the elements taken from its
        tuple."""
        if arrays == 1:
            return [name]
        return [user for user, _ in self.users().get(name, [])
                if self.producers[user][0] == "get-tuple-element"
                and re.search(rf"\bindex={index}\b", self.producers[user][2])]

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """Each instruction -> the instructions that read it, with the operand position they read it at."""
        if self._users is None:
            self._users = {}
            for user, (_, operands, _) in self.producers.items():
                for position, operand in enumerate(operands):
                    self._users.setdefault(operand, []).append((user, position))
        return self._users

    def _argument(self, parameter: str, line: str) -> str | None:
        """What the fusion that calls `parameter`'s computation passes it."""
        if not self._callers:
            self._callers = {called.group(1): name for name, (opcode, _, text) in self.producers.items()
                             if opcode == "fusion" for called in [_CALLS.search(text)] if called}
        caller = self._callers.get(self.where.get(parameter, ""))
        index = re.search(r"parameter\((\d+)\)", line)
        arguments = self.producers[caller][1] if caller else []
        return arguments[int(index.group(1))] if index and int(index.group(1)) < len(arguments) else None

    def _parameter(self, computation: str, index: int) -> str | None:
        """The parameter `index` of a fused computation."""
        if self._parameters is None:
            self._parameters = {}
            for name, (opcode, _, line) in self.producers.items():
                number = re.search(r"parameter\((\d+)\)", line) if opcode == "parameter" else None
                if number:
                    self._parameters[self.where.get(name, ""), int(number.group(1))] = name
        return self._parameters.get((computation, index))


def _model_cast(line: str) -> bool:
    """Whether a convert is the model's own cast (JAX records it as `convert_element_type`), not XLA's."""
    op_name = re.search(r'op_name="([^"]*)"', line)
    return bool(op_name and op_name.group(1).rstrip("/").split("/")[-1] == "convert_element_type")


def _result_type(line: str) -> str | None:
    """The element type an instruction's line writes for its result ("bf16"); None for a tuple."""
    match = _RESULT_TYPE.match(line)
    return match.group(1) if match else None
