"""The serving step, and a compiled program read per device: its collectives and the FLOPs of its products.

Derived in notebook 13, whose cells write `decode_step` by hand.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


def decode_step(causal_lm, cache_layout=None):
    """The serving step of notebook 13, jitted: `step(weights, token_ids, cache, index) -> (logits of the last
    token, cache)`. The model's own `call_with_cache` runs statelessly on `weights` (arrays in the order of
    `causal_lm.weights`), as keras-hub's `generate` runs it; `cache_layout` (a TensorLayout), when given, pins the
    cache it returns. The cache is donated: XLA may write the new cache where the old one was."""
    import jax
    import keras

    def step(weights, token_ids, cache, index):
        with keras.StatelessScope(state_mapping=zip(causal_lm.weights, weights)):
            logits, _, cache = causal_lm.call_with_cache(token_ids, cache, index)
        if cache_layout is not None:
            cache = keras.distribution.distribute_tensor(cache, cache_layout)
        return logits[:, -1], cache

    return jax.jit(step, donate_argnums=2)


@dataclass(frozen=True)
class ProgramReading:
    """One compiled program, read per device: its collectives (summed by kind and mesh axes) and the FLOPs of its
    matrix products."""

    collectives: tuple
    flops: float
    output_specs: tuple = ()  # the PartitionSpec XLA gave each output

    def __str__(self) -> str:
        return ", ".join(f"{c.count} {c.kind} over {'+'.join(c.axes)} ({c.bytes:,} B)" for c in self.collectives) \
            or "no collectives"


def read_program(step, *args, mesh) -> ProgramReading:
    """Compiles one call of a jitted `step` on `args` (arrays, or `jax.ShapeDtypeStruct`s with their shardings)
    to be read, never run (`xla_settings.READING_COMPILE`), and reads, per device, its collectives over the axes
    of `mesh` (a Keras `DeviceMesh`) and the FLOPs of its matrix products (`product_flops`), and the layout XLA
    gave each output."""
    from course_utils.communication.hlo import collective_ops, summed
    from course_utils.xla_settings import READING_COMPILE

    import jax

    compiled = step.lower(*args).compile(READING_COMPILE)
    text = compiled.as_text()
    ops = summed(collective_ops(text, tuple(mesh.axis_names), tuple(mesh.shape)))
    specs = tuple(getattr(s, "spec", None) for s in jax.tree_util.tree_leaves(compiled.output_shardings))
    return ProgramReading(tuple(ops), product_flops(text), specs)


_DIMS = re.compile(r"\[([0-9,]*)\]")


def product_flops(hlo: str) -> float:
    """FLOPs of the matrix products (`dot`) of a compiled program, per device: 2 x each result's elements x
    the size of its contracted dimensions, times the runs of its computation.

    Only the products run at a chip's peak rate. XLA's `cost_analysis()` also counts one FLOP per element of
    every elementwise operation, and XLA CPU updates a decode step's cache with selects over the whole cache:
    counted so, 4,096 tokens of context would double Gemma 7B's FLOPs, for work that is memory traffic.
    """
    from course_utils.communication.runs import read_computations, runs_of

    order, instructions, roots, entry = read_computations(hlo.splitlines())
    runs = runs_of(order, instructions, roots, entry)
    total = 0.0
    for computation, found in instructions.items():
        for opcode, operands, line in found.values():
            if opcode != "dot" or not operands or operands[0] not in found:
                continue
            result = _dims(line.split("=", 1)[1])
            lhs = _dims(found[operands[0]][2].split("=", 1)[1])
            contracted = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", line)
            size = math.prod(lhs[int(d)] for d in contracted.group(1).split(",") if d) if contracted else 1
            total += 2 * math.prod(result) * size * runs.get(computation, 1)
    return total


def _dims(text: str) -> tuple[int, ...]:
    """The dimensions of the first array type written in `text` ("f32[16,512]{1,0} dot(...)" -> (16, 512))."""
    found = _DIMS.search(text)
    return tuple(int(d) for d in found.group(1).split(",") if d) if found else ()
