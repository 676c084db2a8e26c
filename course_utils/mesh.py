"""Building, checking and describing device meshes."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course_utils._table import Table
from course_utils.devices import course_devices, device_name
from course_utils.guards import require_mesh


MAX_DEVICES = 2**40  # more than any machine has; the shapes of up to this many are listed at once
MAX_SHAPES = 10_000  # a list longer than this is no list to read


def mesh_shapes(n_devices: int, ndim: int = 2) -> list[tuple[int, ...]]:
    """Every way to arrange `n_devices` as an `ndim`-dimensional grid.

    Args:
        n_devices: Number of devices, at most `MAX_DEVICES`.
        ndim: Number of mesh axes.

    Returns:
        The shapes whose sizes multiply to `n_devices`, in increasing order (at most `MAX_SHAPES`).

    Example:
        >>> mesh_shapes(8)
        [(1, 8), (2, 4), (4, 2), (8, 1)]
    """
    for name, value in (("n_devices", n_devices), ("ndim", ndim)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(
                f"mesh_shapes needs positive whole numbers. Received: {name}={value!r}."
            )
    if n_devices > MAX_DEVICES:
        raise ValueError(f"Received: n_devices={n_devices}, more devices than any machine has. "
                         f"Ask for at most 2**40, e.g. mesh_shapes(8) for the course's 8 devices.")
    powers = _prime_powers(int(n_devices))
    count = math.prod(math.comb(e + ndim - 1, ndim - 1) for e in powers.values())
    if count > MAX_SHAPES:
        raise ValueError(f"Received: n_devices={n_devices}, ndim={ndim}: that makes {count:,} shapes, too many to "
                         f"list (at most {MAX_SHAPES:,}). Ask for fewer axes: a mesh rarely has more than 4.")
    divisors = sorted(math.prod(p**k for p, k in zip(powers, ks))
                      for ks in itertools.product(*(range(e + 1) for e in powers.values())))
    return _shapes(int(n_devices), int(ndim), divisors)


def _prime_powers(n: int) -> dict[int, int]:
    """`n`'s prime factors and their powers: 12 -> {2: 2, 3: 1}."""
    powers, p = {}, 2
    while p * p <= n:
        while n % p == 0:
            powers[p], n = powers.get(p, 0) + 1, n // p
        p += 1 if p == 2 else 2
    if n > 1:
        powers[n] = powers.get(n, 0) + 1
    return powers


