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
from course_utils.advice.candidates import BUILT_IN, MESH_AXES, Candidate, candidates, mesh_shapes as every_shape
from course_utils.advice.estimate import StepTime, step_time
from course_utils.advice.program import StepProgram, extended, read_step
from course_utils.advice.tpu import TpuOutOfMemory, read_tpu_step
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
    """

    layout: str
    mesh_shape: tuple[int, int]
    program: StepProgram | None
    time: StepTime | None
    verdict: str
    problem: str = ""
    tokens: float = 0.0

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

    def __init__(self, rows, *, devices: DeviceSet, title: str, efficiency: float, program: str = "cpu",
                 empty: str = ""):
        super().__init__(rows, title=title)
        self.devices, self.efficiency, self.program, self.empty = devices, efficiency, program, empty

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
        if self.program == "tpu" and devices.topology != self.devices.topology:
            raise ValueError(f"The programs are the TPU's own, compiled for {self.devices.name} "
                             f"({self.devices.topology}); {devices.name} runs other programs. Run advise(..., "
                             f"devices={devices.name!r}) for it.")
        efficiency = self.efficiency if efficiency is None else efficiency
        rows = [_timed(r, devices, _efficiency(efficiency)) for r in self.rows]
        rows.sort(key=_rank)
        return Advice(rows, devices=devices, efficiency=efficiency, program=self.program, empty=self.empty,
                      title=self.title.replace(f" on {self.devices.name},", f" on {devices.name},"))

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
                 f"measurements: compute = FLOPs / peak; each collective = its ring bytes / its axis's link; "
                 f"within a pass the two overlap. bound by: which is longer in the forward or backward pass."]
        if self.program == "tpu":
            source = next((r.program.source for r in self.rows if r.program), "the TPU's own program")
            lines.append(f"From {source}, compiled per candidate (shape-only): memory at the step's peak and the "
                         f"collectives as the TPU sends them, each loop's counted once per round; the FLOPs from XLA's "
                         f"CPU program (the TPU's cost analysis counts a loop's body once).")
        else:
            hint = "; program='tpu' reads the TPU's own" if d.topology else ""
            lines.append(f"From XLA's CPU program, compiled per candidate (shape-only): memory at the step's peak, "
                         f"FLOPs, collectives; bytes counted as a {d.kind.upper()} sends them (bf16 where the CPU widened "
                         f"bf16 values to f32, reduce-scatters for gradients kept as shards): up to "
                         f"{max(corrected, default=0):.0%} fewer than the CPU program's. The memory is the CPU "
                         f"program's peak, which computes bf16 products in f32: an accelerator's program can need "
                         f"less{hint}.")
        lines += [f"- {r.layout} on {r.mesh_shape} {'does not fit' if r.verdict == NO else 'cannot run'}: {r.problem}"
                  for r in self.rows if r.problem]
        return lines


def _ms(seconds: float) -> str:
    """Milliseconds to three significant figures: 113, 0.612, 0.00871."""
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:#.3g}".rstrip(".")


def advise(model, *, devices, batch: int, seq: int | None = None, dtype: str = "mixed_bfloat16",
           layouts: dict | None = None, mesh_shapes=None, efficiency: float = 1.0, program: str = "cpu") -> Advice:
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
            for memory and collectives; slower to compile (a 7B block about 25 s).

    Example:
        >>> advise("gemma_7b_en", devices="8xH100-80GB", batch=16, seq=2048)
        >>> advise("llama3_8b_en", devices="v5e-8", batch=8, seq=1024, program="tpu")
    """
    devices = device_set(devices)
    if dtype not in POLICIES:
        raise ValueError(f"dtype must be one of {POLICIES}. Received: dtype={dtype!r}.")
    _whole_number("batch", batch, "the global batch")
    efficiency = _efficiency(efficiency)
    layouts = _checked_layouts(layouts)
    built, language = _model(model, dtype)
    if language:
        _whole_number("seq", seq, "the tokens per sequence (e.g. seq=2048)", tokens=batch)
    _enough_devices(devices)
    shapes = _checked_shapes(mesh_shapes, devices.devices)
    topology = _topology(program, devices)
    found = candidates(built, devices.devices, layouts, shapes)
    steps = _Steps(built, batch, seq, language)
    rows = [_row(built, steps, c, devices, batch, seq, efficiency, topology) for c in found]
    rows.sort(key=_rank)
    what = f"{batch} x {seq} tokens" if language else f"a batch of {batch}"
    empty = "" if rows else (f"no layout applies to {getattr(built, 'name', 'this model')} on the mesh shapes "
                             f"{shapes or every_shape(devices.devices)}. Try mesh_shapes=None (every shape), or give "
                             f"your own layouts={{'name': rules}}.")
    return Advice(rows, devices=devices, efficiency=efficiency, program=program, empty=empty, title=(
        f"{getattr(built, 'name', 'model')} on {devices.name}, {what}, {built.dtype_policy.name}: "
        f"{len(rows)} candidates ranked by estimated step time"))


