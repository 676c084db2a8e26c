"""Running the lessons unattended: as a learner leaves them, or with every solution filled in.

An exercise is a code cell tagged `exercise`; its worked solution is the
```python block inside the `<details>` markdown cell that follows it. The
tests and the benchmark both run lessons through `execute`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.checking.jupyter_kernels import Kernels, client_class
from course_utils.course.lesson_parts import with_solutions

_MARK = "COURSE_PEAK_RSS="
# The kernel's own peak: Linux's VmHWM. Its ru_maxrss would also count the memory of the process that
# started it (Linux carries a parent's peak into the child it starts),
# so a kernel started by a large test process would seem as large. Elsewhere, ru_maxrss.
_PROBE = (
    "import resource as _r, sys as _s\n"
    "_unit = 1024 if _s.platform == 'darwin' else 1\n"
    "try:\n"
    "    with open('/proc/self/status') as _f:\n"
    "        _own = int(next(_l for _l in _f if _l.startswith('VmHWM:')).split()[1])\n"
    "except (OSError, StopIteration, ValueError):\n"
    "    _own = _r.getrusage(_r.RUSAGE_SELF).ru_maxrss // _unit\n"
    "_kb = [_own, _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss // _unit]\n"
    f"print('{_MARK}' + ' '.join(map(str, _kb)) + ' ' + _s.prefix)"
)


# An extra cell that prints every checker's verdict at the end of a run (`verdicts` reads it).
VERDICTS_CELL = ("import json as _json\nfrom course_utils.exercises import results as _results\n"
                 "print(_json.dumps([[v.exercise, v.status, v.message] for v in _results()]))")


@dataclass(frozen=True)
class LessonRun:
    """One unattended run of a lesson.

    Attributes:
        path: The lesson's file.
        notebook: The lesson as it ran, with its outputs: only the lesson's own cells (the cells
            the runner adds to check claims, run extras and measure memory are taken out).
        seconds: Wall time of the whole run.
        peak_rss_mb: The kernel's own peak resident memory.
        child_peak_rss_mb: The largest process the lesson started (lesson 06's workers), at most:
            Linux counts in a child's peak the memory the kernel held when it started the child.
        extras: The extra cells, as they ran (their outputs).
        claims: The verdict of every claim the lesson makes (`course_utils.course.checking.claims`).
        kernel_prefix: The kernel's `sys.prefix`: the environment it ran in.
    """

    path: Path
    notebook: nbformat.NotebookNode
    seconds: float
    peak_rss_mb: float
    child_peak_rss_mb: float = 0.0
    extras: tuple = ()
    claims: tuple = ()
    kernel_prefix: str = ""  # the kernel's sys.prefix: which environment it ran in

    def verdicts(self) -> dict[str, tuple[str, str]]:
        """Every checker's verdict at the end of the run, `{exercise: (status, message)}`, from the
        extra cell `VERDICTS_CELL` (which must have been among the run's extra cells)."""
        for cell in self.extras:
            if cell.source == VERDICTS_CELL:
                printed = "".join(o.get("text", "") for o in cell.outputs)
                return {exercise: (status, message) for exercise, status, message in json.loads(printed)}
        raise ValueError(f"{self.path.name} ran without VERDICTS_CELL among its extra cells.")

    @property
    def false_claims(self) -> list:
        """The claims whose check did not hold, each naming its passage and what was found."""
        return [v for v in self.claims if not v.holds]


def execute(path: str | os.PathLike, *, solutions: bool = False, extra_cells: tuple[str, ...] = (),
            timeout: int = 600, env: dict | None = None, kernel: str = "python3",
            _kernels: Kernels | None = None) -> LessonRun:
    """Runs a lesson top to bottom in a fresh kernel, from the lesson's folder, checking its claims.

    After each code cell that carries claims, a cell evaluates their checks in the kernel
    (`course_utils.course.checking.claims`); the verdicts come back in `LessonRun.claims`.

    Args:
        path: The `.ipynb` file.
        solutions: Fill every exercise with its worked solution first.
        extra_cells: Code run after the lesson's last cell (e.g. assertions).
        timeout: Seconds allowed per cell.
        env: Environment variables added to the kernel's (e.g. `TMPDIR`).
        kernel: The kernelspec to run it in (another environment's kernel, e.g. Binder's).
        _kernels: Where `execute_series` keeps the running kernels, to stop them when the series stops.

    Returns:
        A `LessonRun` with the executed lesson, wall seconds, the kernel's peak resident memory
        and that of the largest process it started, the extra cells and the claims' verdicts.
    """
    from course_utils.course.checking import claims

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    if solutions:
        notebook = with_solutions(notebook)
    checks: dict[int, list] = {}
    for claim in claims.claims_of(notebook):
        checks.setdefault(claim.cell, []).append(claim)
    cells = []
    for i, cell in enumerate(notebook.cells):
        cells.append(cell)
        if i in checks:
            cells.append(_harness_cell(claims.check_cell_source(checks[i]), "claims"))
    cells += [_harness_cell(source, "extra") for source in extra_cells]
    cells.append(_harness_cell(_PROBE + "\nfrom course_utils.course.checking.claims import report as _course_report\nprint(_course_report())", "probe"))
    notebook.cells = cells
    # Everything the run reports is read before the kernel stops, so it is stopped at once: a graceful
    # shutdown only spends a second tearing Keras and JAX down, which no learner waits for (a lesson
    # cleans up after itself in its cells: tests/test_checkpoints.py checks lesson 07's temporary folder).
    client = client_class()(notebook, timeout=timeout, kernel_name=kernel, shutdown_kernel="immediate",
                             resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    with _kernels.running(client) if _kernels is not None else contextlib.nullcontext():
        client.execute(**({"env": {**os.environ, **env}} if env else {}))
    seconds = time.perf_counter() - start
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    own_kb, child_kb, prefix = printed.split(_MARK, 1)[1].splitlines()[0].split(" ", 2)
    extras = tuple(c for c in notebook.cells if c.metadata.get(claims.HARNESS) == "extra")
    notebook.cells = [c for c in notebook.cells if claims.HARNESS not in c.metadata]
    return LessonRun(path, notebook, seconds, int(own_kb) / 1024, int(child_kb) / 1024, extras,
                     tuple(claims.read_report(printed)), prefix)


CELL_TIMEOUT = 600  # seconds a lesson's cell may run, unless a build's --timeout says otherwise


def cell_seconds(value: str) -> int:
    """`--timeout`'s value for the builds that run lessons: whole seconds, at least 1 (an argparse type)."""
    import argparse

    try:
        seconds = int(value)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"a whole number of seconds of at least 1, e.g. --timeout 120. "
                                         f"Received: {value!r}")
    return seconds


# Lessons a build runs at once: each is a kernel process of its own, and most of a cold run is one XLA
# compile at a time, so two kernels keep two cores busy (the test suite runs its lessons the same way).
SERIES_WORKERS = 2


@dataclass(frozen=True)
class Failed:
    """A lesson whose run did not reach its end, and why (one line: the cell's error, or the time-out)."""

    path: Path
    why: str

    def __str__(self) -> str:
        return f"{self.path.name} did not run to its end: {self.why}"


class IncompleteBuild(RuntimeError):
    """A build that wrote every lesson it could and marked the others: raised once it is written.

    Attributes:
        written: The build's main file (an index page, the answer key).
        problems: One line per lesson that failed or says what its run did not compute.
    """

    def __init__(self, written: Path, problems: list[str]):
        self.written, self.problems = Path(written), list(problems)
        super().__init__(f"{len(problems)} lesson{'s' if len(problems) != 1 else ''} did not build as written; "
                         f"the others were, and these are marked in {written}:\n"
                         + "\n".join(f"  {line}" for line in problems)
                         + "\nFix the lesson (tests/lessons/test_notebooks.py runs it), then build again.")


def why_failed(error: BaseException, timeout: int) -> str:
    """One line saying why a lesson's run stopped: its cell's error (the last line of the traceback)."""
    if type(error).__name__ == "CellTimeoutError":
        return f"a cell ran over {timeout} s (--timeout)"
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:200]


class _SeriesStop:
    """Which lessons of a series may still start. A thread takes the next lesson as soon as its last one ends,
    before the series' generator hears of the end: so a lesson that fails stops the series itself, and no lesson
    after it starts; one before it still runs (the caller reads the runs in order, and reaches that one first).
    When the generator stops, nothing more starts."""

    def __init__(self):
        self._lock, self._failed_at, self._all = threading.Lock(), None, False

    def check(self, index: int, path) -> None:
        """Raises, so that the lesson never starts, when the series stopped before its turn."""
        with self._lock:
            if self._all or (self._failed_at is not None and index > self._failed_at):
                raise RuntimeError(f"{path}: not started, the series had stopped")

    def failed(self, index: int) -> None:
        with self._lock:
            self._failed_at = index if self._failed_at is None else min(self._failed_at, index)

    def everything(self) -> None:
        with self._lock:
            self._all = True


def execute_series(paths: Iterable[str | os.PathLike], *, workers: int = SERIES_WORKERS,
                   keep_going: bool = False, **kwargs) -> Iterator[LessonRun | Failed]:
    """Runs lessons `workers` at a time (`execute(path, **kwargs)` each) and yields their runs in order.

    Each lesson runs in a kernel of its own, so running two at once changes nothing they compute; only
    the wall times they report (`LessonRun.seconds`) share the machine, which is why `make bench` runs
    its lessons one at a time. When the series stops early (a lesson raises, the caller stops reading,
    Ctrl-C), the lessons not yet started never start and the kernels still running are stopped.

    Args:
        paths: The lessons, in the order their runs are yielded.
        workers: How many run at once (1: one after another).
        keep_going: A lesson that raises (a cell's error, a time-out, a kernel that died) is yielded
            as `Failed` and the series goes on; by default its error stops the series. Ctrl-C
            stops it either way.
        **kwargs: Passed to `execute`.

    Yields:
        A `LessonRun` per lesson (or, with `keep_going`, a `Failed`), in the order of `paths`.
    """
    from concurrent.futures import ThreadPoolExecutor, wait

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers is how many lessons run at once, a whole number of at least 1. "
                         f"Received: {workers!r}.")
    kernels, stop = Kernels(), _SeriesStop()

    def run_lesson(index, path):
        stop.check(index, path)
        try:
            return execute(path, _kernels=kernels, **kwargs)
        except Exception:
            if not keep_going:
                stop.failed(index)
            raise

    pool = ThreadPoolExecutor(workers, thread_name_prefix="lesson")
    futures = collections.deque((Path(path), pool.submit(run_lesson, i, path)) for i, path in enumerate(paths))
    try:
        while futures:
            path, future = futures[0]  # still listed while awaited: Ctrl-C here must stop its kernel too
            try:
                run = future.result()
            except Exception as error:
                if not keep_going:
                    raise
                run = Failed(path, why_failed(error, kwargs.get("timeout", CELL_TIMEOUT)))
            futures.popleft()  # a run is dropped here once yielded
            yield run
    finally:
        stop.everything()
        running = [f for _, f in futures if not f.cancel()]  # stopped early: these had started
        while running:
            kernels.kill()  # again each round, for a kernel that was still starting
            running = list(wait(running, timeout=0.5).not_done)
        pool.shutdown()


def _harness_cell(source: str, role: str):
    from course_utils.course.checking.claims import HARNESS

    return nbformat.v4.new_code_cell(source, metadata={HARNESS: role})
