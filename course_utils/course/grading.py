"""Grading with nbgrader: the course's exercises as nbgrader autograded cells.

`build_course(notebooks, root)` writes an nbgrader course directory: one
assignment per lesson (`lesson01` ...) in `source/`, made from the lessons
themselves. Each exercise cell becomes an nbgrader solution cell whose
solution region holds the lesson's own worked solution; the cell after it
(the collapsed solution) becomes a locked autograder test cell worth one point
that asserts `check("03.2", answer).ok`: the same checker, no second copy of
any answer. The slides' teacher's notes are left out (they say the answers).
nbgrader's own `generate_assignment` then writes the release version into
`release/`.

    python -m course_utils.course.builds nbgrader --out _build/nbgrader
    python -m course_utils.course.builds grade lesson03 --out _build/nbgrader   # after collecting submissions

`grade` grades whatever notebook a student hands in: nbgrader's release version as it is, and
the lesson itself (as Binder, `notebooks/` or the student build gave it) by carrying each
exercise cell's answer into the release version (the notebook handed in is kept, untouched, in
`submitted-originals/`). A notebook that holds none of the lesson's exercises is refused, with a
message saying what to hand out, never graded 0 in silence. Its `grades.csv` lists only the
assignments something was handed in for.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.transforms import exercise_cell, exercise_cells, lessons, solution_for, teacher_only

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CONFIG = '''\
# nbgrader configuration of the course (written by python -m course_utils.course.builds nbgrader).
c = get_config()
c.CourseDirectory.course_id = "device-meshes"
# A released exercise cell keeps the lesson's own blank (answer = ...); the solution region leaves nothing.
c.ClearSolutions.code_stub = {"python": ""}
# Lessons 05 and 06 train models and start processes: allow each cell ten minutes.
c.Execute.timeout = 600
'''


def assignment_name(path: str | os.PathLike) -> str:
    """The nbgrader assignment of a lesson: `03_the_2x4_example.ipynb` -> `lesson03`."""
    return f"lesson{Path(path).stem[:2]}"


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: int | None = None) -> dict:
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def source_notebook(notebook):
    """nbgrader's source version of a lesson: solution cells and locked test cells, one point each."""
    nb = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in reversed(exercise_cells(nb)):
        call = exercise_cell(nb.cells[i].source)
        solution = "\n".join(line for line in solution_for(nb, i).splitlines() if "check(" not in line)
        suffix = call.exercise.replace(".", "_")  # nbgrader ids allow letters, digits, _ and -
        cell = nb.cells[i]
        cell.source = "\n".join([call.blank, BEGIN, solution.rstrip(), END,
                                 f'check("{call.exercise}", {call.name})'])
        cell.metadata["nbgrader"] = _nbgrader(f"answer_{suffix}", solution=True, grade=False, locked=False)
        test = nbformat.v4.new_code_cell(
            f'_verdict = check("{call.exercise}", {call.name})\nassert _verdict.ok, _verdict')
        test.metadata["nbgrader"] = _nbgrader(f"test_{suffix}", solution=False, grade=True, locked=True,
                                              points=1)
        test.metadata["slideshow"] = {"slide_type": "skip"}
        nb.cells[i + 1] = test  # in place of the collapsed solution
    nb.cells = [cell for cell in nb.cells if not teacher_only(cell)]  # the slides' notes hold answers too
    return nb


def nbgrader_command(root: str | os.PathLike, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Runs `nbgrader <args>` in the course directory with this Python's nbgrader."""
    bin_dir = str(Path(sys.executable).parent)  # nbgrader calls `alembic` by name
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done


def build_course(folder: str | os.PathLike, root: str | os.PathLike, *, release: bool = True,
                 only: tuple[str, ...] = ()) -> Path:
    """Writes an nbgrader course directory from the lessons, then its release version.

    Args:
        folder: The lessons' folder.
        root: The course directory to create (holds `nbgrader_config.py`).
        release: Run `nbgrader generate_assignment` for each lesson.
        only: Lesson numbers to include (e.g. `("01",)`); empty means every lesson with exercises.

    Returns:
        The course directory.
    """
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        raise RuntimeError("Grading needs nbgrader: pip install nbgrader==0.9.6 (or make nbgrader).") from None
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(CONFIG)
    for path in lessons(folder):
        notebook = nbformat.read(path, as_version=4)
        if not exercise_cells(notebook) or (only and path.stem[:2] not in only):
            continue
        target = root / "source" / assignment_name(path) / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(notebook), target)
        if release:
            nbgrader_command(root, "generate_assignment", assignment_name(path), "--force")
    return root


def scores(root: str | os.PathLike, assignment: str, student: str) -> dict[str, float]:
    """Points per autograded test cell of one student's submission, read from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, student)
        return {grade.name: grade.score for notebook in submission.notebooks for grade in notebook.grades}


@dataclass(frozen=True)
class Submission:
    """One student's notebook for an assignment, and what `prepare_submissions` made of it."""

    student: str
    handed_in: Path | None
    status: str  # "as released", "carried over" (a lesson's answers into the release), "refused"
    message: str

    def __str__(self) -> str:
        return f"{self.student}: {self.status}: {self.message}"


