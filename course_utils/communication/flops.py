"""FLOPs of a compiled program with each loop counted as often as it goes round.

XLA's `cost_analysis()["flops"]` counts each instruction of the program once, so a product inside a loop
(a scanned layer, a recurrent layer over its steps, a TPU's windowed einsum) is counted once whatever the
loop's trip count: a Keras LSTM over 64 steps shows 1/64 of its products. `step_flops` adds what the
counting missed: every product (`dot`, or a TPU's `convolution`) in a computation that runs n > 1 times (`runs.executions`, read from
the loop's counter) is counted n - 1 more times. Where a loop's trip count is not written in the program, its
products stay counted once and `LoopFlops.undercounted` says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from course_utils.communication.instructions import Instruction, Program, read_program
from course_utils.communication.runs import executions

_DIM_LABELS = re.compile(r"\bdim_labels=[^_\s,]+_([^-\s,]+)->")


@dataclass(frozen=True)
class LoopFlops:
    """What a program's loops add to XLA's count of its FLOPs.

    Attributes:
        counted: XLA's own count (`cost_analysis()["flops"]`), each instruction once.
        added: The products counted again for each further round of their loop.
        undercounted: The computations holding products whose loop's trip count the program does not write.
    """

    counted: float
    added: float
    undercounted: tuple[str, ...] = ()

    @property
    def flops(self) -> float:
        return self.counted + self.added


def product_flops(program: Program, product: Instruction) -> int:
    """2 x the result's elements x what each of them sums over (one multiply and one add each), for a `dot` (its
    contracting dimensions) or a `convolution` (the kernel's elements but its output features: a TPU writes
    matrix products as convolutions); 0 for any other instruction."""
    operand = 0 if product.opcode == "dot" else 1 if product.opcode == "convolution" else None
    given = program.get(product.operands[operand]) if operand is not None and len(product.operands) > operand else None
    if given is None or not given.arrays:
        return 0
    shape = given.arrays[0].shape
    if product.opcode == "dot":
        summed = math.prod(shape[d] for d in product.contracting if d < len(shape))
    else:
        labels = _DIM_LABELS.search(product.attributes)
        kernel = labels.group(1) if labels else ""
        summed = math.prod(shape) // (shape[kernel.index("o")] if "o" in kernel and len(kernel) == len(shape) else 1)
    return 2 * sum(a.size for a in product.arrays) * summed


def loop_flops(text: str | Program, counted: float) -> LoopFlops:
    """XLA's count `counted`, and what the program's loops add to it."""
    program = read_program(text) if isinstance(text, str) else text
    runs = executions(program)
    added, unknown = 0, []
    for computation, instructions in program.computations.items():
        dots = sum(product_flops(program, i) for i in instructions.values())
        if not dots:
            continue
        n = runs.get(computation, 1)
        if n == 0:
            unknown.append(computation)
        elif n > 1:
            added += (n - 1) * dots
    return LoopFlops(float(counted), float(added), tuple(unknown))
