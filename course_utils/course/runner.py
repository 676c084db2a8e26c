"""Running the lessons unattended: as a learner leaves them, or with every solution filled in.

An exercise is a code cell tagged `exercise`; its worked solution is the
```python block inside the `<details>` markdown cell that follows it. The
tests and the benchmark both run lessons through `execute`.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

EXERCISE_TAG = "exercise"
_SOLUTION = re.compile(r"<details>.*?```python\n(.*?)```.*?</details>", re.S)
_MARK = "COURSE_PEAK_RSS="
_PROBE = (
    "import resource as _r, sys as _s\n"
    "_kb = [_r.getrusage(w).ru_maxrss // (1024 if _s.platform == 'darwin' else 1)\n"
    "       for w in (_r.RUSAGE_SELF, _r.RUSAGE_CHILDREN)]\n"
    f"print('{_MARK}' + ' '.join(map(str, _kb)))"
)


@dataclass(frozen=True)
class LessonRun:
    """One unattended run of a lesson."""

    path: Path
    notebook: nbformat.NotebookNode
    seconds: float
    peak_rss_mb: float
    child_peak_rss_mb: float = 0.0  # the largest process the lesson started (lesson 06's workers)


def lessons(folder: str | os.PathLike = "notebooks") -> list[Path]:
    """The lessons of the series, in order (files named `NN_*.ipynb`)."""
    return sorted(p for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))


def solution_for(notebook, index: int) -> str:
    """The worked solution of the exercise cell at `index`."""
    following = notebook.cells[index + 1] if index + 1 < len(notebook.cells) else None
    found = _SOLUTION.search(following.source) if following and following.cell_type == "markdown" else None
    if found is None:
        raise ValueError(
            f"Exercise cell {index} has no solution: the next cell must be markdown with a "
            f"<details> block holding a ```python block."
        )
    return found.group(1)


def exercise_cells(notebook) -> list[int]:
    """Indexes of the exercise cells."""
    return [i for i, c in enumerate(notebook.cells)
            if c.cell_type == "code" and EXERCISE_TAG in c.metadata.get("tags", [])]


def with_solutions(notebook):
    """A copy of the notebook whose exercise cells hold their worked solutions."""
    filled = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in exercise_cells(filled):
        filled.cells[i].source = solution_for(notebook, i)
    return filled


def execute(path: str | os.PathLike, *, solutions: bool = False, extra_cells: tuple[str, ...] = (),
            timeout: int = 600) -> LessonRun:
    """Runs a lesson top to bottom in a fresh kernel, from the lesson's folder.

    Args:
        path: The `.ipynb` file.
        solutions: Fill every exercise with its worked solution first.
        extra_cells: Code run after the lesson's last cell (e.g. assertions).
        timeout: Seconds allowed per cell.

    Returns:
        A `LessonRun` with the executed notebook, wall seconds, the kernel's
        peak resident memory and that of the largest process it started.
    """
    from nbclient import NotebookClient

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    if solutions:
        notebook = with_solutions(notebook)
    for source in (*extra_cells, _PROBE):
        notebook.cells.append(nbformat.v4.new_code_cell(source))
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    own_kb, child_kb = (int(v) for v in printed.split(_MARK, 1)[1].split()[:2])
    return LessonRun(path, notebook, seconds, own_kb / 1024, child_kb / 1024)
