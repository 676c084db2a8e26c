"""The type each array of a collective was computed in, where XLA CPU widened it: bf16 moved as f32.

XLA's CPU backend computes and moves bf16 values as f32. It widens them with converts of its own, on
either side of a collective: before it (a bf16 value converted up, then gathered), or after it (a product
computed in f32, summed, then converted down to the bf16 the model asked for). An accelerator moves those
arrays in bf16. The model's own casts (`astype`, a norm or softmax computed in f32) are converts too, but
XLA records them as `convert_element_type` operations; those arrays move as the model computes them.

It reads the program's records (`instructions.read_program`). `communication.hlo.collective_ops` gives each
collective its `computed_dtypes` from here; the advisor counts the bytes an accelerator would send with them
(`advice.program`).
"""

from __future__ import annotations

from course_utils.communication.instructions import Instruction, Program

NARROW = ("bf16", "f16")
_MOVES = {"bitcast", "copy", "reshape", "transpose", "slice", "dynamic-slice", "broadcast", "concatenate", "pad",
          "copy-start", "copy-done", "dynamic-update-slice"}
_MAX_STEPS = 40


class Widening:
    """A compiled program's records, read for the widening converts around its collectives."""

    def __init__(self, program: Program):
        self.program = program

    def computed_dtypes(self, collective: Instruction, dtypes: tuple[str, ...]) -> tuple[str, ...]:
        """The type each of a collective's arrays (`dtypes`) was computed in: bf16 where XLA widened a bf16 value
        for it (a convert of its own on the operand, or narrowing the result; a sum "..._promoted"), else as
        written."""
        promoted = any(c.endswith("_promoted") for c in collective.called("to_apply"))
        found = []
        for i, dtype in enumerate(dtypes):
            narrow = None
            if dtype == "f32":
                operands = collective.operands
                narrow = "bf16" if promoted else self._widened(operands[i]) if i < len(operands) else None
                narrow = narrow or self._narrowed(self._result(collective, i, len(dtypes)))
            found.append(narrow if narrow in NARROW else dtype)
        return tuple(found)

    def _widened(self, name: str, steps: int = _MAX_STEPS) -> str | None:
        """The narrower type `name`'s value had before a convert of XLA's own widened it; None if none did."""
        instruction = self.program.get(name)
        if steps == 0 or instruction is None:
            return None
        if instruction.opcode == "convert" and instruction.operands and not _model_cast(instruction):
            before = self.program.get(instruction.operands[0])
            return before.dtype if before is not None else None
        if instruction.opcode == "fusion":
            called = instruction.called("calls")
            root = self.program.roots.get(called[0], "") if called else ""
            return self._widened(root, steps - 1) if root else None
        if instruction.opcode == "parameter":
            argument = self._argument(instruction)
            return self._widened(argument, steps - 1) if argument else None
        if instruction.opcode in _MOVES and instruction.operands:
            return self._widened(instruction.operands[0], steps - 1)
        return None

    def _narrowed(self, names: list[str]) -> str | None:
        """The narrower type a convert of XLA's own gives the value of `names` (one array) after it, through
        moves and into fusions, nearest first; None if none does."""
        seen, reached = set(names), list(names)
        for name in reached:  # grows as it goes: breadth first
            for user, index in self.program.users.get(name, []):
                if user.opcode == "convert" and not _model_cast(user) and user.dtype in NARROW:
                    return user.dtype
                called = user.called("calls") if user.opcode == "fusion" else ()
                inner = self.program.parameter(called[0], index) if called else None
                follow = inner.name if inner is not None else \
                    user.name if user.opcode in _MOVES and index == 0 else None
                if follow and follow not in seen and len(seen) < _MAX_STEPS:
                    seen.add(follow)
                    reached.append(follow)
        return None

    def _result(self, collective: Instruction, index: int, arrays: int) -> list[str]:
        """The names that carry array `index` of a collective's result: itself, or the elements taken from its
        tuple."""
        if arrays == 1:
            return [collective.name]
        return [user.name for user, _ in self.program.users.get(collective.name, [])
                if user.opcode == "get-tuple-element" and user.index == index]

    def _argument(self, parameter: Instruction) -> str | None:
        """What the fusion that calls `parameter`'s computation passes it."""
        caller = self.program.callers.get(parameter.computation)
        arguments = caller.operands if caller is not None else ()
        number = parameter.parameter
        return arguments[number] if number is not None and number < len(arguments) else None


def _model_cast(instruction: Instruction) -> bool:
    """Whether a convert is the model's own cast (JAX records it as `convert_element_type`), not XLA's."""
    return instruction.op_name.rstrip("/").split("/")[-1] == "convert_element_type" if instruction.op_name else False
