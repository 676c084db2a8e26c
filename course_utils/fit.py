"""Will it fit? Training state per device, model by mesh, in GiB beside device memory sizes.

Each number is `sizing.training_memory` of a shape-only model (nothing is
allocated); a layout that cannot split some weight on a mesh is a row that
says why, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils._table import Table
from course_utils.sizing import GIB, PRESETS, Preset, abstract_model, training_memory

HEADROOM = 0.10  # "fits" only with at least this share of the device left for what is not counted
FITS, TIGHT, NO, CANNOT = "fits", "tight", "no", "cannot split"


@dataclass(frozen=True)
class Fit:
    """One model on one mesh: GiB per device, or why the layout cannot be used."""

    model: str
    mesh_shape: tuple[int, ...]
    weights: float
    gradients: float
    optimizer: float
    problem: str | None = None

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer

    def verdict(self, device_gib: float, headroom: float = HEADROOM) -> str:
        """`"fits"` with at least `headroom` of the device left, `"tight"` when the state fits but
        leaves less (activations, gathered weights and XLA's scratch space need room too), else
        `"no"`; `"cannot split"` when the layout cannot be used on this mesh."""
        if self.problem is not None:
            return CANNOT
        if self.total <= (1 - headroom) * device_gib:
            return FITS
        return TIGHT if self.total <= device_gib else NO

    def fits(self, device_gib: float, headroom: float = HEADROOM) -> bool:
        """Whether the verdict on a device of `device_gib` is "fits" (room left, not only on paper)."""
        return self.verdict(device_gib, headroom) == FITS


class FitReport(Table):
    """GiB of training state per device (the fullest device), model by mesh, and a verdict per device size.

    A verdict is "fits" (at least `HEADROOM` of the device left), "tight" (the state fits, with less
    left), "no", or "cannot split" (the layout cannot be used on that mesh).
    """

    def __init__(self, rows, *, device_gib: tuple[float, ...], title: str, headroom: float = HEADROOM):
        super().__init__(rows, title=title)
        self.device_gib = tuple(device_gib)
        self.headroom = headroom
        self.columns = ("model", "mesh (batch, model)", "weights", "gradients", "optimizer", "total GiB",
                        *(f"{g:g} GiB device" for g in self.device_gib))

    def cells(self, row: Fit) -> list[str]:
        verdicts = [row.verdict(g, self.headroom) for g in self.device_gib]
        if row.problem:
            return [row.model, str(row.mesh_shape), "-", "-", "-", "-", *verdicts]
        return [row.model, str(row.mesh_shape), *(f"{v:.1f}" for v in (row.weights, row.gradients, row.optimizer)),
                f"{row.total:.1f}", *verdicts]

    def __repr__(self) -> str:
        return f"{super().__repr__()}\n{self.legend}"

    def _repr_html_(self) -> str:
        return f"{super()._repr_html_()}<p>{self.legend}</p>"

    @property
    def legend(self) -> str:
        """What the verdicts mean, in one line."""
        return (f"fits: at least {self.headroom:.0%} of the device left for what the total leaves out; "
                f"tight: the total fits, with less left; no: it does not; cannot split: the layout cannot "
                f"be used on that mesh.")

    def row(self, model: str, mesh_shape) -> Fit:
        """The row of one model on one mesh."""
        for r in self.rows:
            if r.model == model and r.mesh_shape == tuple(mesh_shape):
                return r
        raise KeyError(f"No row for {model!r} on {tuple(mesh_shape)}.")


def will_it_fit(models=tuple(PRESETS), mesh_shapes=((1, 8), (2, 4), (8, 1)), *, device_gib=(16, 80),
                layout: str = "official", **overrides) -> FitReport:
    """`training_memory` for every model on every mesh, in GiB, beside device sizes.

    Args:
        models: Preset names, or a dict of label -> backbone already built
            (each is built once, shape-only, and reused for every mesh).
        mesh_shapes: `(batch, model)` mesh shapes of the course's devices.
        device_gib: Device memory sizes to compare with, in GiB.
        layout: One of `LAYOUTS`.
        **overrides: Config arguments to replace, e.g. `dtype="bfloat16"`.

    A layout that cannot split some weight on a mesh (Gemma 2B has one
    key/value head, and the official map splits heads over `model`) is
    reported as a problem, not raised.
    """
    named = dict(models) if isinstance(models, dict) else {name: name for name in models}
    rows = []
    for name, model in named.items():
        built = model if not isinstance(model, (str, Preset)) else abstract_model(model, **overrides)
        for shape in mesh_shapes:
            try:
                fullest = max(training_memory(built, shape, layout=layout).rows, key=lambda r: r.total)
            except ValueError as error:
                rows.append(Fit(str(name), tuple(shape), 0.0, 0.0, 0.0, problem=str(error)))
                continue
            rows.append(Fit(str(name), tuple(shape), *(getattr(fullest, part) / GIB
                                                      for part in ("weights", "gradients", "optimizer"))))
    return FitReport(rows, device_gib=device_gib, title=(
        f"Training state per device with Adam under the {layout} layout, GiB (activations not counted)"))
