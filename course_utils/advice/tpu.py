"""A TPU's own compiled step, on a machine without a TPU: libtpu compiles for a slice it knows only by name.

`jax.experimental.topologies.get_topology_desc("v5e:2x4", "tpu")` gives the devices of a TPU slice that is
not there; a step lowered for a mesh of them is compiled by the TPU's own compiler (libtpu) with its
defaults, and the program is the one the chip would run: its buffers (`memory_analysis()`) and its
collectives as it sends them: bf16 or f32 as the program computes, reduce-scatters written by the TPU's
emitters, all-gathers fused with the product they feed, FSDP's gathers and reductions split into one
permute per step of a loop overlapped with the product ("windowed einsums"). Nothing is corrected, as the
CPU program's bytes are (`program`).

A loop's collectives count once per round: `communication.runs.executions` reads how many rounds from the
loop's counter. The FLOPs are the CPU program's (`cost_analysis()` counts a loop's body once; the CPU
program has no loop and the same products).

libtpu is not part of the course's environment (700 MB; Binder has no room): `make tpu-targets` puts the
version JAX 0.10.2 pins (`LIBTPU`) in `.venv/libtpu`, outside the packages JAX looks for accelerators in,
so no lesson sees it. A TPU VM's own libtpu is used where it is installed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path

from course_utils.advice.program import StepProgram, Transfer, flops_of, pass_of, summed_transfers
from course_utils.communication.hlo import collective_ops
from course_utils.communication.instructions import read_program
from course_utils.communication.traffic import ring_sent_bytes
from course_utils.communication.train_step import compile_train_step, training_batch
from course_utils.layouts.layout_map import make_layout_map
from course_utils.memory.compiled import memory_of

LIBTPU = "libtpu==0.0.42.*"  # the version jax 0.10.2 pins (pip's jax[tpu]); a newer libtpu writes programs jaxlib misreads
FOLDER = Path(sys.prefix) / "libtpu"  # where `make tpu-targets` installs it


class TpuCompilerMissing(ModuleNotFoundError):
    """libtpu, the TPU's compiler, is not installed where the course looks for it."""


class TpuOutOfMemory(ValueError):
    """The TPU's compiler refused the step: its buffers need more than the chip's memory."""


def available() -> bool:
    """True when libtpu can be imported (installed in the environment, or by `make tpu-targets`)."""
    try:
        _libtpu()
    except TpuCompilerMissing:
        return False
    return True


def _libtpu():
    if str(FOLDER) not in sys.path and FOLDER.is_dir():
        sys.path.append(str(FOLDER))
    try:
        import libtpu
    except ImportError as error:
        raise TpuCompilerMissing(
            f"Compiling for a TPU needs libtpu, the TPU's compiler ({LIBTPU}, the version JAX 0.10.2 pins). "
            f"Install it with: make tpu-targets (into {FOLDER}), or pip install '{LIBTPU}' in an environment "
            f"of your own. Without it, advise(..., program='cpu') reads XLA's CPU program instead.") from error
    return libtpu


@functools.cache
def topology_devices(topology: str) -> tuple:
    """The devices of a TPU slice named like "v5e:2x4" or "v5p:2x2x2", to compile for (none is there)."""
    _libtpu()
    from jax.experimental import topologies

    # No TPU here: tell libtpu so, instead of letting it look for workers and print why it found none.
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    # compiling only: another process (a second kernel, a test) may load libtpu too
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    try:
        return tuple(topologies.get_topology_desc(topology, "tpu").devices)
    except Exception as error:  # libtpu's own error types
        raise ValueError(f"libtpu does not know the TPU slice {topology!r}: {str(error).splitlines()[0][:300]}. "
                         f"Name one like 'v5e:2x4' or 'v5p:2x2x2'.") from error