def _shapes(n: int, ndim: int, divisors: list[int]) -> list[tuple[int, ...]]:
    """The shapes of `ndim` sizes that multiply to `n`, from the sorted divisors of a multiple of `n`."""
    if ndim == 1 or n == 1:
        return [(n,) + (1,) * (ndim - 1)]
    return [(first, *rest) for first in divisors if n % first == 0
            for rest in _shapes(n // first, ndim - 1, divisors)]


def make_mesh(shape: Sequence[int], axis_names: Sequence[str], *, devices=None):
    """Builds a `keras.distribution.DeviceMesh`, checking the input first.

    Args:
        shape: Size of each mesh axis, e.g. `(2, 4)`; the string `"2x4"`
            means the same.
        axis_names: One name per axis, e.g. `("data", "model")`.
        devices: Distinct devices to lay out, in order (Keras device
            strings such as `"cpu:3"`, or JAX devices). Defaults to those
            chosen by `setup_devices`.

    Returns:
        A real `keras.distribution.DeviceMesh`.

    Example:
        >>> mesh = make_mesh((2, 4), ("data", "model"))
        >>> mesh.devices[1, 0]
        'cpu:4'
    """
    from keras import distribution

    shape = _check_shape(_parse_shape_string(shape))
    axis_names = _check_axis_names(axis_names, shape)
    devices = course_devices() if devices is None else _check_devices(devices)
    if math.prod(shape) != len(devices):
        valid = ", ".join(str(s) for s in mesh_shapes(len(devices), len(shape)))
        raise ValueError(
            f"A mesh of shape {shape} needs {math.prod(shape)} devices, but "
            f"{len(devices)} were given. Received: shape={shape} for "
            f"{len(devices)} devices. Valid {len(shape)}-D shapes: {valid}."
        )
    mesh = distribution.DeviceMesh(shape, axis_names, devices=devices)
    try:
        mesh.backend_mesh  # Keras finds each named device now, not at the first layout
    except (ValueError, RuntimeError) as error:
        raise ValueError(
            f"make_mesh got a device this process does not have ({error}). Received: devices={devices}. "
            f"Available: {_available_devices()}. Leave devices out to use the course's devices."
        ) from error
    return mesh


def _parse_shape_string(shape):
    """`"2x4"` -> `(2, 4)`, `"8"` -> `(8,)`; anything else is returned unchanged."""
    if not isinstance(shape, str):
        return shape
    parts = [p.strip() for p in shape.lower().replace("×", "x").replace("*", "x").split("x")]
    if not all(p.isdigit() for p in parts):
        raise ValueError(
            f"shape must be a tuple of axis sizes such as (2, 4), or a string such as '2x4'. "
            f"Received: shape={shape!r}. Write for example make_mesh((2, 4), ('data', 'model'))."
        )
    return tuple(int(p) for p in parts)


def _check_devices(devices) -> list[str]:
    """Keras device strings for `devices` (strings or JAX devices), each named once."""
    if isinstance(devices, str) or not isinstance(devices, Sequence):
        raise ValueError(
            f"devices must be a list of device names such as ['cpu:0', 'cpu:1']. Received: devices={devices!r}."
        )
    names = [device_name(d) if hasattr(d, "platform") and hasattr(d, "id") else str(d) for d in devices]
    repeated = sorted({d for d in names if names.count(d) > 1})
    if repeated:
        counts = ", ".join(f"{d!r} {names.count(d)} times" for d in repeated)
        raise ValueError(
            f"Every device may appear only once in a mesh; a mesh of copies of one device would split "
            f"nothing. Received: devices={names} ({counts}). Use distinct devices, e.g. "
            f"current_setup().devices[:{len(names)}], or leave devices out."
        )
    return names


def _available_devices() -> list[str]:
    import jax

    return [device_name(d) for d in jax.devices()] + [
        device_name(d) for d in jax.devices("cpu") if jax.default_backend() != "cpu"]


def _check_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) or not isinstance(shape, Sequence):
        raise ValueError(
            f"shape must be a tuple of axis sizes such as (2, 4) or (8,). "
            f"Received: shape={shape!r}."
        )
    if len(shape) == 0:
        raise ValueError("shape must have at least one axis. Received: shape=().")
    bad = [s for s in shape if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1]
    if bad:
        raise ValueError(
            f"Every mesh axis size must be a positive whole number. "
            f"Received: shape={tuple(shape)!r}; not valid: {bad}."
        )
    return tuple(int(s) for s in shape)


def _check_axis_names(axis_names, shape: tuple[int, ...]) -> tuple[str, ...]:
    if isinstance(axis_names, str) or not isinstance(axis_names, Sequence):
        raise ValueError(
            f"axis_names must be a tuple of names, one per axis, such as "
            f"('data', 'model'); a single string is not. Received: "
            f"axis_names={axis_names!r}. For one axis write ({axis_names!r},)."
        )
    names = tuple(axis_names)
    if len(names) != len(shape):
        raise ValueError(
            f"A mesh needs one name per axis. Received: shape={shape} "
            f"({len(shape)} axes) with axis_names={names} ({len(names)} names)."
        )
    if any(not isinstance(a, str) or not a.strip() for a in names):
        raise ValueError(
            f"Every axis name must be a non-empty string. Received: axis_names={names}."
        )
    duplicated = sorted({a for a in names if names.count(a) > 1})
    if duplicated:
        raise ValueError(
            f"Axis names must be distinct; {duplicated} appear more than once. "
            f"Received: axis_names={names}."
        )
    return names


@dataclass(frozen=True)
class MeshCell:
    """One device of a mesh and its coordinate along every axis."""

    coordinate: tuple[int, ...]
    device: str


class MeshTable(Table):
    """Mesh coordinate -> device, one row per device in mesh order."""

    def __init__(self, rows, *, axis_names: tuple[str, ...], shape: tuple[int, ...]):
        self.axis_names = axis_names
        self.shape = shape
        self.columns = [*axis_names, "device"]
        super().__init__(rows, title=f"DeviceMesh shape={shape}, axis_names={axis_names}")

    def cells(self, row: MeshCell) -> list[str]:
        return [*map(str, row.coordinate), row.device]

    def device_at(self, *coordinate: int) -> str:
        """The device at a mesh coordinate, e.g. `table.device_at(1, 0)`."""
        return next(r.device for r in self.rows if r.coordinate == coordinate)


def describe_mesh(mesh) -> MeshTable:
    """Tabulates which device sits at each coordinate of a `DeviceMesh`.

    Args:
        mesh: A `keras.distribution.DeviceMesh`.

    Returns:
        A `MeshTable`; `.rows` holds a `MeshCell` per device.
    """
    require_mesh(mesh, "describe_mesh")
    devices = np.asarray(mesh.devices)
    rows = [MeshCell(tuple(int(i) for i in idx), str(devices[idx])) for idx in np.ndindex(devices.shape)]
    return MeshTable(rows, axis_names=tuple(mesh.axis_names), shape=tuple(mesh.shape))


def describe_distribution(distribution) -> str:
    """A short name for a distribution: "DataParallel (8,) ('data',)"."""
    if distribution is None:
        return "single device"
    mesh = distribution.device_mesh
    return f"{type(distribution).__name__} {tuple(mesh.shape)} {tuple(mesh.axis_names)}"