LARGEST = 2**31 - 1  # JAX sizes an array's dimension, and counts its elements here, with a 32-bit integer


def _whole_number(name: str, value, what: str, *, tokens: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} is {what}, a whole number above 0. Received: {name}={value!r}.")
    if value * tokens > LARGEST:
        raise ValueError(f"{name}={value:,} makes arrays of {value * tokens:,} elements; JAX counts an array's "
                         f"elements with a 32-bit integer (at most {LARGEST:,}). Give a smaller {name}.")


def _efficiency(efficiency) -> float:
    """The share of peak FLOP/s, checked before anything compiles: a number above 0 and at most 1."""
    if not isinstance(efficiency, (int, float)) or isinstance(efficiency, bool) or not 0 < efficiency <= 1:
        raise ValueError(f"efficiency is the share of peak FLOP/s the products reach, a number above 0 and at most "
                         f"1 (0.4: 40 % MFU). Received: efficiency={efficiency!r}.")
    return float(efficiency)


def _checked_layouts(layouts) -> dict | None:
    """Your layouts, `{name: rules or function}`, checked before anything compiles: a dict whose names are text
    and not the advisor's own, each value a dict of rules naming the axes ("batch", "model") or a function."""
    if layouts is None:
        return None
    if not isinstance(layouts, dict):
        raise TypeError(f"layouts is a dict {{name: rules}}, each rules a dict {{key: axes}} naming {MESH_AXES} or a "
                        f"function mesh -> LayoutMap, e.g. layouts={{'mine': {{'.*kernel': (None, 'model')}}}}. "
                        f"Received a {type(layouts).__name__}: {layouts!r:.60}.")
    for name, rules in layouts.items():
        if not isinstance(name, str) or name in BUILT_IN:
            what = "the name of one of the advisor's own" if name in BUILT_IN else "not text"
            raise ValueError(f"layouts names your own layouts; {name!r} is {what} ({', '.join(BUILT_IN)}), which it "
                             f"would replace. Give it another name, e.g. 'mine'.")
        if isinstance(rules, dict):
            for key, axes in rules.items():
                entries = axes if isinstance(axes, (tuple, list)) else (axes,)
                wrong = [a for e in entries for a in (e if isinstance(e, (tuple, list)) else (e,))
                         if a is not None and a not in MESH_AXES]
                if wrong:
                    raise ValueError(f"layouts[{name!r}][{key!r}] names {wrong}, not axes of the advisor's meshes "
                                     f"{MESH_AXES}. Use those names (or None for a dimension kept whole).")
        elif not callable(rules):
            raise TypeError(f"layouts[{name!r}] is a dict of rules {{key: axes}} naming {MESH_AXES} or a function "
                            f"mesh -> LayoutMap. Received a {type(rules).__name__}.")
    return layouts


def _topology(program: str, devices: DeviceSet) -> str | None:
    """The TPU slice to compile for (program="tpu"), None for the CPU program; checks libtpu is there first."""
    if program not in ("cpu", "tpu") or not isinstance(program, str):
        raise ValueError(f"program is 'cpu' (XLA's CPU program, corrected) or 'tpu' (the TPU's own, for a TPU "
                         f"slice). Received: program={program!r}.")
    if program == "cpu":
        return None
    if devices.topology is None:
        raise ValueError(f"program='tpu' compiles for a TPU slice; {devices.name} is not one (a {devices.kind.upper()} "
                         f"set without a topology). Use program='cpu', or a TPU set such as 'v5e-8'.")
    from course_utils.advice.tpu import topology_devices

    topology_devices(devices.topology)  # libtpu missing or the slice unknown: said now, not per candidate
    return devices.topology


