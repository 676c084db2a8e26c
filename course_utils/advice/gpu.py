"""A GPU's own compiled step, on a machine without a GPU: XLA's GPU compiler, given the GPU's description.

JAX's CUDA plugin compiles for a topology it is told about (servers x GPUs each) and a target description (the
GPU's cores, memory, compute capability): XLA's GPU program for an H100 comes out, PTX and machine code included,
with no GPU and no CUDA driver. A step lowered for a mesh of those devices is compiled with XLA's GPU defaults, and
its program is the one a real run of it would execute: its buffers (bf16 as the GPU keeps them, XLA GPU's fusions,
its own rematerialisation where the step would not fit the device's memory) and its collectives (native
reduce-scatters, bf16 where it computes bf16). What it does not choose here: no autotuning (no GPU to time
kernels on), and the attention keras-hub writes, as Keras picks cuDNN's fused kernel only with a GPU present.

The plugin is not part of the course's environment (about 480 MB): `make gpu-targets` puts the version JAX 0.10.2
pins in `.venv/gpu`, outside the packages JAX looks for accelerators in, and it is loaded only here, after the
course's CPU devices started (no backend is registered; nothing else sees it). Derived in lesson 10.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

from course_utils.advice.own_program import read_own_step
from course_utils.advice.program import StepProgram

PLUGIN = ("jax-cuda12-plugin==0.10.2", "jax-cuda12-pjrt==0.10.2")  # the versions jax 0.10.2 pins
FOLDER = Path(sys.prefix) / "gpu"  # where `make gpu-targets` installs them
LIBRARY = FOLDER / "jax_plugins" / "xla_cuda12" / "xla_cuda_plugin.so"
# What XLA's GPU compiler reads of a GPU (its GpuDeviceInfoProto), from NVIDIA's H100 SXM datasheet and its CUDA
# device properties: 132 SMs, 228 KiB of shared memory each (227 KiB to one block), 50 MiB of L2, compute 9.0.
CHIPS = {"NVIDIA H100 SXM": dict(core_count=132, fpus_per_core=128, shared_memory_per_core=233472,
                                 shared_memory_per_block_optin=232448, l2_cache_size=52428800, clock_rate_ghz=1.98,
                                 compute_capability=9)}


class GpuCompilerMissing(ModuleNotFoundError):
    """JAX's CUDA plugin, XLA's GPU compiler, is not installed where the course looks for it."""


def available() -> bool:
    """True when the plugin is where `make gpu-targets` puts it."""
    return LIBRARY.is_file()


def target_config(devices) -> str:
    """The GPU's description XLA's GPU compiler takes, from a `DeviceSet` of a known chip."""
    chip = CHIPS.get(devices.chip)
    if chip is None:
        raise ValueError(f"program='gpu' knows the GPUs {sorted(CHIPS)}; {devices.name} is made of {devices.chip!r}. "
                         f"Use program='cpu' for it.")
    bandwidth = round(devices.memory_bytes_per_second or 0)
    return (f"gpu_device_info {{ threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152 "
            f"shared_memory_per_core: {chip['shared_memory_per_core']} threads_per_core_limit: 2048 "
            f"core_count: {chip['core_count']} fpus_per_core: {chip['fpus_per_core']} block_dim_limit_x: 2147483647 "
            f"block_dim_limit_y: 65535 block_dim_limit_z: 65535 memory_bandwidth: {bandwidth} "
            f"l2_cache_size: {chip['l2_cache_size']} clock_rate_ghz: {chip['clock_rate_ghz']} "
            f"device_memory_size: {round(devices.memory_bytes)} "
            f"shared_memory_per_block_optin: {chip['shared_memory_per_block_optin']} "
            f"cuda_compute_capability {{ major: {chip['compute_capability']} }} registers_per_core_limit: 65536 "
            f"registers_per_block_limit: 65536 }} platform_name: \"CUDA\" dnn_version_info {{ major: 9 minor: 1 }} "
            f"device_description_str: \"{devices.chip}\"")


@functools.cache
def _plugin():
    if not available():
        raise GpuCompilerMissing(
            f"Compiling for a GPU without one needs JAX's CUDA plugin ({' and '.join(PLUGIN)}). Install it with: "
            f"make gpu-targets (into {FOLDER}). Without it, advise(..., program='cpu') reads XLA's CPU program.")
    from course_utils.jax_internals import load_plugin

    return load_plugin("cuda", str(LIBRARY))


@functools.cache
def gpu_devices(nodes: int, per_node: int, config: str) -> tuple:
    """Compile-only devices of `nodes` servers of `per_node` GPUs described by `config` (none is there)."""
    from course_utils.jax_internals import compile_only_devices

    return tuple(compile_only_devices(_plugin(), topology=f"1x{nodes}x{per_node}", target_config=config))


def gpu_mesh(mesh_shape: tuple[int, ...], axis_names: tuple[str, ...], devices):
    """A `keras.distribution.DeviceMesh` of the set's GPUs, numbered row-major as `hardware.DeviceSet.link` does."""
    import numpy as np
    from keras import distribution

    found = gpu_devices(devices.devices // devices.per_node, devices.per_node, target_config(devices))
    grid = np.array(found, dtype=object).reshape(mesh_shape)
    return distribution.DeviceMesh(tuple(mesh_shape), tuple(axis_names), devices=grid)


def read_gpu_step(model, layout_map, mesh_shape: tuple[int, ...], batch, devices, *, zero: bool = False) -> StepProgram:
    """One training step of `model` compiled by XLA's GPU compiler for the `DeviceSet` `devices`, with
    `layout_map`'s rules on a mesh of its GPUs, and read (`own_program.read_own_step`; shape-only, nothing runs)."""
    from course_utils.advice.candidates import axes_of

    if math.prod(mesh_shape) != devices.devices:
        raise ValueError(f"{devices.name} has {devices.devices} GPUs. Received: mesh_shape={tuple(mesh_shape)}.")
    return read_own_step(model, layout_map, gpu_mesh(mesh_shape, axes_of(mesh_shape), devices), batch, what="GPU",
                         zero=zero,
                         source=f"the GPU's own program (XLA's GPU compiler, {PLUGIN[0]}, for {devices.name}; not "
                                f"autotuned, attention as keras-hub writes it)")
