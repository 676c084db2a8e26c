"""Which mesh and layout for my model on my devices? Every candidate compiled, read, timed and ranked.

`advise(model, devices=..., batch=..., seq=...)` compiles one training step of the model under every
candidate (`candidates`: each mesh shape of the device count x each layout that applies), shape-only,
and reads each program (`program.read_step`): the memory a device needs at the step's peak, its FLOPs
and its collectives. For a TPU slice, `program="tpu"` reads the TPU's own program instead (`tpu`, with
libtpu installed), the FLOPs still from the CPU program. The named hardware (`hardware`) turns those into
seconds (`estimate.step_time`), and the candidates are ranked: those that fit first, fastest first.

Derived in lesson 10, which draws one candidate's roofline by hand first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from course_utils._table import Table
from course_utils.advice.candidates import MESH_AXES, Candidate, candidates, mesh_shapes as every_shape
from course_utils.advice.arguments import (checked_layouts, checked_shapes, efficiency_of, enough_devices, fsdp_run_of,
                                           levers_of, model_of, target_of, whole_number)
from course_utils.advice.estimate import StepTime, step_time
from course_utils.advice.levers import Levers
from course_utils.advice.program import StepProgram
from course_utils.advice.steps import Steps
from course_utils.advice.own_program import OwnProgramOutOfMemory
from course_utils.hardware import GIB, DeviceSet, device_set
from course_utils.memory.fit import CANNOT, FITS, HEADROOM, NO, POLICIES, TIGHT, cannot_split  # will_it_fit's words


@dataclass(frozen=True)
class AdviceRow:
    """One candidate: its layout and mesh, what its compiled step needs and takes, or why it cannot run.

    Attributes:
        layout: The layout's name ("official map", "tensor parallel", one of yours).
        mesh_shape: (batch, model).
        program: The compiled step, read (None when the layout cannot split the model on this mesh).
        time: Its seconds on the device set (None likewise).
        verdict: "fits" (at least 10 % of the device left), "tight", "no", or "cannot split".
        problem: Why the layout cannot be used on this mesh ("" when it can).
        tokens: Tokens (or examples) one device processes per step.
        micro_steps: How many micro-batches the step runs (each timed; the memory is one micro-batch's).
    """

    layout: str
    mesh_shape: tuple[int, int]
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
               "step ms", "bound by", "tokens/s/device")
    brief_columns = ("rank", "layout", "mesh (batch, model)", "GiB/device", "memory", "step ms", "bound by")

    def __init__(self, rows, *, devices: DeviceSet, title: str, efficiency: float, program: str = "cpu",
                 empty: str = "", levers: Levers = Levers()):
        super().__init__(rows, title=title)
        self.devices, self.efficiency, self.program, self.empty, self.levers = devices, efficiency, program, empty, levers

    def cells(self, row: AdviceRow) -> list[str]:
        rank = str(self.rows.index(row) + 1)
        if row.program is None:
            return [rank, row.layout, str(row.mesh_shape), "-", row.verdict, "-", "-", "-", "-", "-"]
        t = row.time
        return [rank, row.layout, str(row.mesh_shape), f"{row.memory_gib:.1f}", row.verdict,
                _ms(t.compute_total), _ms(t.communication_total), _ms(t.step), t.bound, f"{row.tokens_per_second:,.0f}"]

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
        rows = [_timed(r, devices, efficiency_of(efficiency)) for r in self.rows]
        rows.sort(key=_rank)
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
        step = lambda e: _timed(row, self.devices, e).time.step  # noqa: E731 (falls as the efficiency rises)
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
        d = self.devices
        peak = f"{d.flops_per_second:.3g} FLOP/s" + (f" at {self.efficiency:.0%} of it" if self.efficiency < 1 else "")
        links = f"{d.inside.name} {d.inside.bytes_per_second:.3g} B/s" + (
            f", between nodes {d.between.name} {d.between.bytes_per_second:.3g} B/s" if d.between else "")
        corrected = [r.program.corrected for r in self.rows if r.program]
        lines = [f"Estimates for {d.name} ({d.chip}: {peak}, {d.memory_bytes / GIB:.1f} GiB, {links}), not "
                 f"measurements: compute = FLOPs / peak; each collective = its ring bytes / the link its axis crosses "
                 f"+ its ring's hops x the link's latency; "
                 f"within a pass the two overlap. bound by: which is longer in the forward or backward pass."]
        if self.program != "cpu":
            source = next((r.program.source for r in self.rows if r.program), f"the {self.program.upper()}'s own")
            lines.append(f"From {source}, compiled per candidate (shape-only): memory at the step's peak and the "
                         f"collectives as the {self.program.upper()} sends them, each loop's counted once per round; "
                         f"the FLOPs from XLA's CPU program.")
        else:
            hint = "; program='tpu' reads the TPU's own" if d.topology else ""
            lines.append(f"From XLA's CPU program, compiled per candidate (shape-only): memory at the step's peak, "
                         f"FLOPs, collectives; bytes counted as a {d.kind.upper()} sends them (bf16 where the CPU widened "
                         f"bf16 values to f32, reduce-scatters for gradients kept as shards): up to "
                         f"{max(corrected, default=0):.0%} fewer than the CPU program's. The memory is the CPU "
                         f"program's peak, which computes bf16 products in f32: an accelerator's program can need "
                         f"less{hint}.")
        lines.append("The link each mesh axis crosses: " + "; ".join(
            f"{shape}: " + ", ".join(self._crossed(shape)) for shape in dict.fromkeys(r.mesh_shape for r in self.rows)))
        lines += [f"- {r.layout} on {r.mesh_shape} {'does not fit' if r.verdict == NO else 'cannot run'}: {r.problem}"
                  for r in self.rows if r.problem]
        return lines

    def _crossed(self, shape) -> list[str]:
        """'batch over NVLink 4 (NVSwitch), 4.5e+11 B/s' for each axis of `shape` longer than 1."""
        crossed = []
        for position, (axis, size) in enumerate(zip(MESH_AXES, shape)):
            if size > 1:
                link = self.devices.link(tuple(shape), (position,))
                crossed.append(f"{axis} over {link.name}, {link.bytes_per_second:.3g} B/s")
        return crossed or ["one device, nothing crossed"]


def _ms(seconds: float) -> str:
    """Milliseconds to three significant figures: 113, 0.612, 0.00871."""
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:#.3g}".rstrip(".")


def advise(model, *, devices, batch: int, seq: int | None = None, dtype: str = "mixed_bfloat16",
           layouts: dict | None = None, mesh_shapes=None, efficiency: float = 1.0, program: str = "cpu",
           attention: str = "as compiled", remat: bool = False, micro_batch: int | None = None,
           regather: bool = True, reduce_dtype: str = "float32") -> Advice:
    """Every mesh shape x layout for `model` on `devices`, compiled, timed and ranked.

    Args:
        model: A keras-hub preset name ("llama3_8b_en", see `PRESETS`), a keras-hub backbone (real or
            shape-only, `abstract_model`), or a compiled Keras model.
        devices: A named device set ("8xH100-80GB", "v5e-8", see `hardware.DEVICE_SETS`) or your own
            `hardware.DeviceSet`. The course's simulated devices must be as many (`setup_devices(n)`).
        batch: The global batch: sequences for a backbone, examples for another model.
        seq: Tokens per sequence (a backbone only).
        dtype: The dtype policy a preset is built in, one of `POLICIES`.
        layouts: Your own layouts, `{name: rules or function mesh -> LayoutMap}`, tried on every shape.
        mesh_shapes: The (batch, model) shapes to try; by default every one of the device count.
        efficiency: The share of peak FLOP/s the products reach (1.0: the roofline).
        program: "cpu": XLA's CPU program, its bytes corrected for the accelerator (`program`). "tpu", for a TPU
            slice (`DeviceSet.topology`): the TPU's own program, compiled by libtpu (`make tpu-targets`; `tpu`),
            for memory and collectives; slower to compile (a 7B block about 25 s). "gpu", for an H100 set: the
            GPU's own program, compiled by XLA's GPU compiler through JAX's CUDA plugin (`make gpu-targets`; `gpu`).
        attention: "as compiled" (XLA's CPU program keeps every score) or "fused" (no score kept, as a fused
            kernel runs attention on GPUs and TPUs; `levers`).
        remat: Rematerialise each block: keep its input, recompute the rest in the backward pass (`levers`).
        micro_batch: Run the batch as micro-batches of this many rows (gradient accumulation): memory at the
            micro-batch, every micro-step timed.
        regather: FSDP as PyTorch runs it (ZeRO-3): each weight gathered in the forward pass is gathered again in
            the backward pass (XLA's CPU program keeps it instead); False counts the program's gathers alone.
        reduce_dtype: The type gradients are summed in over the batch axis: "float32" (FSDP2's and torchtitan's),
            "bfloat16", or "as computed" (the type the program computed them in).

    Example:
        >>> advise("gemma_7b_en", devices="8xH100-80GB", batch=16, seq=2048)
        >>> advise("llama3_8b_en", devices="8xH100-80GB", batch=16, seq=8192, attention="fused", remat=True,
        ...        micro_batch=8)
        >>> advise("llama3_8b_en", devices="v5e-8", batch=8, seq=1024, program="tpu")
    """
    devices = device_set(devices)
    if dtype not in POLICIES:
        raise ValueError(f"dtype must be one of {POLICIES}. Received: dtype={dtype!r}.")
    whole_number("batch", batch, "the global batch")
    efficiency = efficiency_of(efficiency)
    layouts = checked_layouts(layouts)
    built, language = model_of(model, dtype)
    if language:
        whole_number("seq", seq, "the tokens per sequence (e.g. seq=2048)", tokens=batch)
    levers = levers_of(attention, remat, micro_batch, batch=batch, seq=seq, language=language, program=program)
    fsdp = fsdp_run_of(regather, reduce_dtype)
    enough_devices(devices)
    shapes = checked_shapes(mesh_shapes, devices.devices)
    target = target_of(program, devices)
    found = candidates(built, devices.devices, layouts, shapes)
    steps = Steps(built, batch, seq, language, levers, fsdp)
    rows = [_row(built, steps, c, devices, batch, seq, efficiency, target) for c in found]
    rows.sort(key=_rank)
    what = f"{batch} x {seq} tokens" if language else f"a batch of {batch}"
    empty = "" if rows else (f"no layout applies to {getattr(built, 'name', 'this model')} on the mesh shapes "
                             f"{shapes or every_shape(devices.devices)}. Try mesh_shapes=None (every shape), or give "
                             f"your own layouts={{'name': rules}}.")
    return Advice(rows, devices=devices, efficiency=efficiency, program=program, empty=empty, levers=levers, title=(
        f"{getattr(built, 'name', 'model')} on {devices.name}, {what}, {built.dtype_policy.name}"
        f"{'' if levers == Levers() else ', ' + levers.describe(batch)}: {len(rows)} candidates ranked by estimated "
        f"step time"))


def _row(model, steps, candidate: Candidate, devices, batch, seq, efficiency, target) -> AdviceRow:
    shape = candidate.mesh_shape
    if batch % shape[0]:
        return AdviceRow(candidate.layout, shape, None, None, CANNOT,
                         f"the batch of {batch} does not split over {shape[0]} devices of the batch axis")
    micro = steps.levers.micro_batch
    if micro and micro % shape[0]:
        return AdviceRow(candidate.layout, shape, None, None, CANNOT,
                         f"a micro-batch of {micro} does not split over {shape[0]} devices of the batch axis")
    try:
        program = steps.read(candidate, target)
    except OwnProgramOutOfMemory as error:  # an accelerator's compiler refuses a step that does not fit
        return AdviceRow(candidate.layout, shape, None, None, NO, str(error))
    except Exception as error:
        # the weight, its dimension and the mesh axis, in words, where a weight does not divide; anything else is
        # what it is, the candidate named
        why = cannot_split(model, candidate.distribution())
        if why is None:
            raise RuntimeError(f"advise: the candidate {candidate.layout!r} on {shape} failed while its step was "
                               f"compiled, and no weight fails to divide on that mesh: {type(error).__name__}: "
                               f"{str(error)[:600]}") from error
        return AdviceRow(candidate.layout, shape, None, None, CANNOT, str(why))
    tokens = batch * (seq or 1) / (shape[0] * shape[1])
    return _timed(AdviceRow(candidate.layout, shape, program, None, "", tokens=tokens,
                            micro_steps=steps.levers.steps(batch)), devices, efficiency)


def _timed(row: AdviceRow, devices: DeviceSet, efficiency: float) -> AdviceRow:
    """`row` with its step timed on `devices` and its memory judged against theirs."""
    if row.program is None:
        return row
    time = step_time(row.program, devices, row.mesh_shape, MESH_AXES, efficiency=efficiency,
                     latency=True).times(row.micro_steps)
    peak = row.program.memory.peak
    verdict = FITS if peak <= (1 - HEADROOM) * devices.memory_bytes else TIGHT if peak <= devices.memory_bytes else NO
    return replace(row, time=time, verdict=verdict)


def _rank(row: AdviceRow) -> tuple:
    order = {FITS: 0, TIGHT: 0, NO: 1, CANNOT: 2}[row.verdict]
    # a step the TPU's compiler refused ("no", nothing timed) after the timed ones that do not fit either
    return order, row.time is None, row.time.step if row.time else 0.0
