"""Drawing the sequence as a mesh axis: what one decoder block keeps as the sequence grows, and the steps of
ring attention (which block of keys and values each device holds, and what its queries see of it).

Both draw plain data from `course_utils.sequence` (`BlockMemory` rows, `RingStep`s), never a model.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from course_utils.viz.figures import BLOCK_GID, FONT, SMALL, chars_across, wrap
from course_utils.viz.palette import COPY_COLOR, MEMORY_COLORS, NEUTRAL_COLOR, STEP_COLORS, device_color, text_color

SCORES_COLOR = MEMORY_COLORS["optimizer"]  # the s x s scores
TOKENS_COLOR = STEP_COLORS["activations"]  # the s x d arrays
COMPILED_COLOR = MEMORY_COLORS["weights"]


def draw_block_memory(rows, *, title: str = "") -> Figure:
    """For each sequence length, the bytes one decoder block's backward pass keeps (stacked: the s x s scores on
    the s x d arrays) beside what XLA's compiled forward and backward pass of the block needs, in GiB.

    Args:
        rows: `BlockMemory` rows (`course_utils.sequence.block_memory`), in order of length.
        title: The figure's title.
    """
    fig = Figure(figsize=(7.5, 4.4), layout="constrained")
    ax = fig.subplots()
    width = 0.38
    places = range(len(rows))
    gib = 2**30
    ax.bar([i - width / 2 for i in places], [r.tokens / gib for r in rows], width, color=TOKENS_COLOR,
           label="kept: s x d arrays (grow with s)")
    ax.bar([i - width / 2 for i in places], [r.scores / gib for r in rows], width, bottom=[r.tokens / gib for r in rows],
           color=SCORES_COLOR, label="kept: s x s scores (grow with s²)")
    ax.bar([i + width / 2 for i in places], [r.compiled / gib for r in rows], width, color=COMPILED_COLOR,
           label="XLA's compiled pass (temporaries)")
    for i, r in enumerate(rows):
        for x, value in ((i - width / 2, r.tokens + r.scores), (i + width / 2, r.compiled)):
            ax.text(x, value / gib, f"{value / gib:.2f}", ha="center", va="bottom", fontsize=SMALL)  # as lesson 11 prints
    ax.set_xticks(list(places), [f"{r.seq:,} tokens" for r in rows], fontsize=SMALL)
    ax.set_ylabel("GiB for one block, one sequence", fontsize=SMALL)
    ax.set_ylim(0, max(max(r.compiled, r.tokens + r.scores) for r in rows) / gib * 1.18)
    ax.tick_params(axis="y", labelsize=SMALL)
    ax.legend(loc="upper left", fontsize=SMALL)
    if title:
        fig.suptitle(wrap(title, chars_across(7.1, FONT)), fontsize=FONT)
    return fig


def draw_ring(steps, *, title: str = "") -> Figure:
    """One row per device, one column per step of ring attention: each cell names the block of keys and values
    the device holds at that step, in the colour of the device it started on, and says what its queries see of
    it: every key, the keys up to each query in its own block (outlined), or nothing (all masked, grey).

    Args:
        steps: `RingStep`s (`course_utils.sequence.ring_schedule`).
        title: The figure's title.
    """
    n = 1 + max(s.device for s in steps)
    fig = Figure(figsize=(1.05 * n + 2.2, 0.4 * n + 1.5), layout="constrained")
    ax = fig.subplots()
    for s in steps:
        y = n - 1 - s.device
        color = device_color(s.block) if s.seen != "none" else COPY_COLOR
        ax.add_patch(_cell(s.step, y, color, own=s.seen == "diagonal"))
        label = f"kv {s.block}" if s.seen != "none" else f"(kv {s.block})"
        ax.text(s.step + 0.5, y + 0.5, label, ha="center", va="center", fontsize=FONT,
                color=text_color(color) if s.seen != "none" else "#555555")
    ax.set_xlim(0, n)
    ax.set_ylim(0, n)
    ax.set_xticks([i + 0.5 for i in range(n)], [f"step {i}" for i in range(n)], fontsize=SMALL)
    ax.set_yticks([n - 1 - d + 0.5 for d in range(n)], [f"cpu:{d}  (queries {d})" for d in range(n)], fontsize=SMALL)
    ax.tick_params(length=0)
    ax.set_aspect("auto")
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("each step: attend to the block held, then pass it to the next device (cpu:i → cpu:i+1); "
                  "the last step sends nothing",
                  fontsize=SMALL)
    fig.legend(handles=[_cell(0, 0, NEUTRAL_COLOR, own=True), _cell(0, 0, COPY_COLOR)],
              labels=["own block: each query sees the keys up to itself", "(kv i): masked, later tokens computed for nothing"],
              loc="outside lower center", ncols=2, fontsize=SMALL)
    if title:
        fig.suptitle(wrap(title, chars_across(1.05 * n + 2.0, FONT)), fontsize=FONT)
    return fig


def _cell(x: float, y: float, color: str, *, own: bool = False):
    from matplotlib.patches import Rectangle

    return Rectangle((x + 0.06, y + 0.08), 0.88, 0.84, facecolor=color, edgecolor="black" if own else "white",
                     linewidth=2.5 if own else 1.0, gid=BLOCK_GID)
