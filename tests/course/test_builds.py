"""The student build has no solution text; the answer key holds every exercise, checked for real."""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils.course.answer_key import build_answer_key
from course_utils.course.pdf import pdf_pages
from course_utils.course.transforms import build_student, exercise_cell, student_notebook
from course_utils.course.exercises import EXERCISES
from course_utils.course.transforms import exercise_cells, lessons, solution_for

ROOT = Path(__file__).resolve().parents[2]
LESSONS = lessons(ROOT / "notebooks")


def _answers(notebook) -> list[str]:
    """Each worked solution's assignment of the checked name (`answer = (128 // 2, 10)`), and the block."""
    found = []
    for i in exercise_cells(notebook):
        name = exercise_cell(notebook.cells[i].source).name
        solution = solution_for(notebook, i)
        found.append(" ".join(solution.split()))
        found += [line.split("  #")[0].strip() for line in solution.splitlines()
                  if line.startswith(f"{name} = ")]
    return found


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_student_notebook_has_no_solution_text(path):
    lesson = nbformat.read(path, as_version=4)
    student = student_notebook(lesson)
    text = "\n".join(cell.source for cell in student.cells)
    assert "<summary>Solution" not in text and "Teacher's notes" not in text and "**Answer:**" not in text
    flat = " ".join(text.split())
    assert [answer for answer in _answers(lesson) if answer in text or answer in flat] == []
    assert len(exercise_cells(student)) == len(exercise_cells(lesson))  # the exercises stay
    assert all("..." in student.cells[i].source for i in exercise_cells(student))


def test_the_student_build_writes_every_lesson(tmp_path):
    written = build_student(ROOT / "notebooks", tmp_path)
    assert [p.name for p in written] == [p.name for p in LESSONS]
    for path in written:
        nbformat.validate(nbformat.read(path, as_version=4))


def test_every_registered_exercise_sits_in_a_lesson():
    ids = [exercise_cell(nbformat.read(p, as_version=4).cells[i].source).exercise
           for p in LESSONS for i in exercise_cells(nbformat.read(p, as_version=4))]
    registered = [e.id for e in EXERCISES.values()  # the lessons' checkers, not those tests register
                  if e.checker.__module__.startswith("course_utils.course.exercises.lesson")]
    assert sorted(ids) == sorted(registered)  # each exactly once


def test_exercise_cell_reads_the_checked_name():
    call = exercise_cell('axes = ...  # one entry per dimension\ncheck("02.2", axes)')
    assert (call.exercise, call.name, call.blank) == ("02.2", "axes", "axes = ...  # one entry per dimension")
    with pytest.raises(ValueError, match="check"):
        exercise_cell("answer = 3")


@pytest.mark.lesson_runs("solved")
def test_the_answer_key_holds_every_exercise_with_the_checkers_verdict(tmp_path, lesson_runs):
    entries = build_answer_key(ROOT / "notebooks", tmp_path, only=("01",), solved_run=lesson_runs.solved)
    expected = sorted(e for e in EXERCISES if e.startswith("01."))
    assert [e.exercise for e in entries] == expected
    assert [e.status for e in entries] == ["correct"] * len(expected)
    page = (tmp_path / "answer_key.html").read_text()
    for entry in entries:
        assert f"Exercise {entry.exercise}: correct." in page  # the checker's own display
        assert f"**Exercise {entry.exercise}.**" in entry.task
        assert "check(" in entry.solution
    assert len(re.findall(r'<section class="exercise">', page)) == len(expected)
    assert pdf_pages(tmp_path / "answer_key.pdf") >= 1
