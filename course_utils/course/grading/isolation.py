"""Grading one hand-in at a time, apart from the course directory: `grade_one`, `grading_lock`.

Each hand-in is copied into a fresh nbgrader course directory of its own, in a temporary
folder outside the course: the assignment's source, a gradebook that knows only the
assignment (`make_template`, once per grading run), and that one notebook. nbgrader
autograde runs there, with a time limit, its working folder in that copy, below a keeper
that stops every process it started, and in the run's sandbox where the machine has one
(`sandbox`: bubblewrap hides the course directory, the other hand-ins and the solutions); then
`grade_one` reads the answers back from the executed notebook's outputs and checks them again
in the grader's own process (`recheck.recheck`). What the grade reads are copies (the hand-in,
the gradebook the score is copied from), so a student who breaks them breaks only their own
grade; the course's gradebook is written by `assignment.grade_assignment`, after the student's
processes are gone, and the course directory is checked after each hand-in (`safekeeping`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.course.grading import wire as grade_wire
from course_utils.course.grading.recheck import recheck
from course_utils.course.grading.sandbox import Sandbox, run_hand_in

LOCK = "grading.lock"


class GradingBusy(RuntimeError):
    """Another grading run holds the course directory's lock."""


@contextlib.contextmanager
def grading_lock(root: str | os.PathLike):
    """Holds `<root>/grading.lock` for the block; raises `GradingBusy` while another run holds it.

    An OS lock (`flock`), so it goes when its process ends, even killed: the file staying behind
    is not a lock.
    """
    path = Path(root) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "another process"
            raise GradingBusy(f"{path} is held by {holder}: another grading or build of this course directory is "
                              f"running. Wait for it to finish, then run this again (the lock goes when that "
                              f"process ends).") from None
        file.seek(0)
        file.truncate()
        file.write(f"pid {os.getpid()} ({' '.join(sys.argv[:3])}), since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        file.flush()
        try:
            yield path
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Graded:
    """One hand-in's points per test cell (the grader's own check), and what to tell the teacher."""

    student: str
    scores: dict[str, float]
    notes: tuple[str, ...] = ()
    autograded: Path | None = field(default=None, compare=False)

    @property
    def note(self) -> str:
        return "; ".join(self.notes)


def nbgrader_command(root: str | os.PathLike, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Runs `nbgrader <args>` in the course directory with this Python's nbgrader (the teacher's own commands:
    generate_assignment, export; a student's hand-in runs through `sandbox.run_hand_in`)."""
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=_nbgrader_env(),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done


def _nbgrader_env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # nbgrader calls `alembic` by name
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def make_template(root: Path, assignment: str, scratch: Path, *, timeout: int) -> Path:
    """A course directory holding only `assignment`: its config, and a copy of the gradebook without students."""
    from nbgrader.api import Gradebook

    template = scratch / "template"
    template.mkdir()
    config = (root / "nbgrader_config.py").read_text()
    (template / "nbgrader_config.py").write_text(
        f"{config}\n# grade --timeout: each cell's time limit for this run\nc.Execute.timeout = {int(timeout)}\n")
    shutil.copy2(root / "gradebook.db", template / "gradebook.db")
    with Gradebook(f"sqlite:///{template / 'gradebook.db'}") as gradebook:
        for student in [s.id for s in gradebook.students]:
            gradebook.remove_student(student)  # with their submissions: no hand-in sees another's
        for other in [a.name for a in gradebook.assignments if a.name != assignment]:
            gradebook.remove_assignment(other)
    return template


def grade_one(template: Path, assignment: str, student: str, notebook: Path, *, timeout: int,
              cells: int, sandbox: Sandbox) -> Graded:
    """Autogrades one hand-in in a copy of `template`; its points come from the grader's own check.

    Args:
        template: From `make_template`.
        notebook: The prepared hand-in (nbgrader's release version, answers in place).
        timeout: Seconds each cell may run.
        cells: Code cells in the notebook (the whole run may take `cells * timeout` seconds).
        sandbox: How the hand-in runs (`sandbox.choose_sandbox`).
    """
    holder = Path(tempfile.mkdtemp(prefix="grading-hand-in-"))  # outside the run's folder, which stays hidden
    work = holder / student
    shutil.copytree(template, work)
    try:
        target = work / "submitted" / student / assignment / notebook.name
        target.parent.mkdir(parents=True)
        shutil.copy2(notebook, target)
        command = [sys.executable, "-m", "nbgrader", "autograde", assignment, f"--student={student}", "--force"]
        status, output = run_hand_in(command, work, cells * timeout + 120, sandbox, _nbgrader_env())
        executed = work / "autograded" / student / assignment / notebook.name
        if status is None or status != 0 or not executed.exists():
            why = (f"ran past {cells * timeout + 120} s in all" if status is None
                   else f"nbgrader autograde failed: {_failure(output, work)}")
            return Graded(student, {}, (why,))
        kept = template.parent / "autograded" / student / notebook.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(executed, kept)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    return _checked(student, kept)


FULL = ("No space left on device", "database or disk is full", "Errno 28", "Disk quota exceeded")


def _failure(output: str, work: Path) -> str:
    """Why nbgrader failed, from its output: a full disk said as such (nbgrader calls it a database error)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    full = next((line for line in lines if any(sign in line for sign in FULL)), None)
    if full is not None:
        full = re.sub(r"^\[[^\]]*\]\s*", "", full)  # without nbgrader's "[AutogradeApp | ERROR]"
        grown = sum(p.stat().st_size for p in Path(work).rglob("*") if p.is_file() and not p.is_symlink())
        return (f"the disk filled up while it ran ({full[:200]}); its grading copy had grown to "
                f"{grown / 2**20:,.0f} MiB, written by the hand-in's code. That copy is deleted and the other "
                f"hand-ins are graded; look at the notebook for what it writes")
    errors = [line for line in lines if "rror" in line or "[AutogradeApp | ERROR]" in line]
    return (errors or lines or ["(no output)"])[-1][:500]


def answers_in(notebook) -> tuple[dict[str, dict], dict[str, dict], dict[str, str]]:
    """From an executed notebook: {grade id: its answer's data}, {grade id: cell metadata}, {grade id: exercise}."""
    wires, tests, exercises = {}, {}, {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("grade") and meta.get("grade_id", "").startswith("test_")):
            continue
        grade_id = meta["grade_id"]
        tests[grade_id] = meta
        exercises[grade_id] = grade_id.removeprefix("test_").replace("_", ".", 1)
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get(grade_wire.MIME)
            if isinstance(data, dict) and "answer" in data:
                wires[grade_id] = data  # the last one the cell showed
    return wires, tests, exercises


def _checked(student: str, executed: Path) -> Graded:
    notebook = nbformat.read(executed, as_version=4)
    wires, tests, exercises = answers_in(notebook)
    carried = {exercises[g]: w["answer"] for g, w in wires.items() if exercises[g] not in grade_wire.LIVE}
    try:
        verdicts = recheck(carried)
    except RuntimeError as error:
        return Graded(student, {}, (f"the course's check failed: {error}",), executed)
    scores, notes = {}, _stopped(notebook)
    for grade_id, meta in tests.items():
        exercise, wire = exercises[grade_id], wires.get(grade_id)
        if wire is None:
            status = "no answer"
            notes.append(f"{exercise}: no answer reached its test cell (a name undefined, or the cell stopped)")
        elif exercise in grade_wire.LIVE:
            status = wire.get("kernel_status")
            notes.append(f"{exercise}: a live model, checked only inside the student's notebook")
        else:
            status = verdicts[exercise]["status"]
            if wire.get("kernel_status") == "correct" and status != "correct":
                notes.append(f"{exercise}: the notebook's own check said correct, the course's check says "
                             f"{status} (was check or its module replaced?)")
        scores[grade_id] = float(meta.get("points", 0)) if status == "correct" else 0.0
    return Graded(student, scores, tuple(notes), executed)


def _stopped(notebook) -> list[str]:
    """A note for each cell nbgrader stopped at its time limit, and each answer cell that raised."""
    notes = []
    for number, cell in enumerate(notebook.cells, 1):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            if output.get("ename") == "CellTimeoutError":
                notes.append(f"cell {number} ({grade_id or 'not graded'}) ran past the time limit and was stopped")
            elif grade_id.startswith("answer_"):
                notes.append(f"answer cell {grade_id} raised {output.get('ename')}: {str(output.get('evalue'))[:120]}")
    return notes


def code_cells(notebook: Path) -> int:
    with contextlib.suppress(Exception):
        return sum(c.get("cell_type") == "code" for c in json.loads(notebook.read_text())["cells"])
    return 1
