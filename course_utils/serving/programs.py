"""The serving step, and a compiled program read per device: its collectives and the FLOPs of its products.

Derived in notebook 13, whose cells write `decode_step` by hand.
"""

from __future__ import annotations

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




def product_flops(hlo: str) -> float:
    """FLOPs of the matrix products (`dot`) of a compiled program, per device: 2 x each result's elements x
    the size of its contracted dimensions, times the runs of its computation.

    Only the products run at a chip's peak rate. XLA's `cost_analysis()` also counts one FLOP per element of
    every elementwise operation, and XLA CPU updates a decode step's cache with selects over the whole cache:
    counted so, 4,096 tokens of context would double Gemma 7B's FLOPs, for work that is memory traffic.
    """
    from course_utils.communication.flops import product_flops as flops_of
    from course_utils.communication.instructions import read_program
    from course_utils.communication.runs import executions

    program = read_program(hlo)
    runs = executions(program)
    return float(sum(flops_of(program, i) * max(runs.get(i.computation, 1), 1)
                     for i in program.instructions() if i.opcode == "dot"))
