"""Which devices the course runs on: real accelerators or simulated CPU devices.

JAX fixes its device list the moment its backends start (the first
`jax.devices()` call or the first array operation). `setup_devices` must
therefore run first, in the first cell of every notebook. If JAX already
started with too few devices, it stops with a message that says to restart
the kernel, instead of carrying on with fewer devices than asked for.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from dataclasses import dataclass

from course_utils import device_choice
from course_utils.xla_settings import XLA_FLAGS_FIX, XLA_FLAGS_RISK, XlaFlagsWarning, use_compilation_cache, xla_flags

# Keras imports scikit-learn whenever it is installed, for its optional scikit-learn wrappers: 2 s of
# every lesson's first cell, for code the course never runs (lesson 05 imports scikit-learn itself).
UNUSED_BY_LESSONS = ("sklearn",)

_current: DeviceSetup | None = None


@dataclass(frozen=True)
class DeviceSetup:
    """The devices the course uses, in the order meshes lay them out.

    Attributes:
        devices: Keras device strings such as `"cpu:0"`, in mesh order.
        platform: `"cpu"`, `"gpu"` or `"tpu"`.
        simulated: True when several CPU devices share this machine's cores.
        compilation_cache: The folder where compiled programs are kept between
            runs (`xla_settings.compilation_cache_dir()`), or None when it is off.
    """

    devices: tuple[str, ...]
    platform: str
    simulated: bool
    compilation_cache: str | None = None

    def __len__(self) -> int:
        return len(self.devices)

    def __repr__(self) -> str:
        n = len(self.devices)
        names = ", ".join(self.devices) if n <= 4 else (
            f"{self.devices[0]} ... {self.devices[-1]}")
        if self.simulated:
            kind = f"{n} simulated CPU devices ({names})"
            note = "they share this machine's cores: they show placement, not speed"
        else:
            kind = f"{n} {self.platform.upper()} device{'s' * (n != 1)} ({names})"
            note = "real devices"
        return f"DeviceSetup: {kind}; {note}."


def setup_devices(n: int = 8, *, platform: str = "auto") -> DeviceSetup:
    """Chooses the devices for the course and configures JAX to expose them.

    Call it before anything starts JAX (it may come before or after
    `import keras`). It sets `KERAS_BACKEND=jax` if unset, imports Keras
    without scikit-learn (`UNUSED_BY_LESSONS`: Keras's scikit-learn wrappers,
    which the course does not use, then say it is missing; `import sklearn`
    works as usual), asks JAX for `n`
    CPU devices, and picks real accelerators when at least `n` exist,
    otherwise `n` simulated CPU devices. It also keeps every compiled XLA
    program in a cache on disk (`xla_settings.use_compilation_cache`), so that a lesson
    run a second time starts from the programs the first run compiled: the
    same programs, so the same results, without the wait. Calling it again
    with the same arguments returns the same setup.

    Args:
        n: How many devices the course needs.
        platform: `"auto"`, `"cpu"`, `"gpu"` or `"tpu"`. With `"auto"` the
            environment variable `COURSE_PLATFORM` may force a choice.

    Returns:
        A `DeviceSetup`; its repr is a one-line summary for the learner.

    Raises:
        DeviceSetupError: JAX already started with fewer devices than `n`,
            or the forced platform has too few devices.

    Example:
        >>> setup = setup_devices(8)
        >>> setup.devices[:2]
        ('cpu:0', 'cpu:1')
    """
    global _current
    platform = device_choice.resolve_platform(platform)
    n = device_choice.validate_count(n, platform)
    device_choice.use_jax_backend_for_keras()
    import_keras_without(UNUSED_BY_LESSONS)
    chosen = device_choice.start_jax(n, platform)
    cache = use_compilation_cache()
    flags = xla_flags()
    if flags:
        warnings.warn(f"XLA_FLAGS={flags!r}: {XLA_FLAGS_RISK}. To see what the lessons say, "
                      f"restart the kernel without it: {XLA_FLAGS_FIX}.", XlaFlagsWarning, stacklevel=2)
    _current = DeviceSetup(
        devices=tuple(device_name(d) for d in chosen),
        platform=chosen[0].platform,
        simulated=chosen[0].platform == "cpu" and n > 1,
        compilation_cache=str(cache) if cache else None,
    )
    return _current


def import_keras_without(names: tuple[str, ...]):
    """Imports Keras with `names` out of its reach, then gives them back.

    While Keras imports, each of `names` not yet loaded reads as not installed, so Keras skips what
    needs it (its scikit-learn wrappers and plotting helpers, unusable in this process: they say the
    package is missing). Afterwards the script can import either as usual.
    """
    hidden = [name for name in names if name not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))
    try:
        import keras
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return keras


def current_setup() -> DeviceSetup | None:
    """The result of the last successful `setup_devices` call, if any."""
    return _current


def device_name(device) -> str:
    """The Keras device string (`"cpu:3"`) of a JAX device."""
    return f"{device.platform}:{device.id}"


def course_devices() -> list[str]:
    """The devices meshes use by default: those `setup_devices` chose, else all Keras lists."""
    if _current is not None:
        return list(_current.devices)
    from keras import distribution

    return distribution.list_devices()


def scope_for(distribution=None):
    """Where to build or restore a model: the distribution's scope, else the course's first device.

    Without a distribution it is a no-op scope when JAX's default device is
    already the course's first one (or before `setup_devices`): JAX's default
    device, with no scope that would key its compiled programs apart.
    """
    if distribution is not None:
        return distribution.scope()
    if _current is None or _current.devices[0] == _default_device():
        # Already where JAX puts un-placed arrays: a device scope would only key JAX's compiled
        # programs apart, so a model built here and one built in a distribution's scope would each
        # compile the same initializers again.
        return contextlib.nullcontext()
    import keras

    return keras.device(_current.devices[0])


def _default_device() -> str:
    import jax

    default = jax.config.jax_default_device
    if isinstance(default, str):  # a platform's name: its first device
        default = jax.devices(default)[0]
    return device_name(default or jax.devices()[0])
