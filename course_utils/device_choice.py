"""Which JAX devices `devices.setup_devices` picks, and the checks that stop it rather than go on with fewer.

Each check raises with what was asked, what JAX has, and what to do: most often restart the kernel, since
JAX fixes its device list the moment its backends start.
"""

from __future__ import annotations

import os
import sys

PLATFORMS = ("auto", "cpu", "gpu", "tpu")
PLATFORM_ENV = "COURSE_PLATFORM"

RESTART_HINT = (
    "Restart the kernel (Kernel > Restart Kernel in JupyterLab) and run the "
    "first cell, the one that calls setup_devices, before any other cell."
)


class DeviceSetupError(RuntimeError):
    """The devices the course asked for cannot be had in this process."""


# Simulated CPU devices share this machine's cores and memory; XLA starts each with its own resources,
# so thousands take minutes and gigabytes to start (10,000: over 60 s and 3.4 GB, still starting).
MAX_SIMULATED = 512


def resolve_platform(platform: str) -> str:
    """The platform asked for: `platform`, or with "auto" the one `COURSE_PLATFORM` forces (else "auto")."""
    if platform == "auto":
        platform = os.environ.get(PLATFORM_ENV, "auto").strip().lower() or "auto"
        source = f"the environment variable {PLATFORM_ENV}"
    else:
        source = "platform"
    if platform not in PLATFORMS:
        raise ValueError(
            f"Unknown platform. Received: {source}={platform!r}. "
            f"Use one of {', '.join(repr(p) for p in PLATFORMS)}."
        )
    return platform


def validate_count(n, platform: str) -> int:
    """`n` itself when it is a device count `setup_devices` can set up on `platform`; else ValueError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(
            f"setup_devices needs a positive whole number of devices. "
            f"Received: n={n!r}. Use for example setup_devices(8)."
        )
    if n > MAX_SIMULATED and platform in ("auto", "cpu"):
        raise ValueError(
            f"setup_devices simulates at most {MAX_SIMULATED} CPU devices: they share this machine's cores and "
            f"memory, and thousands take minutes and gigabytes to start. Received: n={n}. The lessons use 8: "
            f"setup_devices(8); on {n} real accelerators, setup_devices({n}, platform='gpu') or platform='tpu'."
        )
    return n


def use_jax_backend_for_keras() -> None:
    """Sets `KERAS_BACKEND=jax` if unset; a Keras already imported on another backend is a `DeviceSetupError`."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = sys.modules.get("keras")
    if keras is not None and keras.backend.backend() != "jax":
        raise DeviceSetupError(
            f"Keras was imported with the {keras.backend.backend()!r} backend, "
            f"but this course needs 'jax'. {RESTART_HINT}"
        )


def start_jax(n: int, platform: str) -> list:
    """Asks JAX for `n` CPU devices (and for the CPU alone with `platform="cpu"`) unless its backends already
    started, then returns the `n` devices the course uses: accelerators when `platform` allows and enough
    exist, else CPU devices, which then also hold the arrays no one placed.

    Raises:
        DeviceSetupError: Too few devices of the platform, or JAX already started with too few, or with more
            simulated CPU devices than Keras's defaults should spread over.
    """
    import jax

    started = not _try_config(jax, "jax_num_cpu_devices", n)
    if platform == "cpu" and not started:
        _try_config(jax, "jax_platforms", "cpu")
    chosen = _choose(jax, n, platform, started)
    if chosen[0].platform == "cpu" and jax.default_backend() != "cpu":
        # Fewer accelerators than asked: keep un-placed arrays on the CPU too.
        jax.config.update("jax_default_device", chosen[0])
    _check_keras_agrees(chosen)
    return chosen


def _try_config(jax, name: str, value) -> bool:
    """Sets a JAX option; returns False when JAX's backends already started."""
    try:
        jax.config.update(name, value)
    except RuntimeError:
        return False
    return True


def _choose(jax, n: int, platform: str, started: bool) -> list:
    """The first `n` devices of the platform; with "auto" accelerators when there are `n`, else CPU devices."""
    if platform in ("gpu", "tpu"):
        found = _devices_of(jax, platform)
        if len(found) < n:
            raise DeviceSetupError(
                f"platform={platform!r} asks for {n} {platform.upper()} devices, "
                f"but JAX finds {len(found)}. Use platform='cpu' (or 'auto') "
                f"to simulate {n} devices on the CPU."
            )
        return found[:n]
    if platform == "auto":
        accelerators = [d for d in jax.devices() if d.platform != "cpu"]
        if len(accelerators) >= n:
            return accelerators[:n]
    cpus = _devices_of(jax, "cpu")
    if len(cpus) < n:
        why = ("JAX had already started" if started
               else "JAX would not create them")
        raise DeviceSetupError(
            f"Asked for {n} CPU devices, but only {len(cpus)} exist: {why} "
            f"with {len(cpus)}. The course never goes on with fewer devices "
            f"than asked for. {RESTART_HINT}"
        )
    return cpus[:n]


def _check_keras_agrees(chosen: list) -> None:
    """Simulated devices: Keras's default device list (`DataParallel()`) must be the chosen one.

    JAX cannot drop CPU devices once it started, and Keras's `DataParallel()`
    with no mesh spreads over every device JAX lists. Asking for fewer would
    leave meshes on `n` devices and Keras's defaults on all of them.
    """
    from keras import distribution

    listed = distribution.list_devices()
    if chosen[0].platform != "cpu" or not listed or not listed[0].startswith("cpu") or len(listed) == len(chosen):
        return
    n = len(chosen)
    raise DeviceSetupError(
        f"Asked for {n} devices, but JAX already started with {len(listed)} simulated CPU devices and cannot "
        f"drop any: meshes would use {n} while Keras's DataParallel() and list_devices() still use all "
        f"{len(listed)}. Received: n={n} after JAX started with {len(listed)}. Either go on with "
        f"setup_devices({len(listed)}) (and pass devices=setup_devices({len(listed)}).devices[:{n}] where you want fewer), or "
        f"restart the kernel and call setup_devices({n}) first."
    )


def _devices_of(jax, platform: str) -> list:
    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []
