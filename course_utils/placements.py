"""Who holds which block of a tensor: plain data read from JAX's sharding API.

`placement` reads a real `jax.Array` (or a Keras variable) as it lives on the
devices; `planned_placement` reads a `TensorLayout` before any array exists.
Both ask JAX (`devices_indices_map`, `shard_shape`, `addressable_shards`);
nothing here computes slices by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course_utils.devices import device_name
from course_utils.layout_axes import layout_errors, names_in

Range = tuple[int, int]  # [start, stop) along one dimension


@dataclass(frozen=True)
class Block:
    """One distinct block of a tensor and every device that holds a copy."""

    index: tuple[Range, ...]
    devices: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(stop - start for start, stop in self.index)

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(start, stop) for start, stop in self.index)


@dataclass(frozen=True)
class Placement:
    """Where every block of one tensor lives on a mesh.

    Attributes:
        shape: Global shape of the tensor.
        dtype: Element type, e.g. `"float32"`.
        shard_shape: Shape of the block each device holds.
        mesh_shape: Shape of the device mesh (`(n,)` without a named mesh).
        axis_names: Names of the mesh axes (empty without a named mesh).
        dim_axes: For each tensor dimension, the mesh axes it is split over
            (an empty tuple: the dimension is whole on every device).
        device_index: `(device, ranges)` for every device in mesh order;
            `ranges` holds one `(start, stop)` per tensor dimension.
        device_bytes: `(device, bytes)` for every device in mesh order.
        name: The variable path or a label, for titles.
    """

    shape: tuple[int, ...]
    dtype: str
    shard_shape: tuple[int, ...]
    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    dim_axes: tuple[tuple[str, ...], ...]
    device_index: tuple[tuple[str, tuple[Range, ...]], ...]
    device_bytes: tuple[tuple[str, int], ...]
    name: str = ""

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.device_index)

    @property
    def indices(self) -> dict[str, tuple[Range, ...]]:
        return dict(self.device_index)

    def slices(self, device: str) -> tuple[slice, ...]:
        """The index slices of the block `device` holds."""
        return tuple(slice(a, b) for a, b in self.indices[str(device)])

    @property
    def blocks(self) -> tuple[Block, ...]:
        """Distinct blocks in order of first appearance, with their holders."""
        holders: dict[tuple[Range, ...], list[str]] = {}
        for device, index in self.device_index:
            holders.setdefault(index, []).append(device)
        return tuple(Block(index, tuple(devs)) for index, devs in holders.items())

    @property
    def replication(self) -> int:
        """How many devices hold each block (1: no copies)."""
        return max(len(b.devices) for b in self.blocks)

    @property
    def bytes_per_device(self) -> dict[str, int]:
        return dict(self.device_bytes)

    @property
    def largest_shard_bytes(self) -> int:
        """Bytes of the largest block a device holds: what the fullest device keeps of this tensor."""
        return max(n for _, n in self.device_bytes)

    @property
    def total_bytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    @property
    def is_replicated(self) -> bool:
        """True when every device holds the whole tensor."""
        return len(self.blocks) == 1

    def __repr__(self) -> str:
        split = ", ".join("+".join(a) if a else "-" for a in self.dim_axes)
        label = f"{self.name} " if self.name else ""
        return (
            f"Placement({label}shape={self.shape}, split=({split}), "
            f"shard_shape={self.shard_shape}, blocks={len(self.blocks)}, "
            f"copies of each={self.replication}, "
            f"bytes/device={self.largest_shard_bytes})"
        )


def placement(x, *, name: str | None = None) -> Placement:
    """Reads where a real array's blocks live.

    Args:
        x: A `jax.Array` or a Keras variable (its `.value` is read).
        name: A label; defaults to the variable's path.

    Returns:
        A `Placement` read from the array's sharding and its real shards.

    Example:
        >>> placement(model.layers[0].kernel).shard_shape
        (32, 16)
    """
    value = _array_of(x, "placement", "For a shape and a TensorLayout before any array exists, "
                                       "use planned_placement(shape, layout).")
    shard_bytes = {device_name(s.device): s.data.nbytes for s in value.addressable_shards}
    label = name if name is not None else getattr(x, "path", "")
    return _from_sharding(value.shape, value.dtype, value.sharding, label, shard_bytes)


def shard_of(x, device) -> np.ndarray:
    """The block of a real array that one device holds, read from its shards.

    Args:
        x: A `jax.Array` or a Keras variable.
        device: A Keras device string such as `"cpu:6"`.

    Returns:
        The device's block as a NumPy array.
    """
    value = _array_of(x, "shard_of", "A NumPy array lives on no device: lay it out first, e.g. "
                                      "jax.device_put(x, layout.backend_layout), or index it directly.")
    shards = {device_name(s.device): s for s in value.addressable_shards}
    if str(device) not in shards:
        raise ValueError(f"Device {device!r} holds no block of this array. It lives on: {sorted(shards)}.")
    return np.asarray(shards[str(device)].data)


def _array_of(x, caller: str, hint: str):
    """The `jax.Array` behind `x` (a Keras variable's value, or `x` itself); else a TypeError with `hint`."""
    import jax

    value = getattr(x, "value", x)
    if not isinstance(value, jax.Array):
        raise TypeError(f"{caller} needs a jax.Array or a Keras variable, whose blocks live on devices. "
                        f"Received: {type(x).__name__}. {hint}")
    return value


def planned_placement(shape: Sequence[int], layout, *, dtype="float32", name: str = "") -> Placement:
    """Reads where the blocks of a tensor would live under a layout.

    Args:
        shape: The tensor's global shape.
        layout: A `keras.distribution.TensorLayout` with its device mesh, or
            a `jax.sharding.Sharding`.
        dtype: Element type, for bytes per device.
        name: A label for titles.

    Returns:
        A `Placement`, equal to `placement` of an array laid out that way.
    """
    import jax

    shape = _check_tensor_shape(shape)
    if isinstance(layout, jax.sharding.NamedSharding):
        axes, axis_sizes, sharding = tuple(layout.spec), dict(layout.mesh.shape), layout
    elif isinstance(layout, jax.sharding.Sharding):
        axes, axis_sizes, sharding = (), {}, layout
    else:
        mesh = getattr(layout, "device_mesh", None)
        if not hasattr(layout, "axes") or mesh is None:
            raise ValueError(
                f"planned_placement needs a TensorLayout that knows its mesh, "
                f"e.g. TensorLayout((None, 'model'), mesh). Received: layout={layout!r}."
            )
        axes, axis_sizes, sharding = tuple(layout.axes), dict(zip(mesh.axis_names, mesh.shape)), None
    errors = layout_errors(shape, axes, axis_sizes) if axes else []
    if errors:
        raise ValueError(f"Layout {axes} cannot split shape {shape}: " + " ".join(errors))
    if sharding is None:  # a TensorLayout: its JAX sharding is made only once the layout is known to fit
        sharding = layout.backend_layout
    return _from_sharding(shape, np.dtype(dtype), sharding, name, None)


def per_device(placements) -> dict[str, int]:
    """Bytes per device of several tensors, summed from their `Placement`s (the one sum of the course)."""
    totals: dict[str, int] = {}
    for p in placements:
        for device, n in p.device_bytes:
            totals[device] = totals.get(device, 0) + n
    return totals


def _check_tensor_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) or not isinstance(shape, Sequence) or any(
        isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in shape
    ):
        raise ValueError(
            f"shape must be a tuple of non-negative whole numbers such as (32, 64). Received: shape={shape!r}."
        )
    return tuple(int(s) for s in shape)