def _exercise_answers(notebook) -> dict[str, str]:
    """Exercise id -> the source of the cell that checks it (the tagged exercise cell where there is one)."""
    found: dict[str, tuple[bool, str]] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code" or "check(" not in cell.source:
            continue
        try:
            call = exercise_cell(cell.source)
        except (ValueError, SyntaxError):
            continue
        tagged = "exercise" in cell.metadata.get("tags", [])
        if tagged or not found.get(call.exercise, (False, ""))[0]:
            found[call.exercise] = (tagged, cell.source)
    return {exercise: source for exercise, (_, source) in found.items()}


def _grade_ids(notebook) -> dict[str, str]:
    """Exercise id -> grade id of each released solution cell (`answer_03_2` -> "03.2")."""
    ids = {}
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("answer_") and cell.metadata["nbgrader"].get("solution"):
            ids[grade_id.removeprefix("answer_").replace("_", ".", 1)] = grade_id
    return ids


def _keep_original(root: Path, student: str, assignment: str, path: Path) -> Path:
    """Copies a handed-in notebook to `submitted-originals/` (never over an earlier copy)."""
    folder = root / "submitted-originals" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    target, n = folder / path.name, 1
    while target.exists() and target.read_bytes() != path.read_bytes():
        target, n = folder / f"{path.stem}.{n}{path.suffix}", n + 1
    shutil.copy2(path, target)
    return target


def prepare_submissions(root: str | os.PathLike, assignment: str) -> list[Submission]:
    """Makes every notebook handed in for `assignment` one nbgrader grades right, or refuses it.

    Args:
        root: The nbgrader course directory (`submitted/<student>/<assignment>/` inside).
        assignment: e.g. "lesson03".

    Returns:
        One `Submission` per student folder; a refused one is left as handed in and named.
    """
    root = Path(root)
    releases = sorted((root / "release" / assignment).glob("*.ipynb"))
    if not releases:
        raise ValueError(f"No release of {assignment!r} in {root / 'release'}: build the course directory first "
                         f"(python -m course_utils.course.builds nbgrader --out {root}).")
    release = nbformat.read(releases[0], as_version=4)
    wanted, name = _grade_ids(release), releases[0].name
    done = []
    for folder in sorted((root / "submitted").glob(f"*/{assignment}")):
        student = folder.parent.name
        notebooks = sorted(folder.glob("*.ipynb"))
        chosen = folder / name if (folder / name).exists() else notebooks[0] if len(notebooks) == 1 else None
        if chosen is None:
            done.append(Submission(student, None, "refused", (
                f"{folder} holds {len(notebooks)} notebooks, none named {name}: leave only the lesson's "
                f"notebook there ({[p.name for p in notebooks]})")))
            continue
        done.append(_prepare_one(root, student, assignment, chosen, release, wanted, name))
    return done


def _prepare_one(root, student, assignment, path, release, wanted, name) -> Submission:
    notebook = nbformat.read(path, as_version=4)
    if set(_grade_ids(notebook)) >= set(wanted):
        if path.name != name:
            _keep_original(root, student, assignment, path)
            path.rename(path.with_name(name))
        return Submission(student, path, "as released", f"{path.name}: nbgrader's release version, graded as it is")
    answers = {e: source for e, source in _exercise_answers(notebook).items() if e in wanted}
    if not answers:
        others = sorted(_exercise_answers(notebook))
        held = f" (it holds exercises {', '.join(others)})" if others else ""
        return Submission(student, path, "refused", (
            f"{path} holds none of {assignment}'s exercises {', '.join(sorted(wanted))}{held}. Hand out "
            f"release/{assignment}/{name} (or the lesson {name} from Binder, notebooks/ or the student build) "
            f"and collect that notebook"))
    kept = _keep_original(root, student, assignment, path)
    graded = nbformat.from_dict(json.loads(json.dumps(release)))
    for cell in graded.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        exercise = next((e for e, g in wanted.items() if g == grade_id), None)
        if exercise in answers:
            cell.source = answers[exercise]
    path.unlink()
    nbformat.write(graded, path.with_name(name))
    return Submission(student, path, "carried over", (
        f"{path.name}: the lesson as students run it; its answers to {', '.join(sorted(answers))} carried into "
        f"nbgrader's release version (the notebook handed in is kept as {kept.relative_to(root)})"))


def export_grades(root: str | os.PathLike, out: str | os.PathLike | None = None) -> tuple[Path, list[str]]:
    """nbgrader's grades, as `grades.csv`, for the assignments something was handed in for.

    Returns:
        (the file written, the assignments left out because nobody handed anything in).
    """
    from nbgrader.api import Gradebook

    root = Path(root)
    out = Path(out or root / "grades.csv")
    with Gradebook(f"sqlite:///{root.resolve() / 'gradebook.db'}") as gradebook:
        handed_in = {a.name for a in gradebook.assignments if a.submissions}
        left_out = sorted(a.name for a in gradebook.assignments if not a.submissions)
    with tempfile.TemporaryDirectory() as scratch:
        every = Path(scratch) / "grades.csv"
        nbgrader_command(root, "export", f"--to={every}")
        with every.open(newline="") as file:
            rows = list(csv.DictReader(file))
            columns = list(rows[0]) if rows else ["assignment"]
    with out.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(row for row in rows if row["assignment"] in handed_in)
    return out, left_out


def grade(root: str | os.PathLike, assignment: str) -> tuple[list[Submission], Path, list[str]]:
    """Prepares the submissions of `assignment`, autogrades them with nbgrader, exports grades.csv.

    A refused submission is not graded (it has no row in grades.csv); its `Submission` says why.
    """
    submissions = prepare_submissions(root, assignment)
    refused = [s.student for s in submissions if s.status == "refused"]
    if len(refused) < len(submissions):  # a refused notebook is not graded at all, so never 0 in silence
        nbgrader_command(root, "autograde", assignment, "--force",
                         *([f"--CourseDirectory.student_id_exclude={','.join(refused)}"] if refused else []))
    grades, left_out = export_grades(root)
    return submissions, grades, left_out