def tpu_mesh(mesh_shape: tuple[int, ...], axis_names: tuple[str, ...], topology: str):
    """A `keras.distribution.DeviceMesh` of the slice's devices, laid out as JAX lays a mesh on a TPU slice
    (`mesh_utils.create_device_mesh`: neighbours on a mesh axis are neighbours on the torus)."""
    from jax.experimental import mesh_utils
    from keras import distribution

    devices = mesh_utils.create_device_mesh(tuple(mesh_shape), devices=list(topology_devices(topology)))
    return distribution.DeviceMesh(tuple(mesh_shape), tuple(axis_names), devices=devices)


def read_tpu_step(model, layout_map, mesh_shape: tuple[int, int], batch, topology: str) -> StepProgram:
    """One training step of `model` compiled by libtpu for the slice `topology`, with `layout_map`'s rules on
    a mesh of its devices, and read: the TPU's memory and collectives (shape-only; nothing runs), and its
    `cost_analysis()` FLOPs, which count a loop's body once (`advise` takes the CPU program's).

    Args:
        model: A compiled Keras model, real or shape-only.
        layout_map: The rules, on a mesh of any devices (they are moved to the slice's).
        mesh_shape: (batch, model), as many devices as the slice has.
        batch: `(x, y)` as `jax.ShapeDtypeStruct`s, or the input's shape.
        topology: The slice, e.g. "v5e:2x4".
    """
    from keras import distribution

    from course_utils.advice.candidates import MESH_AXES

    mesh = tpu_mesh(mesh_shape, MESH_AXES, topology)
    rules = {key: tuple(layout.axes) for key, layout in layout_map.items()}
    on_slice = distribution.ModelParallel(layout_map=make_layout_map(mesh, rules), batch_dim_name=MESH_AXES[0])
    try:
        with _not_cached():
            compiled = compile_train_step(model, on_slice, training_batch(model, batch), options=None, donate=True)
    except Exception as error:  # jax.errors.JaxRuntimeError, libtpu's RESOURCE_EXHAUSTED
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        raise TpuOutOfMemory(f"the TPU's compiler: {str(error).split(':', 1)[-1].strip()[:300]}") from None
    program = read_program(compiled.as_text())
    ops = collective_ops(program, MESH_AXES, tuple(mesh_shape))
    looped = sorted({op.computation for op in ops if op.times == 0})
    if looped:
        raise ValueError(f"The TPU program sends collectives inside loops ({', '.join(looped[:3])}) whose trip count "
                         f"it does not write, so their bytes cannot be read from it. Use program='cpu' for this model.")
    transfers = [_tpu_transfer(op) for op in ops]
    version = getattr(_libtpu(), "__version__", "") or _installed_version()
    flops = flops_of(compiled, program)
    return StepProgram(memory_of(compiled), flops.flops, summed_transfers(transfers), undercounted=flops.undercounted,
                       source=f"the TPU's own program (libtpu {version}, slice {topology})")


@contextlib.contextmanager
def _not_cached():
    """Compiles without writing to the persistent compilation cache: a program compiled for a TPU that is not
    there cannot be loaded back (JAX would warn at every later compile of it), and a 7B step's would crowd
    out the lessons' programs."""
    import jax

    before = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf"))
    try:
        yield
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before)


def _tpu_transfer(op) -> Transfer:
    """What one collective of a TPU program sends, as the program writes it (nothing corrected). The TPU's
    reduce-scatter emitter is a fusion around an all-reduce and a slice; it sends (n-1)/n of its operand."""
    n = op.group_size
    if op.kind == "all-reduce" and op.computation.startswith("all-reduce-scatter"):
        kind, sent = "reduce-scatter", round(op.bytes * (n - 1) / n)
    else:
        kind, sent = op.kind, ring_sent_bytes(op.kind, op.bytes, n)
    return Transfer(kind, op.axes, pass_of(op), n, op.times, sent * op.times, sent * op.times)


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("libtpu")
    except metadata.PackageNotFoundError:
        found = sorted(FOLDER.glob("libtpu-*.dist-info"))
        return found[-1].name.removeprefix("libtpu-").removesuffix(".dist-info") if found else "?"
