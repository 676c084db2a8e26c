"""Which process owns each device of a mesh: planned from the global device order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ProcessOwnership:
    """Which process owns each device of a mesh (planned: process p owns the p-th block).

    Attributes:
        mesh_shape: The mesh's shape, e.g. `(2, 4)`.
        axis_names: The mesh's axis names.
        owner: For each mesh position, the owning process (nested tuples).
        position: For each mesh position, the device's place in the global device list.
    """

    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    owner: tuple
    position: tuple

    def devices_of(self, process: int) -> tuple[int, ...]:
        """Global device positions owned by `process`."""
        owners = np.asarray(self.owner).ravel()
        return tuple(int(i) for i in np.asarray(self.position).ravel()[owners == process])


def process_ownership(mesh_shape: tuple[int, ...], *, processes: int,
                      axis_names: tuple[str, ...] = ("data", "model")) -> ProcessOwnership:
    """Plans which process owns each device of a mesh laid over `jax.devices()` order.

    Example:
        >>> process_ownership((2, 4), processes=2).owner
        ((0, 0, 0, 0), (1, 1, 1, 1))
    """
    mesh_shape = tuple(int(n) for n in mesh_shape)
    total = int(np.prod(mesh_shape))
    if processes < 1 or total % processes:
        raise ValueError(f"A mesh of shape {mesh_shape} has {total} devices: they do not split over "
                         f"{processes} processes. Received: processes={processes}.")
    position = np.arange(total).reshape(mesh_shape)
    owner = position // (total // processes)
    return ProcessOwnership(mesh_shape, tuple(axis_names), _tuples(owner),
                            _tuples(position))


def _tuples(grid: np.ndarray) -> tuple:
    return tuple(_tuples(row) for row in grid) if grid.ndim > 1 else tuple(int(v) for v in grid)
