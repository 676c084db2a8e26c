"""Grading with nbgrader: the course's exercises as nbgrader autograded cells.

`build_course(notebooks, root)` writes an nbgrader course directory: one
assignment per lesson (`lesson01` ...) in `source/`, made from the lessons
themselves. Each exercise cell becomes an nbgrader solution cell whose
solution region holds the lesson's own worked solution; the cell after it
(the collapsed solution) becomes a locked autograder test cell worth one point
that runs `wire.hand_in("03.2", answer)`: the same checker, no second copy of
any answer. The slides' teacher's notes are left out (they say the answers).
nbgrader's own `generate_assignment` then writes the release version into
`release/`. A `nbgrader_config.py` the teacher edited is kept (the course's version is
written beside it, `nbgrader_config.py.course-default`).

    python -m course_utils.course build nbgrader --out _build/nbgrader
    python -m course_utils.course grade lesson03 --out _build/nbgrader   # after collecting submissions

`assignment.grade_assignment` grades whatever notebook a student hands in (`submissions`): nbgrader's release
version as it is, and the lesson itself (as Binder, `notebooks/` or the student build gave it) by
carrying each exercise cell's answer into the release version (the notebook handed in is kept,
untouched, in `submitted-originals/`). A notebook that holds none of the lesson's exercises is
refused, with a message saying what to hand out, never graded 0 in silence; one that cannot be
graded (not JSON, an exercise cell twice) gets 0 with its reason. Each hand-in is graded alone,
outside the course directory, and its answers checked again in the grader's own process
(`assignment`, `isolation`, `wire`). Its `grades.csv` lists only the assignments
something was handed in for, with a `note` column.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat

from course_utils.course.grading.isolation import nbgrader_command
from course_utils.course.grading.submissions import Submission, prepare_submissions  # noqa: F401  (their home)
from course_utils.course.lesson_parts import (exercise_cell, exercise_cells, lessons, solution_for, teacher_only,
                                           without_teacher_metadata)

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CONFIG = '''\
# nbgrader configuration of the course (written by python -m course_utils.course build nbgrader).
c = get_config()
c.CourseDirectory.course_id = "device-meshes"
# A released exercise cell keeps the lesson's own blank (answer = ...); the solution region leaves nothing.
c.ClearSolutions.code_stub = {"python": ""}
# Lessons 05 and 06 train models and start processes: allow each cell ten minutes.
c.Execute.timeout = 600
'''
COURSE_DEFAULT = "nbgrader_config.py.course-default"
# The test cell hands the answer over as data; the grade is decided outside the student's kernel (grade_wire).
TEST_CELL = ('import course_utils.course.grading.wire as _course_grade_wire\n'
             '_course_grade_wire.hand_in("{exercise}", {name})')


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
        test = nbformat.v4.new_code_cell(TEST_CELL.format(exercise=call.exercise, name=call.name))
        test.metadata["nbgrader"] = _nbgrader(f"test_{suffix}", solution=False, grade=True, locked=True,
                                              points=1)
        test.metadata["slideshow"] = {"slide_type": "skip"}
        nb.cells[i + 1] = test  # in place of the collapsed solution
    nb.cells = [cell for cell in nb.cells if not teacher_only(cell)]  # the slides' notes hold answers too
    without_teacher_metadata(nb)  # nbgrader's release keeps metadata: claims quote the answers
    return nb


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
    from course_utils.course.grading.isolation import grading_lock

    with grading_lock(root):
        message = write_config(root)
        if message:
            print(message)
        _write_assignments(folder, root, release=release, only=only)
    return root


def write_config(root: Path) -> str:
    """Writes the course's `nbgrader_config.py`, never over a teacher's own edits.

    Returns:
        "" when the file is the course's; else a line saying the teacher's file was kept and
        where the course's version went (`nbgrader_config.py.course-default`, beside it).
    """
    config = root / "nbgrader_config.py"
    if not config.exists() or config.read_text() == CONFIG:
        config.write_text(CONFIG)
        (root / COURSE_DEFAULT).unlink(missing_ok=True)
        return ""
    (root / COURSE_DEFAULT).write_text(CONFIG)
    return (f"Kept your {config} (it differs from the course's). The course's version is in "
            f"{root / COURSE_DEFAULT}: compare them (diff {config} {root / COURSE_DEFAULT}) and copy what "
            f"you need; delete {config.name} to take the course's.")


def _write_assignments(folder, root: Path, *, release: bool, only: tuple[str, ...]) -> None:
    written = []
    for path in lessons(folder):
        notebook = nbformat.read(path, as_version=4)
        if not exercise_cells(notebook) or (only and path.stem[:2] not in only):
            continue
        target = root / "source" / assignment_name(path) / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(notebook), target)
        written.append(assignment_name(path))
    if not release or not written:
        return
    # nbgrader takes one assignment id, a glob: one process releases every lesson (7 s, against
    # 7 s a lesson one by one), which `lesson[0-9][0-9]` names when the whole series was written.
    every = [name for name in written if name[len("lesson"):].isdigit()]
    for pattern in (["lesson[0-9][0-9]"] if not only and every == written else written):
        nbgrader_command(root, "generate_assignment", pattern, "--force")


def scores(root: str | os.PathLike, assignment: str, student: str) -> dict[str, float]:
    """Points per autograded test cell of one student's submission, read from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, student)
        return {grade.name: grade.score for notebook in submission.notebooks for grade in notebook.grades}
