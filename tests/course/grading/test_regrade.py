"""Grading again runs only the hand-ins that changed, and never loses a grade (`grading.regrade`).

The record's own tests need no nbgrader; the grading run's (a course directory of lesson 01, two hand-ins)
replace the one step that runs a notebook (`grade_one`) by one that scores what the hand-in wrote, so that
what runs, what is kept and what the gradebook holds after each run are checked in seconds.
"""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from course_utils.course.grading.isolation import Graded
from course_utils.course.grading.regrade import RECORD, GradingRecord, digest, fingerprint

pytestmark = pytest.mark.processes  # grades hand-ins in kernels: left out of the fast lane (pytest --fast)

ROOT = Path(__file__).resolve().parents[3]
LESSON = ROOT / "notebooks" / "01_mesh_grids.ipynb"


def _files(tmp_path, notebook=b'{"cells": []}', executed=b'{"run": 1}'):
    (tmp_path / "hand-in.ipynb").write_bytes(notebook)
    (tmp_path / "executed.ipynb").write_bytes(executed)
    return tmp_path / "hand-in.ipynb", tmp_path / "executed.ipynb"


def _remembered(tmp_path) -> GradingRecord:
    notebook, executed = _files(tmp_path)
    memory = GradingRecord.read(tmp_path)
    memory.remember("lesson01", "grader-1", Graded("ada", {"test_01_1": 1.0, "test_01_2": 0.0}, ("a note",)),
                    notebook, executed)
    memory.write()
    return GradingRecord.read(tmp_path)


def test_an_unchanged_hand_in_keeps_its_grade_and_a_changed_one_does_not(tmp_path):
    memory = _remembered(tmp_path)
    notebook, executed = tmp_path / "hand-in.ipynb", tmp_path / "executed.ipynb"
    kept = memory.kept("lesson01", "grader-1", "ada", notebook, executed)
    assert kept.scores == {"test_01_1": 1.0, "test_01_2": 0.0}
    assert kept.notes[0] == "a note" and "unchanged since it was graded on" in kept.note
    assert memory.kept("lesson01", "grader-2", "ada", notebook, executed) is None  # a new release or checker
    assert memory.kept("lesson01", "grader-1", "bob", notebook, executed) is None  # never graded
    assert memory.kept("lesson02", "grader-1", "ada", notebook, executed) is None
    executed.write_bytes(b'{"run": 2}')
    assert memory.kept("lesson01", "grader-1", "ada", notebook, executed) is None  # its executed copy changed
    executed.write_bytes(b'{"run": 1}')
    notebook.write_bytes(b'{"cells": [1]}')
    assert memory.kept("lesson01", "grader-1", "ada", notebook, executed) is None  # the student handed in again
    executed.unlink()
    notebook.write_bytes(b'{"cells": []}')
    assert memory.kept("lesson01", "grader-1", "ada", notebook, executed) is None  # autograded/ was cleared


def test_a_failed_run_of_the_same_notebook_keeps_its_points_and_says_so(tmp_path):
    memory = _remembered(tmp_path)
    failed = Graded("ada", {}, ("nbgrader autograde failed: boom",))
    kept = memory.kept_after_failure("lesson01", "grader-1", failed, tmp_path / "hand-in.ipynb")
    assert kept.scores == {"test_01_1": 1.0, "test_01_2": 0.0}
    assert "that run failed (nbgrader autograde failed: boom)" in kept.note and "are kept" in kept.note
    (tmp_path / "hand-in.ipynb").write_bytes(b"changed")
    assert memory.kept_after_failure("lesson01", "grader-1", failed, tmp_path / "hand-in.ipynb") is None


@pytest.mark.parametrize("damage", [b'{"version": 1, "assignments": {"lesson01": ', b"\xff\xfe\x00",
                                    b'{"version": 1, "assignments": {"lesson01": {"grader": "g", "students": '
                                    b'{"ada": {"hand_in": "x", "autograded": "y", "graded": "z", "scores": '
                                    b'{"test_01_1": "1"}, "notes": []}}}}}',
                                    b"[]", b""])
def test_a_damaged_record_is_set_aside_said_and_read_as_empty(tmp_path, damage):
    (tmp_path / RECORD).write_bytes(damage)
    memory = GradingRecord.read(tmp_path)
    assert memory.assignments == {} and not (tmp_path / RECORD).exists()
    (aside,) = tmp_path.glob("grading-record.damaged-*.json")
    assert aside.read_bytes() == damage  # kept, never deleted
    assert f"it was set aside as {aside.name}" in memory.said and "every hand-in is graded again" in memory.said


