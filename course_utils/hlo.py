"""Collectives in compiled XLA programs, read from the program's text.

`jax.jit(f).lower(...).compile().as_text()` lists every collective the SPMD
partitioner inserted, with the groups of devices it runs over. This module
turns those lines into plain data: kind, mesh axes, count and bytes.

Derived in notebook 02, which counts the collectives of a compiled gradient
by hand; `communication_report` uses this version.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class Collective:
    """One kind of collective over some mesh axes, summed over the compiled step."""

    kind: str
    axes: tuple[str, ...]
    count: int
    bytes: int
    source: str  # "compiled" or the reason it is expected


_OP = re.compile(r"=\s*(\(.*?\)|[a-z0-9]+\[[0-9,]*\](?:\{[^}]*\})?)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_ARRAY = re.compile(r"([a-z]+[0-9]*)\[([0-9,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
          "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}


def parse_collectives(hlo: str, axis_names: tuple[str, ...], mesh_shape: tuple[int, ...]) -> list[Collective]:
    """Collectives in compiled HLO text, grouped by kind and mesh axes."""
    found: dict[tuple, list[int]] = {}
    for line in hlo.splitlines():
        match = _OP.search(line)
        if not match:
            continue
        result, kind = match.groups()
        size = sum(_BYTES.get(t, 4) * math.prod(int(d) for d in dims.split(",") if d)
                   for t, dims in _ARRAY.findall(result))
        axes = _axes_of(line, axis_names, mesh_shape)
        entry = found.setdefault((kind, axes), [0, 0])
        entry[0] += 1
        entry[1] += size
    return [Collective(kind, axes, n, size, "compiled") for (kind, axes), (n, size) in found.items()]


def _axes_of(line: str, axis_names, mesh_shape) -> tuple[str, ...]:
    """The mesh axes along which a collective's device groups vary."""
    groups = _groups(line)
    if groups is None:
        return ()
    coords = [np.array(np.unravel_index(np.asarray(g), mesh_shape)) for g in groups if len(g) > 1]
    varying = {i for c in coords for i in range(len(mesh_shape)) if len(set(c[i])) > 1}
    return tuple(a for i, a in enumerate(axis_names) if i in varying)


def _iota(dims: str, perm: str | None) -> np.ndarray:
    sizes = [int(v) for v in dims.split(",")]
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    return ids.transpose([int(v) for v in perm.split(",")]) if perm else ids


def _groups(line: str):
    """Device groups of a collective, as lists of positions in the mesh's device order.

    XLA writes them in one of three forms: a named mesh with the axes that
    group devices (`mesh['axis_0'=2,'axis_1'=4] {'axis_0'}`, optionally with
    `device_ids=([2,4]T(1,0))`), an iota (`[2,4]<=[8]`), or explicit lists.
    """
    named = re.search(r"replica_groups=mesh\[([^\]]*)\](?:,\s*device_ids=\(\[([0-9,]+)\](?:T\(([0-9,]+)\))?\))?"
                      r"\s*\{([^}]*)\}", line)
    if named:
        sizes = [int(v) for v in re.findall(r"=(\d+)", named.group(1))]
        ids = (_iota(named.group(2), named.group(3)) if named.group(2) else np.arange(math.prod(sizes)))
        ids = ids.reshape(sizes)
        chosen = [int(i) for i in re.findall(r"'axis_(\d+)'", named.group(4))]
        rest = [i for i in range(len(sizes)) if i not in chosen]
        return ids.transpose(rest + chosen).reshape(-1, math.prod(sizes[i] for i in chosen)).tolist()
    iota = re.search(r"replica_groups=\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", line)
    if iota:
        groups = int(iota.group(1).split(",")[0])
        return _iota(iota.group(2), iota.group(3)).reshape(groups, -1).tolist()
    explicit = re.search(r"(?:replica_groups|source_target_pairs)=\{(\{[0-9,{} ]*\})\}", line)
    if explicit:
        return [[int(v) for v in g.split(",") if v] for g in re.findall(r"\{([0-9,]*)\}", explicit.group(1))]
    return None
