"""A layout's axes read against a tensor's shape and a mesh: the mesh axes it names, and why it cannot lay
the tensor out (an axis the mesh lacks, a size that does not divide, an axis used twice).

`placements` turns a layout that can into blocks and holders; `layouts.checks`, `memory.fit` and the
checkpoints ask here first, so each says why in the same words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def layout_errors(shape: tuple[int, ...], axes: Sequence, axis_sizes: dict[str, int]) -> list[str]:
    """Why `axes` cannot lay out a tensor of `shape` on a mesh (empty: it can).

    Args:
        shape: The tensor's shape.
        axes: At most one entry per dimension: `None`, a mesh axis name, or a
            tuple of names. A shorter layout is valid: JAX leaves the missing
            trailing dimensions whole (as if padded with `None`).
        axis_sizes: Mesh axis name -> size.
    """
    if len(axes) > len(shape):
        return [
            f"The layout has {len(axes)} entries but the tensor has {len(shape)} "
            f"dimensions; give at most one entry (an axis name or None) per dimension "
            f"(missing trailing entries mean None)."
        ]
    errors, used = [], []
    for dim, entry in enumerate(axes):
        names = names_in(entry)
        unknown = [a for a in names if a not in axis_sizes]
        if unknown:
            errors.append(f"Dimension {dim} names {unknown}, not an axis of the mesh {tuple(axis_sizes)}.")
        used += names
    errors += [f"Dimension {dim} has size {size}, which does not divide into {parts} equal parts along "
               f"{'+'.join(names)}; pick a size that is a multiple of {parts} or leave this dimension unsplit (None)."
               for dim, size, names, parts in indivisible(shape, axes, axis_sizes)]
    twice = sorted({a for a in used if used.count(a) > 1})
    if twice:
        errors.append(f"Mesh axis {twice} is used for more than one dimension; each mesh axis can split one dimension.")
    return errors


def indivisible(shape: tuple[int, ...], axes: Sequence, axis_sizes: dict[str, int]) -> list[tuple]:
    """`(dimension, size, mesh axes, parts)` for each dimension whose size does not divide into its axes' parts."""
    found = []
    for dim, (size, entry) in enumerate(zip(shape, axes)):
        names = names_in(entry)
        if names and all(a in axis_sizes for a in names) and size % math.prod(axis_sizes[a] for a in names):
            found.append((dim, size, names, math.prod(axis_sizes[a] for a in names)))
    return found


def names_in(entry) -> tuple[str, ...]:
    """The mesh axes one entry of a layout names: `None` -> `()`, `"model"` -> `("model",)`, a tuple as it is."""
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def axes_used(axes: Sequence) -> tuple[str, ...]:
    """The mesh axes a layout's entries split over, in order: `(None, ("batch", "model"))` -> `("batch", "model")`.

    Each entry is `None`, an axis name, or a tuple of names (one dimension split over several axes).
    """
    return tuple(name for entry in axes for name in names_in(entry))
