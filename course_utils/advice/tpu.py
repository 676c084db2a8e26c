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

import functools
import os
import sys
from pathlib import Path

from course_utils.advice.own_program import OwnProgramOutOfMemory, read_own_step
from course_utils.advice.program import StepProgram

LIBTPU = "libtpu==0.0.42.*"  # the version jax 0.10.2 pins (pip's jax[tpu]); a newer libtpu writes programs jaxlib misreads
FOLDER = Path(sys.prefix) / "libtpu"  # where `make tpu-targets` installs it


class TpuCompilerMissing(ModuleNotFoundError):
    """libtpu, the TPU's compiler, is not installed where the course looks for it."""


TpuOutOfMemory = OwnProgramOutOfMemory  # the TPU's compiler refused the step: more than the chip's memory


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


# No TPU here: tell libtpu so, instead of letting it look for workers and print why it found none; and as it only
# compiles, another process (a second kernel, a test) may load it too.
_ENVIRONMENT = {"TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
_PROBE = ("import sys; sys.path.append(sys.argv[1]); import jax; jax.config.update('jax_platforms', 'cpu'); "
          "from jax.experimental import topologies; topologies.get_topology_desc(sys.argv[2], 'tpu')")


@functools.cache
def loads_whole(topology: str) -> None:
    """Loads libtpu once in a process of its own first: a damaged library (a file cut short) would otherwise kill
    the kernel that loads it (SIGBUS), with no message. Raises `TpuCompilerMissing` with how to install it again."""
    import subprocess

    # the library in FOLDER, as `import libtpu` finds it (not one an earlier import named in TPU_LIBRARY_PATH)
    environment = {k: v for k, v in {**os.environ, **_ENVIRONMENT}.items() if k != "TPU_LIBRARY_PATH"}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(FOLDER), topology], capture_output=True, text=True,
                          timeout=300, env=environment)
    if done.returncode < 0 or (done.returncode and "libtpu does not know" not in done.stderr
                               and "ImportError" in done.stderr):
        import signal

        how = f"was killed by {signal.Signals(-done.returncode).name}" if done.returncode < 0 else "failed to load it"
        raise TpuCompilerMissing(
            f"libtpu in {FOLDER} is damaged: a process that loaded it {how}. Install it again: rm -rf {FOLDER} && "
            f"make tpu-targets. ({done.stderr.strip().splitlines()[-1][:200] if done.stderr.strip() else 'no message'})")


@functools.cache
def topology_devices(topology: str) -> tuple:
    """The devices of a TPU slice named like "v5e:2x4" or "v5p:2x2x2", to compile for (none is there)."""
    _libtpu()
    if FOLDER.is_dir():
        loads_whole(topology)
    from jax.experimental import topologies

    for name, value in _ENVIRONMENT.items():
        os.environ.setdefault(name, value)
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


def read_tpu_step(model, layout_map, mesh_shape: tuple[int, ...], batch, topology: str, *,
                  zero: bool = False) -> StepProgram:
    """One training step of `model` compiled by libtpu for the slice `topology`, with `layout_map`'s rules on
    a mesh of its devices, and read (`own_program.read_own_step`): the TPU's memory and collectives (shape-only;
    nothing runs).

    Args:
        model: A compiled Keras model, real or shape-only.
        layout_map: The rules, on a mesh of any devices (they are moved to the slice's).
        mesh_shape: (batch, model), as many devices as the slice has.
        batch: `(x, y)` as `jax.ShapeDtypeStruct`s, or the input's shape.
        topology: The slice, e.g. "v5e:2x4".
    """
    from course_utils.advice.candidates import axes_of

    version = getattr(_libtpu(), "__version__", "") or _installed_version()
    return read_own_step(model, layout_map, tpu_mesh(mesh_shape, axes_of(mesh_shape), topology), batch, what="TPU",
                         zero=zero,
                         source=f"the TPU's own program (libtpu {version}, slice {topology})")


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("libtpu")
    except metadata.PackageNotFoundError:
        found = sorted(FOLDER.glob("libtpu-*.dist-info"))
        return found[-1].name.removeprefix("libtpu-").removesuffix(".dist-info") if found else "?"
