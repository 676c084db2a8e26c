"""One mesh, several processes: the worker's side of a multi-process run.

A multi-process run has three counts: processes (Python programs, one per
host on a real cluster), devices (each process owns some), and the mesh (one
global grid over every device of every process). A worker script calls
`setup_process` first, before anything starts JAX: it asks JAX for this
process's CPU devices, picks gloo for collectives between processes, and calls
`keras.distribution.initialize()`, which reads the `KERAS_DISTRIBUTION_*`
environment variables set by `course_utils.launch` (or by `srun` on a cluster).

With NumPy input, Keras does not split the data between processes: each
process must feed only its own rows of every global batch and the
distribution needs `auto_shard_dataset=False`. Keras's JAX backend then
assembles the global batch with `jax.make_array_from_process_local_data`.
`local_rows` picks those rows, asking JAX's sharding which rows this
process's devices hold, so the global batches equal those of a one-process run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from course_utils.xla_settings import use_compilation_cache
from course_utils.devices import device_name, import_keras_without

# Keras imports scikit-learn (for its optional scikit-learn wrappers) and pyplot (for its plotting
# helpers) whenever they are installed: about 3 s of every worker's start, for code no worker runs.
UNUSED_BY_WORKERS = ("sklearn", "matplotlib")
ENV_DEVICES = "COURSE_DEVICES_PER_PROCESS"
ENV_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
ENV_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
ENV_PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"


@dataclass(frozen=True)
class ProcessSetup:
    """What one process of a (possibly multi-process) run sees.

    Attributes:
        process_index: This process's index, `jax.process_index()`.
        process_count: How many processes form the run.
        local_devices: This process's devices, e.g. `("cpu:2048", ...)`.
        global_devices: Every device of every process, in mesh order.
        platform: `"cpu"`, `"gpu"` or `"tpu"`.
    """

    process_index: int
    process_count: int
    local_devices: tuple[str, ...]
    global_devices: tuple[str, ...]
    platform: str

    def summary(self) -> dict:
        """The counts as plain data, e.g. for a JSON line."""
        return {"process": self.process_index, "processes": self.process_count,
                "local_devices": len(self.local_devices), "global_devices": len(self.global_devices)}

    def __repr__(self) -> str:
        return (f"ProcessSetup: process {self.process_index} of {self.process_count} owns "
                f"{len(self.local_devices)} of {len(self.global_devices)} {self.platform.upper()} devices "
                f"({self.local_devices[0]} ... {self.local_devices[-1]}).")


def setup_process(global_devices: int | None = None, *, seed: int | None = 0) -> ProcessSetup:
    """Sets up this process's devices and joins the multi-process run.

    Call it first in a worker script, before anything starts JAX and before
    `import keras`. Without the `KERAS_DISTRIBUTION_*` variables it sets up a
    one-process run. It imports Keras without scikit-learn and matplotlib,
    which Keras loads for helpers no worker uses (`UNUSED_BY_WORKERS`; the
    script can still import them itself). Compiled
    programs are kept on disk as `setup_devices` keeps them, shared by every
    process of the run (`course_utils.xla_settings.compilation_cache_dir`).

    Args:
        global_devices: The devices the script's mesh needs over all
            processes; each process asks for `global_devices / processes`
            CPU devices unless `COURSE_DEVICES_PER_PROCESS` says otherwise.
        seed: Seeds Keras before joining, so every process starts from the
            same weights (Keras then skips its cross-process seed exchange).
            None leaves the seed to Keras.

    Returns:
        A `ProcessSetup`.

    Raises:
        ValueError: The devices do not split evenly, or the run has another
            number of devices than `global_devices`.
        RuntimeError: JAX had already started.

    Example:
        >>> setup = setup_process(8)   # 1 x 8, or 2 x 4 under the launcher
        >>> setup.summary()["global_devices"]
        8
    """
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax

    processes = int(os.environ.get(ENV_PROCESSES, "1"))
    per_process = _devices_per_process(global_devices, processes)
    try:
        jax.config.update("jax_num_cpu_devices", per_process)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except RuntimeError as error:
        raise RuntimeError("setup_process must run before anything starts JAX: call it first in "
                           f"the script. JAX said: {error}") from None
    use_compilation_cache()
    keras = import_keras_without(UNUSED_BY_WORKERS)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    if os.environ.get(ENV_ADDRESSES):
        keras.distribution.initialize()
    sys.excepthook = _exit_at_once
    setup = ProcessSetup(jax.process_index(), jax.process_count(),
                         tuple(device_name(d) for d in jax.local_devices()),
                         tuple(device_name(d) for d in jax.devices()), jax.default_backend())
    if global_devices is not None and len(setup.global_devices) != global_devices:
        raise ValueError(f"This script needs {global_devices} devices in all; the run has "
                         f"{len(setup.global_devices)} ({processes} processes). Launch it with "
                         f"processes x devices per process = {global_devices}.")
    return setup


def _devices_per_process(global_devices: int | None, processes: int) -> int:
    if os.environ.get(ENV_DEVICES):
        return int(os.environ[ENV_DEVICES])
    if global_devices is None:
        return 1
    if global_devices % processes:
        raise ValueError(f"{global_devices} devices do not split evenly over {processes} processes. "
                         f"Received: {ENV_PROCESSES}={processes}. Use a number of processes that "
                         f"divides {global_devices}.")
    return global_devices // processes


def _exit_at_once(kind, error, traceback) -> None:
    """Prints an uncaught error and exits now.

    Python would otherwise wait at exit in JAX's distributed shutdown for the
    other processes, which may never come.
    """
    sys.__excepthook__(kind, error, traceback)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _rows(sharding, global_batch_size: int, devices) -> slice:
    """The rows of a batch that `devices` hold under `sharding`, as one slice."""
    index_map = sharding.devices_indices_map((global_batch_size,))
    ranges = {index_map[d][0].indices(global_batch_size)[:2] for d in devices}
    start, stop = min(r[0] for r in ranges), max(r[1] for r in ranges)
    if sum(b - a for a, b in ranges) != stop - start:
        raise ValueError(f"These devices hold rows {sorted(ranges)} of the batch: not one block. "
                         f"Order the mesh so each process's devices share the 'data' coordinates.")
    return slice(start, stop)


def _data_sharding(global_batch_size: int, distribution):
    import keras

    distribution = distribution or keras.distribution.distribution()
    if distribution is None:
        raise ValueError("No distribution: pass one, or call this inside distribution.scope().")
    return distribution.get_data_layout((global_batch_size,)).backend_layout


def process_batch_slice(global_batch_size: int, distribution=None) -> slice:
    """The rows of every global batch that this process feeds.

    JAX decides: the rows held by this process's devices under the
    distribution's data layout.

    Args:
        global_batch_size: Rows of one global batch (all processes together).
        distribution: A `keras.distribution` distribution (default: the
            current one).

    Returns:
        A `slice` of the global batch, e.g. `slice(16, 32)` for process 1 of
        2 on a 2 x 4 mesh with a global batch of 32.
    """
    sharding = _data_sharding(global_batch_size, distribution)
    return _rows(sharding, global_batch_size, sharding.addressable_devices)


def planned_batch_slices(global_batch_size: int, distribution, processes: int) -> tuple[slice, ...]:
    """`process_batch_slice` of every process, planned from one process.

    Assumes process p will own the p-th block of the mesh's devices (as
    `jax.devices()` orders them in a multi-process run).
    """
    sharding = _data_sharding(global_batch_size, distribution)
    flat = list(np.asarray(sharding.mesh.devices).flat)
    per_process = len(flat) // processes
    return tuple(_rows(sharding, global_batch_size, flat[p * per_process:(p + 1) * per_process])
                 for p in range(processes))


def local_rows(array, global_batch_size: int, distribution=None) -> np.ndarray:
    """This process's rows of every global batch, in step order.

    Feed the result to `fit` with `batch_size=` the slice's length: step k
    then sees this process's part of global batch k, and Keras assembles the
    same global batches as a one-process run.

    Args:
        array: The whole dataset (every process holds it here; on a real
            cluster each host would read only its rows).
        global_batch_size: Rows of one global batch.
        distribution: As in `process_batch_slice`.

    Returns:
        A NumPy array of `len(array) / global_batch_size * rows` rows.
    """
    array = np.asarray(array)
    if len(array) % global_batch_size:
        raise ValueError(f"The data has {len(array)} rows, not a multiple of the global batch "
                         f"size {global_batch_size}. Drop or pad rows so every step is full.")
    rows = process_batch_slice(global_batch_size, distribution)
    batches = array.reshape(len(array) // global_batch_size, global_batch_size, *array.shape[1:])
    return batches[:, rows].reshape(-1, *array.shape[1:])