def _model(model, dtype: str):
    """(the model to lay out, whether it is a keras-hub backbone trained as a causal language model)."""
    import keras

    from course_utils.memory.presets import PRESETS, Preset, abstract_model

    if isinstance(model, (str, Preset)):
        if str(getattr(model, "name", model)) not in PRESETS:
            raise ValueError(f"model is a preset name, one of {sorted(PRESETS)}, a keras-hub backbone or a compiled "
                             f"Keras model. Received: model={model!r}.")
        return abstract_model(model, dtype=dtype), True
    if isinstance(model, keras.Model) and hasattr(type(model), "get_layout_map"):
        return model, True
    if isinstance(model, keras.Model):
        from course_utils.guards import require_compiled

        require_compiled(model, "advise")
        if not model.inputs:
            raise ValueError(f"advise reads the shape of what {model.name!r} takes from its inputs, and it has none: "
                             f"a subclassed model. Build it as a functional or Sequential model (keras.Input first).")
        return model, False
    raise TypeError(f"model is a preset name, a keras-hub backbone or a compiled Keras model. Received a "
                    f"{type(model).__name__}.")


def _enough_devices(devices: DeviceSet) -> None:
    import jax

    have = len(jax.devices())
    if have != devices.devices:
        raise ValueError(f"{devices.name} has {devices.devices} devices and the advisor compiles for all of them; this "
                         f"kernel has {have}. Call setup_devices({devices.devices}) in a fresh kernel, or choose a set "
                         f"of {have}.")


def _checked_shapes(mesh_shapes, devices: int):
    if mesh_shapes is None:
        return None
    valid = every_shape(devices)
    shapes = [tuple(s) if isinstance(s, (tuple, list)) else s for s in mesh_shapes]
    wrong = [s for s in shapes if s not in valid]
    if wrong or not shapes:
        raise ValueError(f"mesh_shapes are (batch, model) shapes of {devices} devices: {valid}. Received: "
                         f"mesh_shapes={mesh_shapes!r}.")
    return shapes


def _row(model, steps, candidate: Candidate, devices, batch, seq, efficiency, topology) -> AdviceRow:
    shape = candidate.mesh_shape
    if batch % shape[0]:
        return AdviceRow(candidate.layout, shape, None, None, CANNOT,
                         f"the batch of {batch} does not split over {shape[0]} devices of the batch axis")
    try:
        program = steps.read(candidate, topology)
    except TpuOutOfMemory as error:  # libtpu refuses to compile a step that does not fit
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
    return _timed(AdviceRow(candidate.layout, shape, program, None, "", tokens=tokens), devices, efficiency)


def _timed(row: AdviceRow, devices: DeviceSet, efficiency: float) -> AdviceRow:
    """`row` with its step timed on `devices` and its memory judged against theirs."""
    if row.program is None:
        return row
    time = step_time(row.program, devices, row.mesh_shape, MESH_AXES, efficiency=efficiency)
    peak = row.program.memory.peak
    verdict = FITS if peak <= (1 - HEADROOM) * devices.memory_bytes else TIGHT if peak <= devices.memory_bytes else NO
    return replace(row, time=time, verdict=verdict)


class _Steps:
    """The models whose steps are compiled, built once for every candidate (a layout is looked up when the step
    is compiled, not when the model is built): a language model with one block and with two, extended to the
    backbone's depth, or the model itself."""

    def __init__(self, model, batch: int, seq: int | None, language: bool):
        from course_utils.memory.compiled import language_model_step

        self.depth = None
        if not language:
            self.steps = {None: (model, _generic_batch(model, batch))}
            return
        config = model.get_config()
        depth = config.get("num_layers")
        self.depth = depth if isinstance(depth, int) and depth >= 2 else None
        self.steps = {n: language_model_step(type(model), {**config, "num_layers": n} if n else config, batch, seq)
                      for n in ((1, 2) if self.depth else (None,))}

    def read(self, candidate: Candidate, topology: str | None = None) -> StepProgram:
        """The candidate's step, read from XLA's CPU program, or from the TPU's own for `topology` (its FLOPs
        still the CPU program's)."""
        programs = {}
        for n, (model, tokens) in self.steps.items():
            program = read_step(model, candidate.distribution(), tokens)
            if topology:
                tpu = read_tpu_step(model, candidate.layout_map, candidate.mesh_shape, tokens, topology)
                program = replace(tpu, flops=program.flops)
            programs[n] = program
        return extended(programs[1], programs[2], self.depth) if self.depth else programs[None]


def _generic_batch(model, batch: int) -> tuple:
    shape = tuple(model.inputs[0].shape)
    return (batch, *shape[1:])


def _rank(row: AdviceRow) -> tuple:
    order = {FITS: 0, TIGHT: 0, NO: 1, CANNOT: 2}[row.verdict]
    # a step the TPU's compiler refused ("no", nothing timed) after the timed ones that do not fit either
    return order, row.time is None, row.time.step if row.time else 0.0