def test_the_record_is_written_whole_and_no_partial_file_is_left(tmp_path):
    _remembered(tmp_path)
    data = json.loads((tmp_path / RECORD).read_text())
    assert data["version"] == 1 and set(data["assignments"]["lesson01"]["students"]) == {"ada"}
    assert data["assignments"]["lesson01"]["students"]["ada"]["hand_in"] == digest(tmp_path / "hand-in.ipynb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["executed.ipynb", RECORD, "hand-in.ipynb"]


def test_the_fingerprint_follows_the_release_the_config_and_the_time_limit(tmp_path):
    (tmp_path / "release" / "lesson01").mkdir(parents=True)
    (tmp_path / "source" / "lesson01").mkdir(parents=True)
    release = tmp_path / "release" / "lesson01" / "01.ipynb"
    release.write_text("one")
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()")
    first = fingerprint(tmp_path, "lesson01", 600)
    assert fingerprint(tmp_path, "lesson01", 600) == first
    assert fingerprint(tmp_path, "lesson01", 120) != first
    release.write_text("two")
    second = fingerprint(tmp_path, "lesson01", 600)
    assert second != first
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.Execute.timeout = 60")
    assert fingerprint(tmp_path, "lesson01", 600) != second


# A grading run, with the notebook's run replaced (see the module's notes).

def _answered(course: Path, student: str, answer: str) -> Path:
    release = course / "release" / "lesson01" / LESSON.name
    notebook = nbformat.read(release, as_version=4)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer_01_1":
            cell.source = answer
    path = course / "submitted" / student / "lesson01" / LESSON.name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("nbgrader", reason="grading needs nbgrader==0.9.6 (requirements-test.txt)")
    from course_utils.course.grading.nbgrader_course import build_course

    return build_course(ROOT / "notebooks", tmp_path_factory.mktemp("regrade") / "course", only=("01",))


@pytest.fixture
def course(built, tmp_path, monkeypatch):
    """A copy of the built course, two hand-ins, and `grade_one` replaced for this course's hand-ins: it notes who
    ran, scores 01.1 right when the hand-in's answer cell says `"cpu:5"`, and fails for a student named in
    `failing` (any other course's hand-in, graded in the background meanwhile, goes to the real one)."""
    from course_utils.course.grading import assignment

    course = tmp_path / "course"
    shutil.copytree(built, course)
    _answered(course, "ada", 'answer = "cpu:5"\ncheck("01.1", answer)')
    _answered(course, "bob", 'answer = "cpu:1"\ncheck("01.1", answer)')
    ran, failing = [], set()

    real = assignment.grade_one

    def grade_one(template, assignment_name, student, notebook, **kwargs):
        if not Path(notebook).resolve().is_relative_to(course.resolve()):
            # another course's grading, run meanwhile in the background (tests that grade in kernels): the real one
            return real(template, assignment_name, student, notebook, **kwargs)
        ran.append(student)
        if student in failing:
            return Graded(student, {}, ("nbgrader autograde failed: the machine ran out of memory",))
        executed = template.parent / "autograded" / student / notebook.name
        executed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(notebook, executed)
        right = "cpu:5" in notebook.read_text()
        return Graded(student, {"test_01_1": 1.0 if right else 0.0, "test_01_2": 0.0, "test_01_3": 0.0}, (), executed)

    monkeypatch.setattr(assignment, "grade_one", grade_one)
    return course, ran, failing


def _run(course, **options):
    from course_utils.course.grading.assignment import grade_assignment, read_notes
    from course_utils.course.grading.nbgrader_course import scores

    said = []
    grade_assignment(course, "lesson01", say=said.append, **options)
    points = {s: scores(course, "lesson01", s)["test_01_1"] for s in ("ada", "bob")}
    return points, read_notes(course)["lesson01"], " ".join(said)


def test_only_the_hand_in_that_changed_runs_again(course):
    course, ran, _ = course
    assert _run(course)[0] == {"ada": 1.0, "bob": 0.0} and sorted(ran) == ["ada", "bob"]
    ran.clear()
    points, notes, said = _run(course)
    assert ran == [] and points == {"ada": 1.0, "bob": 0.0}
    assert "unchanged since it was graded on" in notes["ada"] and "2 hand-in(s) unchanged" in said
    _answered(course, "bob", 'answer = "cpu:5"\ncheck("01.1", answer)')  # bob hands in again, right this time
    points, notes, said = _run(course)
    assert ran == ["bob"] and points == {"ada": 1.0, "bob": 1.0} and "unchanged" not in notes["bob"]
    ran.clear()
    assert _run(course, regrade_all=True)[0] == {"ada": 1.0, "bob": 1.0} and sorted(ran) == ["ada", "bob"]


def test_a_damaged_record_grades_everyone_again_and_loses_no_grade(course):
    course, ran, _ = course
    _run(course)
    ran.clear()
    (course / RECORD).write_text('{"version": 1, "assign')
    points, _, said = _run(course)
    assert sorted(ran) == ["ada", "bob"] and points == {"ada": 1.0, "bob": 0.0}
    assert "could not be read" in said and "every hand-in is graded again" in said
    assert len(list(course.glob("grading-record.damaged-*.json"))) == 1
    ran.clear()
    assert _run(course)[0] == {"ada": 1.0, "bob": 0.0} and ran == []  # the new record is whole


def test_a_gradebook_put_back_from_an_older_backup_gets_the_kept_points_back(course):
    from nbgrader.api import Gradebook

    course, ran, _ = course
    _run(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:  # as a backup taken before the grade
        for notebook in gradebook.find_submission("lesson01", "ada").notebooks:
            for grade in notebook.grades:
                grade.auto_score = 0.0
        gradebook.db.commit()
    ran.clear()
    assert _run(course)[0] == {"ada": 1.0, "bob": 0.0} and ran == []


def test_a_forced_run_that_fails_keeps_the_points_of_the_same_notebook(course):
    course, ran, failing = course
    _run(course)
    failing.add("ada")
    points, notes, _ = _run(course, regrade_all=True)
    assert points == {"ada": 1.0, "bob": 0.0}
    assert "that run failed (nbgrader autograde failed: the machine ran out of memory)" in notes["ada"]
    failing.clear()
    ran.clear()
    _run(course)
    assert ran == []  # the failed run recorded nothing: the earlier grade still stands for the same notebook
