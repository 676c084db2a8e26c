"""What a training step communicates: the collectives of the real compiled step, beside the layout's expectation.

`communication_report` compiles one training step of the model, as `fit` runs it, under the
distribution (`train_step`), reads its collectives from the compiled text (`hlo`), attributes each
to the layer it comes from (`attribution`), and sets them beside what the layout predicts
(`expectation`).
"""

from __future__ import annotations


from course_utils._table import Table
from course_utils.communication.attribution import LayerTable, attribute, by_layer, unmodelled_part
from course_utils.communication.expectation import OPTIONAL, expected_collectives, moved_to_the_update, not_modelled
from course_utils.xla_settings import READING_COMPILE
from course_utils.guards import require_batch_splits, require_compiled, require_laid_out
from course_utils.communication.hlo import Collective, collective_ops, summed
from course_utils.communication.traffic import TrafficTable, traffic
from course_utils.communication.train_step import compiled_train_step, jax_leaves, training_batch
from course_utils.layouts.layer_outputs import layer_outputs

SCALAR_SLACK = 64  # bytes: the loss and metric scalars ride along with the gradients

class CommunicationReport(Table):
    """Collectives found in a compiled training step, beside the layout's expectation.

    Attributes:
        compiled: The program's collectives summed per kind and axes (`hlo.Collective`).
        expected: What the layout predicts (`expected_collectives`).
        rows: The table's rows: `compiled`, then `expected`.
        collectives: One `CollectiveRow` per compiled collective: layer, op,
            pass, kind, axes, bytes, the weight it moves, and a one-line reason.
        not_modelled: What the expectation leaves out, one line each.
        hlo: The compiled program's text.
        axis_names, mesh_shape: The mesh it was compiled on.
    """

    columns = ("kind", "over axes", "count", "bytes per device", "source")

    def __init__(self, compiled, expected, *, title: str, collectives=(), not_modelled=(), hlo: str = "",
                 axis_names: tuple[str, ...] = (), mesh_shape: tuple[int, ...] = (), parts=None,
                 compiled_with: str = "", excused=None, ops=None):
        super().__init__(list(compiled) + list(expected), title=title)
        self._parts = dict(parts or {})  # instruction name -> the unmodelled part it belongs to
        self._excused = dict(excused or {})  # (kind, axes) -> expected bytes the program moves another way
        self.compiled_with = compiled_with
        self.axis_names, self.mesh_shape = tuple(axis_names), tuple(mesh_shape)
        self._ops = None if ops is None else list(ops)  # read from the text once, by whoever reads it first
        self._by_layer = None  # summed once, on first use
        self.compiled = list(compiled)
        self.expected = list(expected)
        self.collectives = list(collectives)
        self.not_modelled = list(not_modelled)
        self.hlo = hlo

    def cells(self, row: Collective) -> list[str]:
        return [row.kind, "+".join(row.axes) or "-", str(row.count), f"{row.bytes:,}", row.source]

    def bytes_over(self, *axes: str, kind: str = "all-reduce") -> int:
        """Compiled bytes per device of `kind` collectives over exactly these axes."""
        return sum(c.bytes for c in self.compiled if c.kind == kind and c.axes == tuple(axes))

    def traffic(self) -> TrafficTable:
        """Bytes per device the step moves per mesh axes and pass: results, operands, and what the ring
        algorithm sends over the links (the cost; `.bytes_over` and `.compiled` count results)."""
        return traffic(self.collectives, title=f"{self.title}: bytes per device by mesh axes and pass")

    @property
    def coverage(self) -> float:
        """The share of the step's collective bytes (results) the layout's expectation models (1.0: all of them);
        AGREE or DIFFER speaks of that share only."""
        total = sum(r.bytes for r in self.collectives)
        modelled = {(e.kind, e.axes) for e in self.expected}
        unmodelled = self._unmodelled_rows()
        covered = sum(r.bytes for r in self.collectives if (r.kind, r.axes) in modelled and r not in unmodelled)
        return covered / total if total else 1.0

    def bytes_by_axis(self) -> dict[str, int]:
        """Compiled bytes per device each mesh axis carries, every kind of collective summed (a collective over
        several axes counts for each)."""
        totals = dict.fromkeys(self.axis_names, 0)
        for c in self.compiled:
            for axis in c.axes:
                totals[axis] += c.bytes
        return totals

    def ops(self) -> list:
        """Every collective instruction of the program as `hlo.CollectiveOp`s: what XLA recorded, array by array."""
        if self._ops is None:
            self._ops = collective_ops(self.hlo, self.axis_names, self.mesh_shape)
        return list(self._ops)

    def by_layer(self) -> LayerTable:
        """The compiled collectives per layer, operation and pass, with the reason for each."""
        if self._by_layer is None:
            self._by_layer = by_layer(self.collectives, title=f"{self.title}: collectives by layer")
        return self._by_layer

    @property
    def agrees(self) -> bool:
        """Every expected collective is in the program, and nothing large that is modelled is unexplained."""
        return not self.differences()

    def differences(self) -> list[str]:
        """Where program and expectation part, one line each, naming the layers involved (empty: they agree).

        Only what the expectation models is compared: the collectives of parts it does not model
        (`unmodelled()`) are listed apart, never as a difference.
        """
        required = _sum_by_key(e for e in self.expected if not e.source.startswith(OPTIONAL))
        optional = _sum_by_key(e for e in self.expected if e.source.startswith(OPTIONAL))
        found = _sum_by_key(r for r in self.collectives if r not in self._unmodelled_rows())
        lines = []
        for key in dict.fromkeys([*required, *optional]):
            n, extra, got = required.get(key, 0) - self._excused.get(key, 0), optional.get(key, 0), found.get(key, 0)
            if not (n <= got <= n + extra + SCALAR_SLACK):
                lines.append(f"expected {n:,} bytes of {_label(key)}{f' (to {n + extra:,})' if extra else ''}, the "
                             f"program has {got:,}{self._layers_of(key)}")
        for key, n in found.items():
            if key not in required and key not in optional and n > SCALAR_SLACK:
                lines.append(f"not expected: {n:,} bytes of {_label(key)}{self._layers_of(key)}")
        return lines

    def unmodelled(self) -> dict[str, dict[tuple, int]]:
        """Bytes of the compiled collectives the expectation does not model, by part, then by kind and axes."""
        parts: dict[str, dict[tuple, int]] = {}
        for row in self._unmodelled_rows():
            by_key = parts.setdefault(self._parts[row.name], {})
            by_key[(row.kind, row.axes)] = by_key.get((row.kind, row.axes), 0) + row.bytes
        return parts

    def _unmodelled_rows(self) -> list:
        return [r for r in self.collectives if self._parts.get(r.name)]

    def _layers_of(self, key) -> str:
        layers = list(dict.fromkeys(r.layer for r in self.collectives if (r.kind, r.axes) == key))
        if not layers:
            return ""
        return f", from {', '.join(layers[:4])}{' and more' if len(layers) > 4 else ''} (see .by_layer())"

    def notes(self) -> list[str]:
        """The verdict (AGREE or DIFFER, with each difference), what is shown apart, how it was compiled."""
        differences = self.differences()
        modelled = "on what it models" if self._unmodelled_rows() else ""
        share = f" (the expectation models {self.coverage:.0%} of the step's collective bytes)"
        if not differences:
            lines = [f"AGREE: the compiled program holds what the layout predicts{', ' + modelled if modelled else ''}"
                     f"{share if self.collectives else ''}"]
        else:
            lines = [f"DIFFER: the compiled program and what the layout predicts differ{share}:"]
            lines += [f"- {line}" for line in differences]
        if self.collectives:
            lines.append(_cost_line(self))
        for part, by_key in self.unmodelled().items():
            amounts = "; ".join(f"{n:,} bytes of {_label(key)}" for key, n in by_key.items())
            lines.append(f"Not modelled, shown apart: {part}: {amounts}")
        if self.not_modelled and differences:
            lines.append(f"The expectation does not model {len(self.not_modelled)} weight(s):")
            lines += [f"- {note}" for note in self.not_modelled[:8]]
            if len(self.not_modelled) > 8:
                lines.append(f"- ... and {len(self.not_modelled) - 8} more (.not_modelled)")
        lines.append(self.compiled_with)
        return lines


