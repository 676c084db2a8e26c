"""The advisor's answer: one row per candidate, ranked, with the notes that say how each figure was found.

`advise` compiles and reads the candidates; `Advice` holds them timed on a device set (`timed_row`), ranks them (those
that fit first, fastest first), times them again on other hardware (`on`) or with an efficiency fitted to one
measured step (`calibrated`), and says which link each mesh axis crosses (`links`, the notes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from course_utils._table import Table
from course_utils.advice.arguments import efficiency_of
from course_utils.advice.candidates import axes_of, shape_name
from course_utils.advice.estimate import StepTime, step_time
from course_utils.advice.levers import Levers
from course_utils.advice.program import StepProgram
from course_utils.hardware import GIB, DeviceSet, Link, device_set
from course_utils.memory.fit import CANNOT, FITS, HEADROOM, NO, TIGHT  # will_it_fit's words

# The share of each GPU's memory JAX's client allocates when it starts, unless XLA_CLIENT_MEM_FRACTION says another
# (jaxlib 0.10.2's xla_client reads it; the default is the plugin's, docs.jax.dev "GPU memory allocation")
JAX_GPU_SHARE = 0.75


@dataclass(frozen=True)
class AdviceRow:
    """One candidate: its layout and mesh, what its compiled step needs and takes, or why it cannot run.

    Attributes:
        layout: The layout's name ("official map", "tensor parallel", one of yours).
        mesh_shape: (batch, model), or (replica, batch, model) for HSDP.
        program: The compiled step, read (None when the layout cannot split the model on this mesh).
        time: Its seconds on the device set (None likewise).
        verdict: "fits" (at least 10 % of the device left), "tight", "no", or "cannot split".
        problem: Why the layout cannot be used on this mesh ("" when it can).
        tokens: Tokens (or examples) one device processes per step.
        micro_steps: How many micro-batches the step runs (each timed; the memory is one micro-batch's).
    """

    layout: str
    mesh_shape: tuple[int, ...]
    program: StepProgram | None
    time: StepTime | None
    verdict: str
    problem: str = ""
    tokens: float = 0.0
    micro_steps: int = 1  # micro-batches a step runs (gradient accumulation)

    @property
    def memory_gib(self) -> float | None:
        return self.program.memory.peak / GIB if self.program else None

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens one device processes per second at the estimated step time."""
        return self.tokens / self.time.step if self.time else None


class Advice(Table):
    """The candidates ranked: those that fit (or fit tight) first, fastest first; then those that do not fit,
    then those that cannot split the model. Times are estimates for `devices`, not measurements.

    Attributes:
        devices: The `hardware.DeviceSet` the times are for.
    """

    columns = ("rank", "layout", "mesh (batch, model)", "GiB/device", "memory", "compute ms", "comm. ms",
               "step ms", "bound by", "tokens/s/device", "axes cross")
    brief_columns = ("rank", "layout", "mesh (batch, model)", "GiB/device", "memory", "step ms", "bound by")

    def __init__(self, rows, *, devices: DeviceSet, title: str, efficiency: float, program: str = "cpu",
                 empty: str = "", levers: Levers = Levers()):
        super().__init__(rows, title=title)
        self.devices, self.efficiency, self.program, self.empty, self.levers = devices, efficiency, program, empty, levers

    def cells(self, row: AdviceRow) -> list[str]:
        rank = str(self.rows.index(row) + 1)
        if row.program is None:
            return [rank, row.layout, shape_name(row.mesh_shape), "-", row.verdict, "-", "-", "-", "-", "-",
                    self.links(row.mesh_shape)]
        t = row.time
        return [rank, row.layout, shape_name(row.mesh_shape), f"{row.memory_gib:.1f}", row.verdict,
                _ms(t.compute_total), _ms(t.communication_total), _ms(t.step), t.bound, f"{row.tokens_per_second:,.0f}",
                self.links(row.mesh_shape)]

    def crossings(self, mesh_shape) -> list[tuple[str, Link]]:
        """(axis, the link it crosses on the device set) for each axis of `mesh_shape` longer than 1."""
        shape = tuple(mesh_shape)
        return [(axis, self.devices.link(shape, (i,))) for i, (axis, size) in enumerate(zip(axes_of(shape), shape))
                if size > 1]

    def links(self, mesh_shape) -> str:
        """The link each axis of `mesh_shape` longer than 1 crosses, in a word: "replica: InfiniBand, batch: NVLink"."""
        return ", ".join(f"{axis}: {link.short}" for axis, link in self.crossings(mesh_shape)) or "-"

    @property
    def best(self) -> AdviceRow:
        """The first row: the fastest candidate that fits (or the first of the ranking when none fits)."""
        if not self.rows:
            raise ValueError(f"No candidate to choose from: {self.empty}")
        return self.rows[0]

    def on(self, devices, *, efficiency: float | None = None) -> "Advice":
        """The same compiled programs timed and ranked on other hardware (nothing compiled again).

        Example:
            >>> advice.on("v5e-8")
        """
        devices = device_set(devices)
        if devices.devices != self.devices.devices:
            raise ValueError(f"The programs were compiled for {self.devices.devices} devices; {devices.name} has "
                             f"{devices.devices}. Run advise(..., devices={devices.name!r}) for it.")
        if self.program != "cpu" and devices != self.devices:
            raise ValueError(f"The programs are the {self.program.upper()}'s own, compiled for {self.devices.name}; "
                             f"{devices.name} runs other programs. Run advise(..., devices={devices.name!r}) for it.")
        efficiency = self.efficiency if efficiency is None else efficiency
        rows = [timed_row(r, devices, efficiency_of(efficiency)) for r in self.rows]
        rows.sort(key=rank_key)
        return Advice(rows, devices=devices, efficiency=efficiency, program=self.program, empty=self.empty,
                      levers=self.levers,
                      title=self.title.replace(f" on {self.devices.name},", f" on {devices.name},"))

    def calibrated(self, layout: str, mesh_shape, measured: float) -> "Advice":
        """The ranking again, its compute scaled by the one efficiency that makes candidate (`layout`, `mesh_shape`)
        take `measured` seconds a step: calibrate on the run you measured, then read the others' predictions.

        One factor, the share of peak FLOP/s the products reach (MFU), is fitted; the links keep their figures.
        A step measured faster than the candidate's roofline, or slower than its collectives allow at 0.1 % of
        peak, cannot be reached by that factor and is refused (the estimate's other terms are then wrong).

        Example:
            >>> advice.calibrated("data parallel", (8, 1), measured=0.412).best
        """
        row = self.row(layout, mesh_shape)
        if row.time is None:
            raise ValueError(f"{layout!r} on {tuple(mesh_shape)} has no timed step ({row.verdict}: {row.problem}); "
                             f"calibrate on a candidate that ran.")
        if isinstance(measured, bool) or not isinstance(measured, (int, float)) or not 0 < measured < float("inf"):
            raise ValueError(f"measured is the seconds one step of that candidate took, a number above 0. "
                             f"Received: measured={measured!r}.")
        step = lambda e: timed_row(row, self.devices, e).time.step  # noqa: E731 (falls as the efficiency rises)
        low, high = 1e-3, 1.0
        if measured < step(high) * (1 - 1e-9):
            raise ValueError(f"{measured:.4g} s is faster than the estimate at the roofline ({step(high):.4g} s at 100 % "
                             f"of peak): no efficiency reaches it. Check that the step measured is this candidate's, "
                             f"with the same batch and sequence, on {self.devices.name}.")
        if measured > step(low):
            raise ValueError(f"{measured:.4g} s is slower than the estimate at 0.1 % of peak ({step(low):.4g} s): the "
                             f"step waits for something the estimate does not count (input, host, a slower link).")
        for _ in range(60):  # bisection: the step falls as the efficiency rises
            middle = (low + high) / 2
            low, high = (middle, high) if step(middle) > measured else (low, middle)
        return self.on(self.devices, efficiency=high)

    def row(self, layout: str, mesh_shape) -> AdviceRow:
        for r in self.rows:
            if r.layout == layout and r.mesh_shape == tuple(mesh_shape):
                return r
        raise KeyError(f"No candidate {layout!r} on {tuple(mesh_shape)}. Candidates: "
                       f"{sorted({(r.layout, r.mesh_shape) for r in self.rows})}.")

    def notes(self) -> list[str]:
        if not self.rows:
            return [f"No candidate: {self.empty}"]
        lines = [self._how_estimated(), *self._which_program(), *self._gpu_allocation()]
        lines.append("The link each mesh axis crosses: " + "; ".join(
            f"{shape_name(shape)}: " + ", ".join(self._crossed(shape))
            for shape in dict.fromkeys(r.mesh_shape for r in self.rows)))
        hybrid = sorted({r.mesh_shape for r in self.rows if len(r.mesh_shape) == 3}, reverse=True)
        if hybrid:
            r = hybrid[0][0]
            lines.append(f"HSDP ({', '.join(shape_name(s) for s in hybrid)}): {r} x (b, m) is {r} replicas of a (b, m) "
                         f"(batch, model) mesh: the batch split over replica x batch, the weights split as the layout "
                         f"says within a replica and whole on each, so their gathers stay inside a replica and the "
                         f"gradients are summed across replicas.")
        lines += [f"- {r.layout} on {r.mesh_shape} {'does not fit' if r.verdict == NO else 'cannot run'}: {r.problem}"
                  for r in self.rows if r.problem]
        return lines

    def _how_estimated(self) -> str:
        """The devices the estimates are for, and how a step's time is estimated from its program."""
        d = self.devices
        peak = f"{d.flops_per_second:.3g} FLOP/s" + (f" at {self.efficiency:.0%} of it" if self.efficiency < 1 else "")
        links = f"{d.inside.name} {d.inside.bytes_per_second:.3g} B/s" + (
            f", between nodes {d.between.name} {d.between.bytes_per_second:.3g} B/s" if d.between else "")
        return (f"Estimates for {d.name} ({d.chip}: {peak}, {d.memory_bytes / GIB:.1f} GiB, {links}), not "
                f"measurements: compute = FLOPs / peak; each collective = its ring bytes / the link its axis crosses "
                f"+ its ring's hops x the link's latency; "
                f"within a pass the two overlap. bound by: which is longer in the forward or backward pass, or over "
                f"the step where collectives no pass hides (the optimizer's) wait longer than it computes.")

    def _which_program(self) -> list[str]:
        """Which compiled program the memory, FLOPs and collectives were read from, and what that program counts."""
        d = self.devices
        if self.program != "cpu":
            source = next((r.program.source for r in self.rows if r.program), f"the {self.program.upper()}'s own")
            return [f"From {source}, compiled per candidate (shape-only): memory at the step's peak and the "
                    f"collectives as the {self.program.upper()} sends them, each loop's counted once per round; "
                    f"the FLOPs from XLA's CPU program."]
        corrected = [r.program.corrected for r in self.rows if r.program]
        hint = "; program='tpu' reads the TPU's own" if d.topology else ""
        lines = [f"From XLA's CPU program, compiled per candidate (shape-only): memory at the step's peak, "
                 f"FLOPs, collectives; bytes counted as a {d.kind.upper()} sends them (bf16 where the CPU widened "
                 f"bf16 values to f32, reduce-scatters for gradients kept as shards): up to "
                 f"{max(corrected, default=0):.0%} fewer than the CPU program's. The memory is the CPU "
                 f"program's peak, which computes bf16 products in f32: an accelerator's program can need "
                 f"less{hint}."]
        if self.levers.memory and d.kind == "gpu":
            lines.append("With the levers, each block's activations are the CPU program's, their types narrowed: "
                         "about twice what the GPU's own program keeps (64 against 31 bytes a token and unit "
                         "of width for a Llama block; `advice.levers`). program='gpu' reads the GPU's own (make "
                         "gpu-targets): a verdict of 'no' here may fit there.")
        return lines

    def _gpu_allocation(self) -> list[str]:
        """On GPUs, what a JAX run of a step that fits needs besides the memory: JAX's client takes a share of each
        GPU's memory when it starts (jaxlib 0.10, docs.jax.dev "GPU memory allocation"), 75 % unless told."""
        d = self.devices
        over = [r for r in self.rows if r.verdict in (FITS, TIGHT)
                and r.program.memory.peak > JAX_GPU_SHARE * d.memory_bytes] if d.kind == "gpu" else []
        if not over:
            return []
        named = ", ".join(f"{r.layout} on {shape_name(r.mesh_shape)}" for r in over[:3]) + (
            f" and {len(over) - 3} more" if len(over) > 3 else "")
        need = math.ceil(round(100 * max(r.program.memory.peak for r in over) / d.memory_bytes, 6)) / 100
        return [f"JAX takes {JAX_GPU_SHARE:.0%} of a GPU's memory when it starts: a step over "
                f"{JAX_GPU_SHARE * d.memory_bytes / GIB:.1f} GiB ({named}) runs with XLA_CLIENT_MEM_FRACTION set to "
                f"{need:.2f} or more before JAX starts (XLA_PYTHON_CLIENT_MEM_FRACTION in older code). XLA's GPU "
                f"compiler also recomputes on its own some of what a program holds beyond about three quarters of the "
                f"memory (less its inputs and outputs; it logs 'Can't reduce memory use below'), at a cost the "
                f"estimate does not count."]

    def _crossed(self, shape) -> list[str]:
        """'batch over NVLink 4 (NVSwitch), 4.5e+11 B/s' for each axis of `shape` longer than 1."""
        return [f"{axis} over {link.name}, {link.bytes_per_second:.3g} B/s" for axis, link in self.crossings(shape)] \
            or ["one device, nothing crossed"]


def _ms(seconds: float) -> str:
    """Milliseconds to three significant figures: 113, 0.612, 0.00871."""
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:#.3g}".rstrip(".")


def timed_row(row: AdviceRow, devices: DeviceSet, efficiency: float) -> AdviceRow:
    """`row` with its step timed on `devices` and its memory judged against theirs."""
    if row.program is None:
        return row
    time = step_time(row.program, devices, row.mesh_shape, axes_of(row.mesh_shape), efficiency=efficiency,
                     latency=True).times(row.micro_steps)
    peak = row.program.memory.peak
    verdict = FITS if peak <= (1 - HEADROOM) * devices.memory_bytes else TIGHT if peak <= devices.memory_bytes else NO
    return replace(row, time=time, verdict=verdict)


def rank_key(row: AdviceRow) -> tuple:
    order = {FITS: 0, TIGHT: 0, NO: 1, CANNOT: 2}[row.verdict]
    # a step the TPU's compiler refused ("no", nothing timed) after the timed ones that do not fit either
    return order, row.time is None, row.time.step if row.time else 0.0
