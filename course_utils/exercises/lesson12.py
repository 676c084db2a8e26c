"""Checkers for lesson 12: a pipeline's bubble, and the bytes a stage boundary sends.

12.1 measures the idle share from the schedule itself (`pipeline.schedule`), not from the formula the
lesson checks it against; 12.2 compiles a GPipe forward pass of its own (the lesson's loop, with a small
stage) and reads its collective-permutes and its loop's trip count from the compiled program.
"""

from __future__ import annotations

import functools
import re

from course_utils.exercises.core import exercise

STAGES = 4  # the lesson's pipeline: 4 stages
BUBBLE_TARGET = 0.10  # exercise 12.1: the idle share to stay under
ROWS, WIDTH = 64, 32  # exercise 12.2: the lesson's batch (rows) and block width, float32
MICRO_BATCHES = 8  # exercise 12.2's micro-batches
_TRIPS = re.compile(r'known_trip_count"?\s*[:=]\s*\{\s*"?n"?\s*[:=]\s*"?(\d+)')


def _under(share: float) -> bool:
    """Whether an idle share is under the target (a share within rounding of it is not: 3/30 is 10 %)."""
    return share < BUBBLE_TARGET - 1e-9


def _idle_share(micro_batches: int) -> float:
    from course_utils.pipeline import schedule

    return schedule("GPipe", stages=STAGES, micro_batches=micro_batches).idle_share


@exercise("12.1", f"The fewest micro-batches that keep a {STAGES}-stage GPipe schedule idle under "
                  f"{BUBBLE_TARGET:.0%} of the time.", form="a whole number of micro-batches, e.g. 12")
def fewest_micro_batches(answer) -> str | None:
    """Measures the schedule's idle share at the answer and one micro-batch fewer."""
    if isinstance(answer, bool) or not isinstance(answer, int) or answer < 1:
        return f"Answer a whole number of micro-batches, at least 1. Received: {answer!r}."
    if answer > 10_000:
        return f"Far more than needed: {answer:,} micro-batches. Start from the bubble's share at a few."
    share = _idle_share(answer)
    if abs(share - BUBBLE_TARGET) < 1e-9:
        return (f"With {answer} micro-batches the stages are idle {share:.1%} of the step: at the limit, and the "
                f"task asks for under it.")
    if not _under(share):
        return (f"With {answer} micro-batches the stages are idle {share:.1%} of the step. The idle time stays "
                f"the same while the busy time grows with each micro-batch: take more.")
    if answer > 1 and _under(_idle_share(answer - 1)):
        return (f"Under {BUBBLE_TARGET:.0%}, yes ({share:.1%}); the task asks for the fewest micro-batches that "
                f"are: try fewer.")
    return None


def _gpipe_forward(stages: int, micro_batches: int):
    """A GPipe forward pass as the lesson writes it (a `tanh(x @ w)` stage instead of Keras blocks), sharded
    over a `stage` axis of `stages` devices and compiled: its program text."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((stages,), ("stage",), devices=jax.devices()[:stages])

    def gpipe(w, x):
        stage = lax.axis_index("stage")
        micro = x.reshape(micro_batches, -1, x.shape[-1])
        state = lax.pcast(jnp.zeros_like(micro[0]), "stage", to="varying")
        outputs = lax.pcast(jnp.zeros_like(micro), "stage", to="varying")

        def tick(t, carry):
            state, outputs = carry
            state = jnp.tanh(jnp.where(stage == 0, micro[t % micro_batches], state) @ w[0])
            done = (t - stages + 1) % micro_batches
            outputs = outputs.at[done].set(jnp.where(stage == stages - 1, state, outputs[done]))
            return lax.ppermute(state, "stage", [(i, (i + 1) % stages) for i in range(stages)]), outputs

        _, outputs = lax.fori_loop(0, micro_batches + stages - 1, tick, (state, outputs))
        return lax.psum(jnp.where(stage == stages - 1, outputs, 0.0), "stage").reshape(x.shape)

    w = jax.device_put(np.zeros((stages, WIDTH, WIDTH), "float32"), NamedSharding(mesh, P("stage")))
    x = jax.device_put(np.zeros((ROWS, WIDTH), "float32"), NamedSharding(mesh, P()))
    forward = jax.jit(jax.shard_map(gpipe, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P()))
    return forward.lower(w, x).compile().as_text()


@functools.cache
def boundary_bytes(micro_batches: int = MICRO_BATCHES, stages: int = STAGES) -> tuple[int, int]:
    """(bytes of one collective-permute on each device, how many times the loop that holds it runs), read
    from a compiled GPipe forward pass."""
    from course_utils.communication.hlo import collective_ops

    program = _gpipe_forward(stages, micro_batches)
    permutes = [op for op in collective_ops(program, ("stage",), (stages,)) if op.kind == "collective-permute"]
    trips = [int(n) for n in _TRIPS.findall(program)]
    if len(permutes) != 1 or not trips:
        raise RuntimeError(f"The compiled forward pass holds {len(permutes)} collective-permutes and loops of "
                           f"{trips} trips: not the one permute in one loop this checker reads.")
    return permutes[0].bytes, max(trips)


@exercise("12.2", f"The bytes each device sends over `stage` in one forward pass of the lesson's pipeline with "
                  f"{MICRO_BATCHES} micro-batches.", form="a whole number of bytes, e.g. 5_000")
def stage_boundary_bytes(answer) -> str | None:
    """Compiles the forward pass with 8 micro-batches and multiplies one permute's bytes by the loop's trips."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or answer < 0:
        return f"Answer a number of bytes. Received: {answer!r}."
    per_tick, ticks = boundary_bytes()
    if answer == per_tick * ticks:
        return None
    if answer == per_tick * MICRO_BATCHES:
        return ("That counts one send per micro-batch. The loop sends on every tick, also while the pipeline "
                "fills and drains: how many ticks does it run?")
    if answer == ticks * ROWS * WIDTH * 4 or answer == ROWS * WIDTH * 4:
        return "A tick sends one micro-batch's activations, not the whole batch's: how many rows is a micro-batch?"
    if answer in (per_tick, per_tick * 2 * ticks):
        return "That is not one forward pass's worth: count every tick of the forward loop, once each."
    return (f"Not what the compiled program sends. One tick sends one micro-batch's activations ({WIDTH} float32 "
            f"numbers a row); multiply by the ticks of the forward loop.")