def _cost_line(report) -> str:
    """What the step sends per device over each mesh axis, ring algorithm, every pass."""
    by_axes: dict[tuple, int] = {}
    for row in report.collectives:
        by_axes[row.axes] = by_axes.get(row.axes, 0) + row.sent_bytes
    parts = "; ".join(f"{n:,} over {'+'.join(axes) or 'no axis'}" for axes, n in by_axes.items())
    return (f"Cost: {sum(by_axes.values()):,} bytes sent per device in one step ({parts}; ring algorithm, "
            f".traffic() by pass)")


def _label(key) -> str:
    kind, axes = key
    return f"{kind} over {'+'.join(axes) or 'no axis'}"


def _sum_by_key(rows) -> dict[tuple, int]:
    sums: dict[tuple, int] = {}
    for row in rows:
        sums[(row.kind, row.axes)] = sums.get((row.kind, row.axes), 0) + row.bytes
    return sums


COMPILES = {"quick": READING_COMPILE, "full": None}


def communication_report(model, distribution, batch, *, target_shape=None, target_dtype=None,
                         compile: str = "quick") -> CommunicationReport:
    """Compiles one real training step, as `fit` would run it, and lists its collectives.

    Args:
        model: A compiled Keras model built under `distribution`.
        distribution: A `DataParallel` or `ModelParallel` distribution.
        batch: One global batch as `fit` takes it: `(x, y)` or
            `(x, y, sample_weight)`, each an array or a dict of arrays (only
            shapes and dtypes are read; `jax.ShapeDtypeStruct`s work too).
            Or just the input's shape, e.g. `(64, 784)`: the targets then
            follow `target_shape` / `target_dtype`, by default the model's
            output (its last axis dropped and int32 for a sparse loss).
        target_shape: With a shape for `batch`: the targets' global shape.
        target_dtype: With a shape for `batch`: the targets' dtype.
        compile: "quick" compiles with XLA's backend optimisations off
            (`xla_settings.READING_COMPILE`): the same collectives carrying the same
            bytes as XLA's full compile, several times sooner, though XLA may
            combine a few of them differently; "full" compiles with XLA's
            defaults, as the step that runs. The report says which.

    Returns:
        A `CommunicationReport`: `.compiled` (per kind and axes),
        `.collectives` (per instruction, attributed to layers), `.by_layer()`,
        `.expected`, `.agrees`, `.differences()`, `.bytes_over(*axes)`.

    Example:
        >>> report = communication_report(causal_lm, distribution, (x, y))
        >>> report.by_layer()
    """
    require_compiled(model, "communication_report")
    if compile not in COMPILES:
        raise ValueError(f"compile must be 'quick' or 'full'. Received: compile={compile!r}.")
    require_laid_out(model, distribution, "communication_report")
    data = training_batch(model, batch, target_shape, target_dtype)
    require_batch_splits(data, distribution, "communication_report")
    hlo = compiled_train_step(model, distribution, data, options=COMPILES[compile])
    mesh = distribution.device_mesh
    ops = collective_ops(hlo, tuple(mesh.axis_names), tuple(mesh.shape))  # the program's text, read once
    compiled = summed(ops)
    outputs = layer_outputs(model, data[0])
    first = jax_leaves(data[0])[0]
    expected = expected_collectives(model, distribution, tuple(first.shape), outputs=outputs)
    shapes = ", ".join(str(tuple(leaf.shape)) for leaf in jax_leaves(data[0]))
    rows = attribute(ops, model, distribution, outputs)
    parts = {row.name: part for row in rows if (part := unmodelled_part(row, model, distribution))}
    excused = moved_to_the_update(model, distribution, rows)
    with_ = ("compiled quickly, XLA's backend optimisations off: the collectives and bytes of the full compile "
             "(communication_report(..., compile='full') for XLA's own)" if compile == "quick"
             else "compiled with XLA's defaults, as the step that runs")
    return CommunicationReport(
        compiled, expected, collectives=rows, parts=parts, compiled_with=with_, excused=excused,
        not_modelled=not_modelled(model, distribution), hlo=hlo, axis_names=mesh.axis_names, mesh_shape=mesh.shape, ops=ops,
        title=(f"One training step of {model.name}, batch {shapes}, "
               f"{type(distribution).__name__} on {tuple(mesh.shape)} {tuple(mesh.axis_names)}"))
