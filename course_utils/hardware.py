"""Named device sets: what one accelerator computes and holds, and how fast it sends over a mesh axis.

The advisor (`advise`) turns a compiled step's FLOPs and collectives into seconds with these figures:
compute time = FLOPs per device / `flops_per_second`, and a collective's time = the bytes one device
sends with the ring algorithm (`communication.traffic.ring_sent_bytes`) / the bandwidth of the link its
mesh axis crosses (`DeviceSet.link`). Every figure names its source. Simulated CPU devices time nothing
real: these are estimates for the named hardware, as *How to Scale Your Model* makes them by hand.

Which link an axis crosses: the mesh's devices are numbered row-major, `per_node` of them to a node
(a GPU server, or a TPU slice: one interconnect); an axis whose groups stay inside one node uses
`inside`, one whose groups span nodes uses `between`. A collective over two axes takes the slower one.

Example:
    >>> h100 = device_set("8xH100-80GB")
    >>> h100.flops_per_second / h100.link((2, 4), (0,)).bytes_per_second  # the book's critical batch
    2200.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

BOOK = "How to Scale Your Model (Austin et al., 2025; jax-ml.github.io/scaling-book)"
GIB = 2**30
GB = 10**9  # the sources give memory in GB; GiB (2**30) is what the course's verdicts print


@dataclass(frozen=True)
class Link:
    """What one device can send per second into a collective over a mesh axis, and where the figure comes from.

    Attributes:
        name: The interconnect, e.g. "NVLink 4 (NVSwitch)".
        bytes_per_second: Bytes one device sends per second in a ring collective over the axis (both
            directions of its ring counted where the ring has them).
        source: Where the figure comes from, and how it was read.
        latency: Seconds a collective waits per hop of its ring, whatever its size (0: not counted).
        achieved: The bandwidth runs reach in practice, where a source gives it (None: only the peak is known).
        count: How many of the interconnect's links (or NICs) a device group sends through at once.
    """

    name: str
    bytes_per_second: float
    source: str
    latency: float = 0.0  # seconds a collective waits per hop of its ring, whatever its size
    achieved: float | None = None  # what runs reach in practice, where a source says (bytes per second)
    count: int = 1  # links (or NICs) a device group sends through at once

    @property
    def short(self) -> str:
        """The interconnect in a word, with how many of its links or NICs a device group uses at once where more
        than one: "NVLink", "InfiniBand x4", "ICI x2"."""
        return self.name.split(" ")[0] + (f" x{self.count}" if self.count > 1 else "")

    def __post_init__(self):
        _positive_number(f"Link {self.name!r}", "bytes_per_second", self.bytes_per_second)
        if not isinstance(self.latency, (int, float)) or isinstance(self.latency, bool) or \
                not 0 <= self.latency < math.inf:
            raise ValueError(f"Link {self.name!r}: latency is seconds a hop, a finite number of at least 0. "
                             f"Received: latency={self.latency!r}.")
        if self.achieved is not None:
            _positive_number(f"Link {self.name!r}", "achieved", self.achieved)
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"Link {self.name!r}: count is how many links a device group sends through, a whole "
                             f"number of at least 1. Received: count={self.count!r}.")


def _positive_number(owner: str, field_name: str, value) -> None:
    """Refuses what no real device has: a figure that is not a finite number above 0 (0, negative, NaN, inf, text)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
        raise ValueError(f"{owner}: {field_name} is a finite number above 0. Received: {field_name}={value!r}.")


