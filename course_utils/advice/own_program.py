"""An accelerator's own compiled step, read as it is written: nothing corrected, as the CPU program's bytes are.

`read_own_step` compiles one training step for a mesh of compile-only devices (a TPU slice's from libtpu,
`tpu`; a GPU server's from JAX's CUDA plugin, `gpu`), none of which is there, and reads the accelerator's own
program: its buffers (`memory_analysis()`) and its collectives as it sends them, each loop's once per round. Its
FLOPs are read too (each loop's products once per round); `advise` keeps the CPU program's, which it has for every
target. A program compiled for an accelerator that is not there cannot be loaded back: it is kept out of the
compilation cache.
"""

from __future__ import annotations

import contextlib

from course_utils.advice.program import StepProgram, Transfer, flops_of, pass_of, summed_transfers
from course_utils.communication.hlo import collective_ops
from course_utils.communication.instructions import read_program
from course_utils.communication.traffic import ring_sent_bytes
from course_utils.communication.train_step import compile_train_step, training_batch
from course_utils.layouts.hybrid import hybrid_parallel
from course_utils.layouts.layout_map import make_layout_map
from course_utils.layouts.zero import zero_parallel
from course_utils.memory.compiled import memory_of


class OwnProgramOutOfMemory(ValueError):
    """The accelerator's compiler refused the step: its buffers need more than the device's memory."""


def read_own_step(model, layout_map, mesh, batch, *, source: str, what: str, zero: bool = False) -> StepProgram:
    """One training step of `model` with `layout_map`'s rules moved onto `mesh` (a `DeviceMesh` of compile-only
    devices), compiled by the accelerator's own compiler and read.

    Args:
        model: A compiled Keras model, real or shape-only.
        layout_map: The rules, on a mesh of any devices.
        mesh: The mesh of the accelerator's devices, (batch, model) or (replica, batch, model).
        batch: `(x, y)` as `jax.ShapeDtypeStruct`s, or the input's shape.
        source: How the program is named on its rows ("the TPU's own program (libtpu 0.0.42, slice v5e:2x4)").
        what: The accelerator, in words ("TPU", "GPU"), for messages.
        zero: The optimizer's state split over the batch axis (ZeRO-2, `layouts.zero`).
    """
    from keras import distribution

    axes = tuple(mesh.axis_names)
    rules = {key: tuple(layout.axes) for key, layout in layout_map.items()}
    moved = make_layout_map(mesh, rules)
    # on (replica, batch, model) the batch over the first two (HSDP), as the candidate's own distribution
    on_devices = hybrid_parallel(moved, axes[:-1]) if len(axes) == 3 else zero_parallel(moved, axes[0]) if zero else \
        distribution.ModelParallel(layout_map=moved, batch_dim_name=axes[0])
    try:
        with not_cached():
            compiled = compile_train_step(model, on_devices, training_batch(model, batch), options=None, donate=True)
    except Exception as error:  # jax.errors.JaxRuntimeError: the compiler's RESOURCE_EXHAUSTED
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        raise OwnProgramOutOfMemory(f"the {what}'s compiler: {str(error).split(':', 1)[-1].strip()[:300]}") from None
    program = read_program(compiled.as_text())
    ops = collective_ops(program, axes, tuple(mesh.shape))
    looped = sorted({op.computation for op in ops if op.times == 0})
    if looped:
        raise ValueError(f"The {what} program sends collectives inside loops ({', '.join(looped[:3])}) whose trip "
                         f"count it does not write, so their bytes cannot be read from it. Use program='cpu' for "
                         f"this model.")
    flops = flops_of(compiled, program)
    return StepProgram(memory_of(compiled), flops.flops, summed_transfers([own_transfer(op) for op in ops]),
                       undercounted=flops.undercounted, source=source)


@contextlib.contextmanager
def not_cached():
    """Compiles without writing to the persistent compilation cache: a program compiled for an accelerator that is
    not there cannot be loaded back (JAX would warn at every later compile of it), and a 7B step's would crowd out
    the lessons' programs."""
    import jax

    before = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf"))
    try:
        yield
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before)


def own_transfer(op) -> Transfer:
    """What one collective of an accelerator's program sends, as the program writes it (nothing corrected). A TPU's
    reduce-scatter emitter is a fusion around an all-reduce and a slice; it sends (n-1)/n of its operand."""
    n = op.group_size
    if op.kind == "all-reduce" and op.computation.startswith("all-reduce-scatter"):
        kind, sent = "reduce-scatter", round(op.bytes * (n - 1) / n)
    else:
        kind, sent = op.kind, ring_sent_bytes(op.kind, op.bytes, n)
    return Transfer(kind, op.axes, pass_of(op), n, op.times, sent * op.times, sent * op.times)