def _from_sharding(shape, dtype, sharding, name, shard_bytes) -> Placement:
    import jax

    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    if isinstance(sharding, jax.sharding.NamedSharding):
        ordered = list(sharding.mesh.devices.flat)
        mesh_shape = tuple(sharding.mesh.devices.shape)
        axis_names = tuple(sharding.mesh.axis_names)
        spec = tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))
        dim_axes = tuple(names_in(entry) for entry in spec)
    else:
        ordered = sorted(sharding.device_set, key=lambda d: d.id)
        mesh_shape, axis_names = (len(ordered),), ()
        dim_axes = ((),) * len(shape)
    index_map = sharding.devices_indices_map(shape)
    shard_shape = tuple(int(s) for s in sharding.shard_shape(shape))
    planned_bytes = math.prod(shard_shape) * dtype.itemsize
    device_index, device_bytes = [], []
    for device in ordered:
        key = device_name(device)
        ranges = tuple(_as_range(sl, size) for sl, size in zip(index_map[device], shape))
        device_index.append((key, ranges))
        device_bytes.append((key, int((shard_bytes or {}).get(key, planned_bytes))))
    return Placement(
        shape=shape,
        dtype=dtype.name,
        shard_shape=shard_shape,
        mesh_shape=mesh_shape,
        axis_names=axis_names,
        dim_axes=dim_axes,
        device_index=tuple(device_index),
        device_bytes=tuple(device_bytes),
        name=name,
    )


def _as_range(sl: slice, size: int) -> Range:
    start, stop, _ = sl.indices(size)
    return (start, stop)
