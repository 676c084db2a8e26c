"""Drawing the advisor's answer: each candidate's estimated step, compute and the communication it does not
hide, ranked; and a roofline: compute and communication time as the batch per device grows."""

from __future__ import annotations

from matplotlib.figure import Figure

from course_utils.advice.ranking import Advice
from course_utils.advice.candidates import shape_name
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MEMORY_COLORS, NEUTRAL_COLOR

COMPUTE_COLOR = MEMORY_COLORS["weights"]
COMMUNICATION_COLOR = MEMORY_COLORS["gradients"]


def draw_advice(advice: Advice, *, title: str | None = None) -> Figure:
    """One bar per candidate, in the advice's ranking, fastest at the top: its compute (milliseconds) and
    the communication its compute does not hide, stacked; at its end, its GiB per device and memory verdict, and,
    where the device set has links of more than one kind (several nodes, a TPU torus), the link each mesh axis
    crosses. A candidate that cannot split the model gets no bar and says so.

    Args:
        advice: An `Advice` from `advise`.
        title: The figure's title; defaults to the advice's.
    """
    rows = list(advice.rows)
    fig = Figure(figsize=(MAX_WIDTH, 1.2 + 0.34 * max(len(rows), 2)), layout="constrained")
    ax = fig.subplots()
    if not rows:  # nothing to rank: the reason, where the bars would be
        ax.axis("off")
        ax.text(0.5, 0.5, wrap(f"No candidate: {advice.empty}", chars_across(MAX_WIDTH - 0.6, FONT)),
                ha="center", va="center", fontsize=FONT, transform=ax.transAxes)
        fig.suptitle(wrap(title or advice.title, chars_across(MAX_WIDTH - 0.4, FONT)), fontsize=FONT)
        return fig
    longest = max((r.time.step for r in rows if r.time), default=1.0) * 1e3
    links = {r.mesh_shape: advice.links(r.mesh_shape) for r in rows}
    mixed = len({link.short for r in rows for _, link in advice.crossings(r.mesh_shape)}) > 1
    for i, row in enumerate(rows):
        if row.time is None:
            ax.text(0, i, f"  {row.verdict}: {wrap(row.problem, 80).splitlines()[0]}", va="center", fontsize=SMALL)
            continue
        compute, exposed = row.time.compute_total * 1e3, row.time.exposed * 1e3
        ax.barh(i, compute, color=COMPUTE_COLOR, label="compute" if i == 0 else None)
        ax.barh(i, exposed, left=compute, color=COMMUNICATION_COLOR, hatch="//", edgecolor="white",
                label="communication the compute does not hide" if i == 0 else None)
        crossed = f"; {links[row.mesh_shape]}" if mixed else ""
        ax.text(compute + exposed + 0.01 * longest, i, f"{row.memory_gib:.1f} GiB: {row.verdict}{crossed}",
                va="center", fontsize=SMALL)
    ax.set_yticks(range(len(rows)), [f"{k + 1}. {r.layout} {_shape(r.mesh_shape)}"
                                     for k, r in enumerate(rows)], fontsize=SMALL)
    ax.invert_yaxis()
    ax.set_xlim(0, longest * (2.1 if mixed else 1.35))
    ax.set_xlabel(f"estimated milliseconds per step on {advice.devices.name} (not measured)", fontsize=SMALL)
    ax.tick_params(axis="x", labelsize=SMALL)
    fig.legend(loc="outside lower center", ncols=2, fontsize=SMALL)
    fig.suptitle(wrap(title or advice.title, chars_across(MAX_WIDTH - 0.4, FONT)), fontsize=FONT)
    return fig


def _shape(mesh_shape) -> str:
    """"8 x 1", or "2 x (4, 1)" for two replicas of a (4, 1) mesh (as the advice's table writes it)."""
    return shape_name(mesh_shape) if len(mesh_shape) == 3 else " x ".join(str(n) for n in mesh_shape)


def draw_roofline(points, *, crossover: float | None = None, title: str = "", x_label: str = "tokens per device"
                  ) -> Figure:
    """Compute and communication seconds of one pass (or a step) as the batch per device grows, and where they
    cross: below it the step waits for its collectives (communication-bound), above it for its products.

    Args:
        points: (tokens per device, compute seconds, communication seconds), in order.
        crossover: Where the two meet (`advice.estimate.crossover`), marked with a line.
        title: The figure's title.
        x_label: What the x axis counts.
    """
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    xs = [p[0] for p in points]
    ax.plot(xs, [p[1] * 1e3 for p in points], "-o", color=COMPUTE_COLOR, label="compute")
    ax.plot(xs, [p[2] * 1e3 for p in points], "-s", color=COMMUNICATION_COLOR, label="communication")
    if crossover is not None:
        ax.axvline(crossover, color="black", linestyle="--", linewidth=1.2,
                   label=f"they cross at {crossover:,.0f} {x_label}")
        ax.axvspan(0, crossover, color=NEUTRAL_COLOR, alpha=0.5, linewidth=0, zorder=0,
                   label="communication-bound")
    ax.set_xlim(0, max(xs) * 1.05)
    ax.set_ylim(0, None)
    ax.set_xlabel(x_label, fontsize=SMALL)
    ax.set_ylabel("milliseconds (estimated)", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.legend(loc="upper left", fontsize=SMALL)
    if title:
        fig.suptitle(wrap(title, chars_across(7.1, FONT)), fontsize=FONT)
    return fig