@dataclass(frozen=True)
class DeviceSet:
    """A set of accelerators for the advisor: peak compute, memory per device, and the links between them.

    Attributes:
        name: e.g. "8xH100-80GB".
        chip: e.g. "NVIDIA H100 SXM".
        devices: How many devices the set has (the advisor's meshes use them all).
        flops_per_second: Peak dense bf16 FLOP/s of one device.
        memory_bytes: Memory of one device (bytes).
        inside: The link between devices of one node (a GPU server, or a TPU slice).
        per_node: Devices in one node.
        between: The link between nodes (None for a set of one node).
        kind: "gpu" or "tpu": which accelerator's program the CPU program stands for.
        source: Where the compute and memory figures come from.
        topology: For a TPU slice, its name for libtpu ("v5e:2x4"), to compile the TPU's own program
            (`advise(..., program="tpu")`); None for a GPU set.
        memory_bytes_per_second: How fast one device reads its own memory (HBM), bytes per second: what bounds
            decoding, which reads every weight and the whole KV cache for each token (None: not given).
    """

    name: str
    chip: str
    devices: int
    flops_per_second: float
    memory_bytes: float
    inside: Link
    per_node: int
    between: Link | None = None
    kind: str = "gpu"
    source: str = ""
    topology: str | None = None
    memory_bytes_per_second: float | None = None

    def __post_init__(self):
        for field_name in ("devices", "per_node"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DeviceSet {self.name!r}: {field_name} is a whole number of devices, at least 1. "
                                 f"Received: {field_name}={value!r}.")
        for field_name in ("flops_per_second", "memory_bytes", "memory_bytes_per_second"):
            if getattr(self, field_name) is not None or field_name != "memory_bytes_per_second":
                _positive_number(f"DeviceSet {self.name!r}", field_name, getattr(self, field_name))
        for field_name in ("inside", "between"):
            if not isinstance(getattr(self, field_name), Link) and (field_name == "inside" or self.between is not None):
                raise TypeError(f"DeviceSet {self.name!r}: {field_name} is a course_utils.hardware.Link(name, "
                                f"bytes_per_second, source). Received: {field_name}={getattr(self, field_name)!r}.")
        if self.devices % self.per_node:
            raise ValueError(f"DeviceSet {self.name!r}: {self.devices} devices do not make whole nodes of "
                             f"{self.per_node}. Give devices a multiple of per_node.")
        if self.devices > self.per_node and self.between is None:
            raise ValueError(f"DeviceSet {self.name!r} has {self.devices // self.per_node} nodes of {self.per_node} "
                             f"devices: give between=, the link between nodes.")
        if self.kind not in ("gpu", "tpu"):
            raise ValueError(f"DeviceSet {self.name!r}: kind is 'gpu' or 'tpu'. Received: kind={self.kind!r}.")
        if self.topology is not None and (self.kind != "tpu" or not isinstance(self.topology, str)
                                          or not re.fullmatch(r"v\w+:\d+(x\d+)*", self.topology)):
            raise ValueError(f"DeviceSet {self.name!r}: topology names a TPU slice for libtpu, like 'v5e:2x4' "
                             f"(kind='tpu'). Received: topology={self.topology!r}, kind={self.kind!r}.")
        if self.topology is not None and _chips(self.topology) != self.devices:
            raise ValueError(f"DeviceSet {self.name!r}: the slice {self.topology!r} has {_chips(self.topology)} "
                             f"chips, not {self.devices} devices.")

    @property
    def nodes(self) -> int:
        """How many nodes the devices make (a TPU slice counts as one)."""
        return self.devices // self.per_node

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    def link(self, mesh_shape: tuple[int, ...], axes: tuple[int, ...]) -> Link:
        """The link a collective over mesh axes `axes` (their positions in `mesh_shape`) crosses, as it is wired.

        Devices are numbered row-major over the mesh. Inside one node (a GPU server, or a TPU slice): `inside`; on
        a TPU slice, times the torus axes a device group spans (each brings its own links: the book's rule, so a
        mesh axis over all chips of a 2 x 4 slice has twice one axis's bandwidth). Across GPU nodes: `between` is one
        GPU's own NIC, and a group with k of its GPUs in each node crosses with k NICs at once, at most the node's
        `per_node` (its egress): a (2, 8) mesh's batch axis pairs one GPU of each node (one NIC), a (16, 1)
        mesh's batch axis has 8 in each (the node's whole egress).
        """
        if math.prod(mesh_shape) != self.devices:
            raise ValueError(f"A mesh of {self.name} uses its {self.devices} devices. Received: mesh_shape="
                             f"{tuple(mesh_shape)} ({math.prod(mesh_shape)} devices).")
        group = _first_group(mesh_shape, axes)
        if self.topology:
            spanned = _torus_axes(self.topology, group)
            return self.inside if spanned <= 1 else Link(
                f"{self.inside.name} over {spanned} torus axes", self.inside.bytes_per_second * spanned,
                f"{self.inside.source}; the group spans {spanned} torus axes, each with its links (the book's rule "
                f"for a mesh axis over several torus axes)", self.inside.latency, count=spanned)
        nodes = len({device // self.per_node for device in group})
        if nodes == 1 or self.between is None:
            return self.inside
        nics = min(len(group) // nodes, self.per_node)
        return Link(f"{self.between.name}, {nics} per node", self.between.bytes_per_second * nics,
                    f"{self.between.source}; {nics} GPU(s) of each node in each group, each sending through its own "
                    f"NIC (at most the node's {self.per_node})", self.between.latency, count=nics)


def _first_group(mesh_shape, axes) -> list[int]:
    """The devices (row-major numbers) of the group along `axes` that holds device 0; every group is alike."""
    strides = [math.prod(mesh_shape[i + 1:]) for i in range(len(mesh_shape))]
    group = [0]
    for a in axes:
        group = [d + k * strides[a] for d in group for k in range(mesh_shape[a])]
    return group


def _torus_axes(topology: str, group: list[int]) -> int:
    """How many axes of a TPU slice's torus the chips of `group` (row-major over the slice) vary along."""
    dims = [int(d) for d in topology.split(":")[1].split("x")]
    coordinates = [[(chip // math.prod(dims[i + 1:])) % dims[i] for i in range(len(dims))] for chip in group]
    return sum(len({c[i] for c in coordinates}) > 1 for i in range(len(dims)))


_NVLINK = Link("NVLink 4 (NVSwitch)", 4.5e11,
               f"{BOOK}, GPUs chapter: 18 NVLink 4 links of 25 GB/s each way, 450 GB/s leaving each H100 "
               f"(one way; about 370 GB/s is reached in practice); latency assumed, not from a source: 1 us a hop, "
               f"the book's figure for a TPU's ICI hop", latency=1e-6, achieved=3.7e11)
_INFINIBAND = Link("InfiniBand NDR (one 400 Gb/s ConnectX-7 per GPU)", 5e10,
                   f"{BOOK}, GPUs chapter: each H100 has its own 400 Gb/s NIC, 50 GB/s; the node's 8 together 400 "
                   f"GB/s; latency assumed, not from a source: 5 us a hop across nodes (NIC, PCIe and a switch)",
                   latency=5e-6)


def _h100(nodes: int) -> DeviceSet:
    name = f"{nodes}x8xH100-80GB" if nodes > 1 else "8xH100-80GB"
    return DeviceSet(name, "NVIDIA H100 SXM", 8 * nodes, 9.9e14, 80 * GB, _NVLINK, per_node=8,
                     between=_INFINIBAND if nodes > 1 else None, kind="gpu",
                     source=f"{BOOK}, GPUs chapter: 990 TFLOP/s dense bf16, 80 GB HBM3; NVIDIA's H100 datasheet: "
                            f"3.35 TB/s of HBM3 bandwidth (SXM)",
                     memory_bytes_per_second=3.35e12)


def _chips(topology: str) -> int:
    """The chips of a TPU slice named like "v5p:2x2x2"."""
    return math.prod(int(d) for d in topology.split(":")[1].split("x"))


def _tpu(name: str, chip: str, topology: str, flops: float, memory: float, one_way: float,
         wraparound: bool, hbm: float) -> DeviceSet:
    ring = "a ring with wraparound: both directions, 2 x" if wraparound else (
        "no wraparound (a slice smaller than a full torus): one direction, 1 x")
    link = Link("ICI", one_way * (2 if wraparound else 1),
                f"{BOOK}, TPUs chapter: {one_way:.2g} B/s one way per ICI link; {ring} that (the book: without "
                f"wraparound a collective typically takes twice as long); about 1 us a hop", latency=1e-6)
    devices = _chips(topology)
    return DeviceSet(name, chip, devices, flops, memory, link, per_node=devices, kind="tpu",
                     source=f"{BOOK}, TPUs chapter: {flops:.3g} bf16 FLOP/s, {memory / GB:.0f} GB HBM per chip; "
                            f"Google Cloud's TPU documentation: {hbm / GB:,.0f} GB/s of HBM bandwidth per chip",
                     topology=topology, memory_bytes_per_second=hbm)


DEVICE_SETS = {s.name: s for s in (
    _h100(1),
    _h100(2),
    _tpu("v5e-8", "TPU v5e (2x4 slice)", "v5e:2x4", 1.97e14, 16 * GB, 4.5e10, wraparound=False,
         hbm=8.19e11),
    # a v5p slice is named by its TensorCores, two to a chip; JAX sees one device per chip
    _tpu("v5p-8", "TPU v5p (2x2x1 slice, 4 chips)", "v5p:2x2x1", 4.59e14, 96 * GB, 9e10, wraparound=False,
         hbm=2.765e12),
    _tpu("v5p-16", "TPU v5p (2x2x2 slice, 8 chips)", "v5p:2x2x2", 4.59e14, 96 * GB, 9e10, wraparound=False,
         hbm=2.765e12),
    _tpu("v5p-128", "TPU v5p (4x4x4 slice, 64 chips)", "v5p:4x4x4", 4.59e14, 96 * GB, 9e10, wraparound=True,
         hbm=2.765e12),
)}


def device_set(devices) -> DeviceSet:
    """A named device set (`DEVICE_SETS`), or your own `DeviceSet` as it is.

    Example:
        >>> device_set("v5e-8").memory_bytes
        16000000000
    """
    if isinstance(devices, DeviceSet):
        return devices
    if isinstance(devices, str) and devices in DEVICE_SETS:
        return DEVICE_SETS[devices]
    raise ValueError(f"devices is one of {sorted(DEVICE_SETS)} or a course_utils.hardware.DeviceSet of your own. "
                     f"Received: devices={devices!r}.")
