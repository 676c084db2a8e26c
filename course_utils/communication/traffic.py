"""What a step's collectives send: operand bytes and the ring algorithm's bytes per device, summed per mesh axis
and pass, and two steps compared.

A compiled collective's result size (`hlo.CollectiveOp.bytes`) is not what crosses the links: an
all-gather's result is n times its operand, and a ring all-reduce sends each byte twice. Here each
collective's operand bytes and the bytes one device sends with the ring algorithm (the counts *How to
Scale Your Model* uses) are summed per mesh axis and pass (`traffic`), and the steps of two layouts of one
model are set side by side (`compare_communication`).
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils._table import Table


def operand_bytes(kind: str, result_bytes: int, group: int) -> int:
    """A collective's operand bytes per device, from its result's: an all-gather's operand is 1/n of what it
    gathers, a reduce-scatter's n times the part it keeps; the others keep the size (n devices in a group)."""
    if kind == "all-gather":
        return result_bytes // max(group, 1)
    if kind == "reduce-scatter":
        return result_bytes * max(group, 1)
    return result_bytes


def ring_sent_bytes(kind: str, result_bytes: int, group: int) -> int:
    """Bytes one device sends over the links for a collective of `group` devices, the ring algorithm's count.

    An all-gather sends (n-1)/n of what it gathers (each device's part goes round the ring), a
    reduce-scatter (n-1)/n of its operand, an all-reduce 2(n-1)/n of its operand (a reduce-scatter then an
    all-gather), an all-to-all (n-1)/n of its operand (every part but its own leaves), a collective-permute
    its whole operand (to one peer). A group of one device sends nothing.
    """
    n = max(group, 1)
    if n == 1:
        return 0
    if kind == "collective-permute":
        return result_bytes
    operand = operand_bytes(kind, result_bytes, n)
    share = {"all-gather": result_bytes * (n - 1) / n, "reduce-scatter": operand * (n - 1) / n,
             "all-reduce": operand * 2 * (n - 1) / n, "all-to-all": operand * (n - 1) / n}[kind]
    return round(share)


@dataclass(frozen=True)
class AxisTraffic:
    """The collectives of one step over one set of mesh axes in one pass, summed (per device)."""

    axes: tuple[str, ...]
    pass_: str
    count: int
    result_bytes: int
    operand_bytes: int
    sent_bytes: int


class TrafficTable(Table):
    """Bytes per device a step's collectives move, per mesh axes and pass: their results, their operands, and
    what the ring algorithm sends over the links (`CommunicationReport.traffic()`)."""

    columns = ("over axes", "pass", "collectives", "result bytes", "operand bytes", "sent (ring)")

    def cells(self, row: AxisTraffic) -> list[str]:
        return ["+".join(row.axes) or "-", row.pass_ or "-", str(row.count), f"{row.result_bytes:,}",
                f"{row.operand_bytes:,}", f"{row.sent_bytes:,}"]

    def sent_over(self, *axes: str) -> int:
        """Ring bytes per device sent over exactly these axes, every pass."""
        return sum(r.sent_bytes for r in self.rows if r.axes == tuple(axes))

    @property
    def total_sent(self) -> int:
        return sum(r.sent_bytes for r in self.rows)

    def notes(self) -> list[str]:
        return [f"In all, {self.total_sent:,} bytes sent per device (ring algorithm: an all-gather sends (n-1)/n of "
                f"its result, a reduce-scatter and an all-to-all (n-1)/n of their operand, an all-reduce 2(n-1)/n, "
                f"a collective-permute all of it; n devices in its group)."]


PASSES = ("forward", "backward", "forward+backward", "optimizer", "")


