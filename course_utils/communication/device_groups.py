"""The groups of devices a collective runs over, read from its instruction, and the mesh axes they span.

XLA writes a collective's groups in one of three forms: a named mesh with the axes that group devices, an iota
(`[2,4]<=[8]`), or explicit lists (`replica_groups={{0,1},{2,3}}`; a permute's `source_target_pairs`).
"""

from __future__ import annotations

import math
import re

import numpy as np


def axes_of(groups, axis_names, mesh_shape) -> tuple[str, ...]:
    """The mesh axes along which a collective's device groups (`_groups`) vary."""
    if groups is None:
        return ()
    coords = [np.array(np.unravel_index(np.asarray(g), mesh_shape)) for g in groups if len(g) > 1]
    varying = {i for c in coords for i in range(len(mesh_shape)) if len(set(c[i])) > 1}
    return tuple(a for i, a in enumerate(axis_names) if i in varying)


def group_size(kind: str, groups, axis_names, mesh_shape, line: str) -> int:
    """How many devices take part in each group of a collective: a collective-permute's ring is the devices
    its pairs join (along the axes they vary over); the others' groups are listed."""
    if groups is None:
        return 1
    if kind == "collective-permute" or "source_target_pairs" in line:
        sizes = dict(zip(axis_names, mesh_shape))
        return math.prod(sizes[a] for a in axes_of(groups, axis_names, mesh_shape)) or 1
    return max(len(g) for g in groups)


def _iota(dims: str, perm: str | None) -> np.ndarray:
    sizes = [int(v) for v in dims.split(",")]
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    return ids.transpose([int(v) for v in perm.split(",")]) if perm else ids


def groups(line: str):
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
