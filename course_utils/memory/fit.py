"""Will it fit? What each device holds at the peak of a training step, model by mesh, beside device sizes.

Per device, in GiB, for a dtype policy:
- the training state: weights, gradients and Adam's moments (`presets.training_memory`'s sums, from shapes);
- the activations the step keeps for its backward pass, for a global batch of `batch` sequences of
  `seq` tokens (`activations.saved_for_backward`, traced from shapes), split over the batch axis
  (tensor parallelism also splits part of them over `model`: on a mesh with a `model` axis this is
  an upper bound); rematerialised, each block's input only;
- the weights FSDP gathers inside the step: where the layout splits weights over the batch axis, the
  two largest decoder blocks whole along it (one in use, the next being fetched);
- an allowance for XLA's working memory: `SCRATCH` of the rest.
Nothing is allocated. A verdict keeps headroom: "fits" only with `HEADROOM` of the device left.
A layout that cannot be used on a mesh is "cannot split", with the reason (`CannotSplit`): which weight,
which of its dimensions, which mesh axis. The arguments are checked first (`fit_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils._table import Table
from course_utils.layouts.layout_map import layout_for as variable_layout
from course_utils.layouts.layout_map import layout_rows
from course_utils.memory import fit_checks
from course_utils.memory.compiled import backbone_step_memory
from course_utils.memory.presets import GIB, MESH_AXES, PRESETS, Preset, abstract_model, distribution_for, layout_name
from course_utils.memory.state import memory_of_rows, shape_only_optimizer
from course_utils.mesh import make_mesh
from course_utils.layout_axes import axes_used, indivisible

HEADROOM = 0.10  # "fits" only with at least this share of the device left
APART = 0.25  # a traced estimate this far from the compiled peak is named in the report
SCRATCH = 0.10  # XLA's working memory, allowed for as this share of the rest
FITS, TIGHT, NO, CANNOT = "fits", "tight", "no", "cannot split"
PARTS = ("weights", "gradients", "optimizer", "activations", "gathered", "scratch")
POLICIES = ("float32", "bfloat16", "mixed_bfloat16")


@dataclass(frozen=True)
class CannotSplit:
    """Why a layout cannot be used on a mesh: a dimension (of a weight, or the batch) that does not divide
    into the parts of the mesh axes it is split over. Keras would raise `IndivisibleError` on building."""

    what: str  # the first weight that does not split (its path), or "the batch"
    shape: tuple[int, ...]
    dim: int
    size: int
    axes: tuple[str, ...]
    parts: int
    others: int = 0  # how many more weights do not split

    def __str__(self) -> str:
        if self.what == "the batch":
            return f"a batch of {self.size} does not split into {self.parts} equal parts along {self.axes[0]!r}"
        more = ("" if not self.others else "; 1 more weight does not split either" if self.others == 1
                else f"; {self.others} more weights do not split either")
        return (f"{self.what} {self.shape}: dimension {self.dim}, of size {self.size}, does not divide into "
                f"{self.parts} parts along {'+'.join(self.axes)!r} (Keras would raise "
                f"IndivisibleError building it){more}")

    @property
    def short(self) -> str:
        """The reason in a few words, for a figure (the mesh shown beside it gives the parts):
        'key/kernel: dim 0 of size 1 over model'."""
        return f"{'/'.join(self.what.split('/')[-2:])}: dim {self.dim} of size {self.size} over {'+'.join(self.axes)}"


@dataclass(frozen=True)
class Fit:
    """One model on one mesh: GiB per device by part (the fullest device), or why it cannot be laid out."""

    model: str
    mesh_shape: tuple[int, ...]
    weights: float
    gradients: float
    optimizer: float
    activations: float = 0.0
    gathered: float = 0.0
    scratch: float = 0.0
    problem: str | None = None
    split: CannotSplit | None = None  # the reason, when the problem is a dimension that does not divide
    compiled: float | None = None  # GiB at the compiled step's peak (`compiled.backbone_step_memory`), if asked

    @property
    def total(self) -> float:
        """The traced estimate: the sum of the parts."""
        return sum(getattr(self, part) for part in PARTS)

    @property
    def peak(self) -> float:
        """What the verdict reads: the compiled step's peak when there is one (XLA's own buffers), else the total."""
        return self.total if self.compiled is None else self.compiled

    @property
    def apart(self) -> float | None:
        """How far the traced total is from the compiled peak, as a share of the compiled (None: not compiled)."""
        return None if self.compiled is None or not self.compiled else abs(self.total - self.compiled) / self.compiled

    def verdict(self, device_gib: float, headroom: float = HEADROOM) -> str:
        """`"fits"` with at least `headroom` of the device left, `"tight"` when the total fits but
        leaves less, else `"no"`; `"cannot split"` when the layout cannot be used on this mesh."""
        if not fit_checks.device_size_ok(device_gib):
            raise ValueError(f"Received: device_gib={device_gib!r}. A device size is a number of GiB above 0, "
                             f"e.g. verdict(80).")
        if self.problem is not None:
            return CANNOT
        if self.peak <= (1 - headroom) * device_gib:
            return FITS
        return TIGHT if self.peak <= device_gib else NO

    def fits(self, device_gib: float, headroom: float = HEADROOM) -> bool:
        """Whether the verdict on a device of `device_gib` is "fits" (room left, not only on paper)."""
        return self.verdict(device_gib, headroom) == FITS


class FitReport(Table):
    """GiB per device (the fullest device), model by mesh, by part, and a verdict per device size.

    A verdict is "fits" (at least `headroom` of the device left), "tight" (the total fits, with less
    left), "no", or "cannot split" (the layout cannot be used on that mesh).

    Attributes:
        counted: The parts the totals count (`PARTS`, or the training state alone).
        dtype: The dtype policy the model was sized in.
    """

    def __init__(self, rows, *, device_gib: tuple[float, ...], title: str, headroom: float = HEADROOM,
                 counted: tuple[str, ...] = PARTS[:3], dtype: str = "float32"):
        super().__init__(rows, title=title)
        self.device_gib = tuple(device_gib)
        self.headroom, self.counted, self.dtype = headroom, tuple(counted), dtype
        self.compiled = any(r.compiled is not None for r in rows)
        self.columns = ("model", "mesh (batch, model)", *self.counted, "total GiB",
                        *(("compiled GiB",) if self.compiled else ()), *(f"{g:g} GiB device" for g in self.device_gib))

    def cells(self, row: Fit) -> list[str]:
        verdicts = [row.verdict(g, self.headroom) for g in self.device_gib]
        compiled = ((f"{row.compiled:.1f}" if row.compiled is not None and not row.problem else "-",)
                    if self.compiled else ())
        if row.problem:
            return [row.model, str(row.mesh_shape), *("-" for _ in self.counted), "-", *compiled, *verdicts]
        return [row.model, str(row.mesh_shape), *(f"{getattr(row, part):.1f}" for part in self.counted),
                f"{row.total:.1f}", *compiled, *verdicts]

    def notes(self) -> list[str]:
        """The legend, then why each "cannot split" row cannot."""
        lines = [self.legend, *(f"- cannot split {r.model} on {r.mesh_shape}: {r.problem}." for r in self.rows
                                if r.problem)]
        if self.compiled:
            lines.append("traced: the parts above, estimated from shapes; compiled: the peak of XLA's own buffers for "
                         "the step (CPU program); the verdicts read the compiled figure.")
            lines += [f"- {r.model} on {r.mesh_shape}: traced {r.total:.1f} GiB, compiled {r.compiled:.1f} GiB (the "
                      f"estimate is {r.total / r.compiled:.2f}x the compiled peak, more than {APART:.0%} off): the "
                      f"verdict trusts the compiled step, the program that runs"
                      for r in self.rows if r.apart is not None and r.apart > APART]
        return lines

    @property
    def legend(self) -> str:
        """What the verdicts mean, in one line."""
        left_out = "" if "activations" in self.counted else " (activations, gathered weights, XLA's scratch space)"
        return (f"fits: at least {self.headroom:.0%} of the device left{left_out}; tight: the total fits, with "
                f"less left; no: it does not; cannot split: the layout cannot be used on that mesh.")

    def row(self, model: str, mesh_shape) -> Fit:
        """The row of one model on one mesh."""
        for r in self.rows:
            if r.model == model and r.mesh_shape == tuple(mesh_shape):
                return r
        raise KeyError(f"No row for {model!r} on {tuple(mesh_shape)}.")


def will_it_fit(models=tuple(PRESETS), mesh_shapes=((1, 8), (2, 4), (8, 1)), *, device_gib=(16, 80),
                layout="official", batch: int | None = None, seq: int | None = None,
                dtype: str = "float32", remat: bool = False, compiled: bool = False) -> FitReport:
    """GiB per device of every model on every mesh, beside device sizes, with a verdict for each.

    Args:
        models: Preset names, or a dict of label -> backbone already built
            (each is built once, shape-only, and reused for every mesh); one name alone,
            `"gemma_7b_en"`, means that model only.
        mesh_shapes: `(batch, model)` mesh shapes of the course's devices; one shape alone,
            `(2, 4)`, means that mesh only.
        device_gib: Device memory sizes to compare with, in GiB (numbers above 0); one number
            alone, `80`, means that size only.
        layout: One of `presets.LAYOUTS` ("official" is keras-hub's map, which splits weights
            over `batch` too, as FSDP does), or your own: a dict of rules `{key: axes}` naming
            "batch" and "model", or a function `mesh -> LayoutMap`.
        batch, seq: The global batch (sequences, tokens each): with them the totals count the
            activations, FSDP's gathered weights and XLA's scratch space; without them the training
            state alone (and the verdicts say so).
        dtype: The dtype policy, one of `POLICIES` (a preset named is sized in it; a model passed
            built keeps its own).
        remat: Count the activations of rematerialised blocks (each block's input, recomputed
            one block at a time in the backward pass).
        compiled: Also compile each step (shape-only, nothing allocated; a few seconds a mesh) and read
            its peak from XLA (`compiled.backbone_step_memory`): a "compiled GiB" column, which the
            verdicts then read, and a note where the traced total is more than 25 % from it. Needs
            `batch` and `seq`.

    A layout that cannot split some weight on a mesh (Gemma 2B has one key/value head, and the
    official map splits heads over `model`), or a batch that does not split over the batch axis,
    is a row that says why (its `split`, in the report's notes), not an error. Arguments that
    are not what is described above are refused before anything is built, with what to give.
    """
    import keras

    from course_utils.devices import course_devices

    if dtype not in POLICIES:
        raise ValueError(f"dtype must be one of {POLICIES}. Received: dtype={dtype!r}.")
    fit_checks.check_layout(layout)
    fit_checks.check_batch(batch, seq)
    if compiled and (batch is None or remat):
        raise ValueError(f"compiled=True compiles the step fit runs on a batch, without rematerialisation: give "
                         f"batch= and seq=, and remat=False. Received: batch={batch!r}, seq={seq!r}, remat={remat!r}.")
    named = fit_checks.checked_models(models)
    mesh_shapes = fit_checks.checked_mesh_shapes(mesh_shapes, len(course_devices()))
    device_gib = fit_checks.checked_device_gib(device_gib)
    rows = []
    for name, model in named.items():
        built = model if not isinstance(model, (str, Preset)) else abstract_model(model, dtype=dtype)
        saved = None
        if batch is not None:
            from course_utils.memory.activations import saved_for_backward

            saved = saved_for_backward(built, batch, seq)
        adam = shape_only_optimizer(keras.optimizers.Adam(), built)  # its slots serve every mesh and layout
        rows += [_fit(str(name), built, adam, shape, layout, saved, remat, compiled) for shape in mesh_shapes]
    counted = PARTS if batch is not None else PARTS[:3]
    step = (f", activations for a batch of {batch} x {seq} tokens{' (rematerialised)' if remat else ''}, "
            f"FSDP's gathered weights and {SCRATCH:.0%} for XLA" if batch is not None else " (activations not counted)")
    return FitReport(rows, device_gib=device_gib, counted=counted, dtype=dtype, title=(
        f"GiB per device, {dtype}, Adam, {layout_name(layout)}: training state{step}"
        + (", and the compiled step's peak" if compiled else "")))


def _fit(name: str, model, optimizer, shape: tuple, layout, saved, remat: bool, compiled: bool) -> Fit:
    """One model on one mesh, laid out once: its training state, FSDP's gathered weights, or why it cannot split."""
    distribution = distribution_for(type(model), make_mesh(shape, MESH_AXES), layout)
    try:
        rows = layout_rows(model, distribution, optimizer_variables=optimizer.variables, compare_arrays=False)
    except ValueError as error:
        split = cannot_split(model, distribution)
        return Fit(name, shape, 0.0, 0.0, 0.0, problem=str(split or error), split=split)
    fullest = max(memory_of_rows(model, rows, title="").rows, key=lambda r: r.total)
    state = [getattr(fullest, part) / GIB for part in ("weights", "gradients", "optimizer")]
    if saved is None:
        return Fit(name, shape, *state)
    if saved.batch % shape[0]:
        split = CannotSplit("the batch", (saved.batch, saved.seq), 0, saved.batch, MESH_AXES[:1], shape[0])
        return Fit(name, shape, *state, problem=str(split), split=split)
    activations = saved.total(remat=remat) / shape[0] / GIB
    weights = {v.path for v in model.weights}
    gathered = gathered_weights([r for r in rows if r.path in weights], shape[0]) / GIB
    scratch = SCRATCH * (sum(state) + activations + gathered)
    peak = backbone_step_memory(model, distribution, saved.batch, saved.seq).peak / GIB if compiled else None
    return Fit(name, shape, *state, activations=activations, gathered=gathered, scratch=scratch, compiled=peak)


def cannot_split(model, distribution) -> CannotSplit | None:
    """The first weight of `model` whose layout under `distribution` (Keras's own lookup) does not divide on its
    mesh, and how many more do not; None when every weight divides (the layout fails for another reason)."""
    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    found = [(v, hit) for v in model.variables
             for hit in indivisible(tuple(v.shape), tuple(variable_layout(distribution, v).axes), sizes)[:1]]
    if not found:
        return None
    (variable, (dim, size, axes, parts)), others = found[0], len(found) - 1
    return CannotSplit(variable.path, tuple(variable.shape), dim, size, tuple(axes), parts, others)


def gathered_weights(weight_rows, parts: int) -> int:
    """Bytes per device FSDP adds inside a step: the two largest decoder blocks gathered along the batch axis.

    A weight split over the batch axis (`parts` devices) is gathered whole along it where it is used, then
    freed; XLA fetches the next block's while one is in use. 0 when no weight is split over that axis.

    Args:
        weight_rows: `layout_rows` of the model's weights.
        parts: The size of the batch axis.
    """
    extra: dict[str, int] = {}
    for row in weight_rows:
        if MESH_AXES[0] in axes_used(row.axes):
            group = _block_of(row.path)
            extra[group] = extra.get(group, 0) + row.bytes_per_device * (parts - 1)
    return sum(sorted(extra.values(), reverse=True)[:2])


def _block_of(path: str) -> str:
    """The decoder block (or top-level layer) a variable belongs to: 'decoder_block_3', 'token_embedding'."""
    return path.split("/")[0]
