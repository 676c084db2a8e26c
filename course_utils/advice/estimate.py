"""Seconds from a compiled step on named hardware: compute, communication, and which one bounds the step.

Compute: the step's FLOPs per device over the device's peak (`hardware.DeviceSet.flops_per_second`),
a third in the forward pass and two thirds in the backward pass (each product of the forward pass is two
in the backward pass: *How to Scale Your Model*'s 2·N·tokens and 4·N·tokens). Communication: each
collective's ring bytes per device (`program.Transfer.sent`) over the link its mesh axes cross
(`DeviceSet.link`, the network as it is wired), plus its latency: its ring's hops x the link's latency a hop
(`hops`). Within a pass the two overlap (XLA runs a collective while the previous product
computes, as the book's rooflines assume); what a pass sends beyond its compute is exposed, and the
collectives of no pass (the optimizer's) are added whole. A step is communication-bound when the
collectives of its forward or its backward pass take longer than that pass's compute.

Where this is wrong: real overlap is partial (kernels, launch latency, a collective waiting on the product
that feeds it); peak FLOP/s are never reached (model FLOPs utilisation, MFU, is 30-60 % on good runs:
`efficiency` scales the peak); the link figures are one-way peaks.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils.advice.program import StepProgram
from course_utils.hardware import DeviceSet

COMPUTE_SHARE = {"forward": 1 / 3, "backward": 2 / 3}


@dataclass(frozen=True)
class StepTime:
    """Seconds of one training step on one device, by pass.

    Attributes:
        compute: Seconds of compute in the forward and the backward pass.
        communication: Seconds of collectives in the forward pass, the backward pass and "other".
    """

    compute: dict[str, float]
    communication: dict[str, float]

    @property
    def step(self) -> float:
        """The step's seconds: each pass as long as the longer of its compute and its collectives, plus the rest."""
        overlapped = sum(max(self.compute[p], self.communication.get(p, 0.0)) for p in COMPUTE_SHARE)
        return overlapped + self.communication.get("other", 0.0)

    def times(self, n: int) -> "StepTime":
        """The same step run `n` times (micro-batches: each micro-step computes and sends as the step does)."""
        return StepTime({p: v * n for p, v in self.compute.items()}, {p: v * n for p, v in self.communication.items()})

    @property
    def compute_total(self) -> float:
        return sum(self.compute.values())

    @property
    def communication_total(self) -> float:
        return sum(self.communication.values())

    @property
    def exposed(self) -> float:
        """Seconds of communication the compute does not hide."""
        return self.step - self.compute_total

    @property
    def bound(self) -> str:
        """"communication" when the collectives of the forward or the backward pass take longer than its
        compute (the book's T_comms > T_math, pass by pass), or when the step waits on collectives no pass hides
        (the optimizer's: ZeRO's gathers of the updated weights) longer than it computes; else "compute"."""
        late = any(self.communication.get(p, 0.0) > self.compute[p] for p in COMPUTE_SHARE)
        return "communication" if late or self.exposed > self.compute_total else "compute"


def step_time(program: StepProgram, devices: DeviceSet, mesh_shape: tuple[int, ...], axis_names: tuple[str, ...],
              *, efficiency: float = 1.0, latency: bool = False) -> StepTime:
    """The seconds one step takes on `devices` laid out as `mesh_shape` (axes `axis_names`).

    Args:
        program: The compiled step, read (`program.read_step`).
        devices: The hardware (`hardware.device_set`).
        mesh_shape, axis_names: The mesh the step was compiled for.
        efficiency: The share of peak FLOP/s the products reach (1.0: the roofline; 0.4: 40 % MFU).
        latency: Also count each collective's latency, its ring's hops x its link's latency a hop (the advisor
            does; the book's two clocks, which lesson 10 draws, count bandwidth alone).
    """
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency is the share of peak FLOP/s reached, above 0 and at most 1. "
                         f"Received: efficiency={efficiency!r}.")
    flops_per_second = devices.flops_per_second * efficiency
    compute = {p: program.flops * share / flops_per_second for p, share in COMPUTE_SHARE.items()}
    compute["backward"] += program.recomputed / flops_per_second  # a rematerialised block's forward, again
    communication = {"forward": 0.0, "backward": 0.0, "other": 0.0}
    for transfer in program.transfers:
        positions = tuple(axis_names.index(a) for a in transfer.axes)
        link = devices.link(tuple(mesh_shape), positions)
        communication[transfer.pass_] += transfer.sent / link.bytes_per_second
        if latency:
            communication[transfer.pass_] += transfer.count * hops(transfer.kind, transfer.group_size) * link.latency
    return StepTime(compute, communication)


def hops(kind: str, devices: int) -> int:
    """The steps one collective's ring takes, each waiting its link's latency: an all-reduce goes round twice (a
    reduce-scatter, then an all-gather), a permute one hop."""
    if devices <= 1:
        return 0
    return 1 if kind == "collective-permute" else 2 * (devices - 1) if kind == "all-reduce" else devices - 1


def crossover(points: list[tuple[float, float, float]]) -> float | None:
    """Where compute and communication take as long, from (x, compute, communication) at two or more x: each
    line through the first and last point (both grow linearly with the batch); None when they never cross."""
    (x0, c0, m0), (x1, c1, m1) = points[0], points[-1]
    compute_slope, comm_slope = (c1 - c0) / (x1 - x0), (m1 - m0) / (x1 - x0)
    if compute_slope == comm_slope:
        return None
    x = x0 + (m0 - c0) / (compute_slope - comm_slope)
    return x if x > 0 else None