def traffic(rows, *, title: str = "") -> TrafficTable:
    """`CollectiveRow`s (or `hlo.CollectiveOp`s, with no pass) summed per mesh axes and pass."""
    sums: dict[tuple, list[int]] = {}
    for row in rows:
        entry = sums.setdefault((row.axes, getattr(row, "pass_", "")), [0, 0, 0, 0])
        for i, value in enumerate((1, row.bytes, row.operand_bytes, row.sent_bytes)):
            entry[i] += value
    ordered = sorted(sums.items(), key=lambda kv: (kv[0][0], PASSES.index(kv[0][1]) if kv[0][1] in PASSES else 9))
    return TrafficTable([AxisTraffic(axes, pass_, *values) for (axes, pass_), values in ordered], title=title)


@dataclass(frozen=True)
class CostDifference:
    """The bytes per device one kind of collective over some axes sends in each compared step."""

    kind: str
    axes: tuple[str, ...]
    sent: tuple[int, ...]  # one per step, in the order compared
    layers: str  # where the larger side's collectives come from


class LayoutComparison(Table):
    """Steps of one model under several layouts, side by side: ring bytes sent per device, by kind and axes."""

    def __init__(self, rows, *, names: tuple[str, ...], totals: tuple[int, ...], title: str):
        super().__init__(rows, title=title)
        self.names, self.totals = tuple(names), tuple(totals)
        self.columns = ("kind", "over axes", *(f"{n}: sent" for n in names), "difference", "from (the larger)")

    def cells(self, row: CostDifference) -> list[str]:
        return [row.kind, "+".join(row.axes) or "-", *(f"{n:,}" for n in row.sent),
                f"{max(row.sent) - min(row.sent):,}", row.layers]

    @property
    def brief_columns(self) -> tuple[str, ...]:
        """What `brief()` keeps for a slide: every column but where the larger side's bytes come from."""
        return tuple(self.columns[:-1])

    @property
    def cheapest(self) -> str:
        return self.names[self.totals.index(min(self.totals))]

    def notes(self) -> list[str]:
        cheap, dear = min(self.totals), max(self.totals)
        lines = [f"{self.cheapest} sends the fewest bytes per device: {cheap:,} against {dear:,} for "
                 f"{self.names[self.totals.index(dear)]}" + (f" ({dear / cheap:.2f}x)." if cheap else ".")]
        lines += [f"- {r.kind} over {'+'.join(r.axes) or 'no axis'}: {max(r.sent) - min(r.sent):,} bytes apart "
                  f"({r.layers})" for r in self.rows[:3] if max(r.sent) != min(r.sent)]
        return lines


def compare_communication(reports: dict) -> LayoutComparison:
    """Which layout of one model sends less, and where the difference sits: the ring bytes per device of each
    step's collectives by kind and mesh axes, largest difference first.

    Args:
        reports: `communication_report`s of one model under each layout, by name, e.g.
            `{"official": ..., "corrected": ...}`.

    Example:
        >>> compare_communication({"official": official, "corrected": corrected})
    """
    if len(reports) < 2:
        raise ValueError(f"compare_communication compares two or more reports of one model. Received "
                         f"{len(reports)}: {list(reports)}.")
    names = tuple(reports)
    keys = list(dict.fromkeys((r.kind, r.axes) for report in reports.values() for r in report.collectives))
    rows = []
    for kind, axes in keys:
        sent = tuple(sum(r.sent_bytes for r in report.collectives if (r.kind, r.axes) == (kind, axes))
                     for report in reports.values())
        larger = list(reports.values())[sent.index(max(sent))]
        layers = list(dict.fromkeys(layer for r in larger.collectives if (r.kind, r.axes) == (kind, axes)
                                    for layer in r.layer.split(" + ")))
        rows.append(CostDifference(kind, axes, sent, layers[0] + (f" and {len(layers) - 1} more layers"
                                                                  if len(layers) > 1 else "")))
    rows.sort(key=lambda r: max(r.sent) - min(r.sent), reverse=True)
    totals = tuple(sum(r.sent_bytes for r in report.collectives) for report in reports.values())
    return LayoutComparison(rows, names=names, totals=totals,
                            title="Bytes each device sends in one training step, by layout (ring algorithm)")
