"""nbgrader (0.9.6) grades the course's exercises with the course's checkers.

The build writes an nbgrader course directory from lesson 01, nbgrader's own
generate_assignment writes the release version, and nbgrader autograde scores a
student notebook with one right, one wrong and one untouched answer (1, 0, 0) and
the source version, every solution in place (1, 1, 1). The building, handing in and grading
happen once, in `in_background`, beside the other tests; the tests read what it left.
"""

from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="grading needs nbgrader==0.9.6 (requirements-test.txt; make test installs it)")

from course_utils.course.grading.nbgrader_course import build_course, scores, source_notebook  # noqa: E402
from course_utils.course.lesson_parts import exercise_cells, solution_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
LESSON = ROOT / "notebooks" / "01_mesh_grids.ipynb"


def in_background(folder: Path) -> dict:
    """The course directory built (every lesson is released; only lesson 01 is handed in), five students'
    notebooks handed in, and lesson 01 graded. Run once, in the background (tests/conftest.py):
    nbgrader's commands are processes of their own, and take a while."""
    course = build_course(ROOT / "notebooks", folder / "course")
    before = _hand_in(course)
    from course_utils.course.grading.assignment import grade_assignment as grade

    submissions, grades, left_out = grade(course, "lesson01", say=[].append)  # its lines: test_isolation
    return {"course": course, "before": before, "submissions": submissions, "grades": grades, "left_out": left_out}


@pytest.fixture(scope="module")
def course(in_background):
    return in_background["course"]


def _cells(path):
    notebook = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if "nbgrader" in c.metadata}


def test_each_exercise_is_a_solution_cell_and_a_one_point_test_of_its_checker():
    source = source_notebook(nbformat.read(LESSON, as_version=4))
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells if "nbgrader" in c.metadata}
    assert sorted(cells) == ["answer_01_1", "answer_01_2", "answer_01_3", "test_01_1", "test_01_2", "test_01_3"]
    assert cells["test_01_2"].source == ('import course_utils.course.grading.wire as _course_grade_wire\n'
                                         '_course_grade_wire.hand_in("01.2", mesh_4x2)')
    assert cells["test_01_2"].metadata["nbgrader"] == {
        "grade": True, "solution": False, "locked": True, "grade_id": "test_01_2", "points": 1,
        "schema_version": 3, "task": False}
    assert "### BEGIN SOLUTION" in cells["answer_01_1"].source


def test_every_release_holds_no_answer_teachers_note_or_claim(course):
    from course_utils.course.lesson_parts import exercise_cells, lessons, passages_in, teacher_passages

    released = sorted(p.relative_to(course / "release") for p in (course / "release").glob("*/*.ipynb"))
    with_exercises = [p for p in lessons(ROOT / "notebooks") if exercise_cells(nbformat.read(p, as_version=4))]
    assert released == [Path(f"lesson{p.stem[:2]}") / p.name for p in with_exercises]
    for path in with_exercises:
        release = (course / "release" / f"lesson{path.stem[:2]}" / path.name).read_text()
        assert passages_in(release, teacher_passages(nbformat.read(path, as_version=4))) == [], path.name
        assert '"claims"' not in release and '"deck_summary"' not in release


def test_the_release_holds_the_blanks_and_no_solution(course):
    release = course / "release" / "lesson01" / LESSON.name
    cells = _cells(release)
    lesson = nbformat.read(LESSON, as_version=4)
    text = "\n".join(c.source for c in nbformat.read(release, as_version=4).cells)
    for i, grade_id in zip(exercise_cells(lesson), ("answer_01_1", "answer_01_2", "answer_01_3")):
        blank = lesson.cells[i].source.splitlines()[0]
        assert cells[grade_id].source.startswith(blank) and "..." in blank
        answer_line = next(line for line in solution_for(lesson, i).splitlines() if " = " in line)
        assert answer_line not in text
    assert "BEGIN SOLUTION" not in text and "Teacher's notes" not in text


def _submit(course, student, notebook, name=LESSON.name):
    submitted = course / "submitted" / student / "lesson01" / name
    submitted.parent.mkdir(parents=True)
    nbformat.write(notebook, submitted)
    return submitted


def _answered(notebook, answers: dict[str, str]):
    """The lesson as a student runs it, with the exercise cells of `answers` (exercise id -> source) filled in."""
    from course_utils.course.lesson_parts import exercise_cell

    for i in exercise_cells(notebook):
        exercise = exercise_cell(notebook.cells[i].source).exercise
        if exercise in answers:
            notebook.cells[i].source = answers[exercise]
    return notebook


def _hand_in(course) -> bytes:
    """Five students hand in lesson 01 (one of them the wrong lesson); returns cy's notebook as handed in."""
    from course_utils.course.lesson_parts import student_notebook

    lesson = nbformat.read(LESSON, as_version=4)
    first, _, _ = exercise_cells(lesson)
    right = solution_for(lesson, first)  # 01.1 right: the lesson's own solution
    wrong = 'mesh_4x2 = distribution.DeviceMesh((2, 4), ("data", "model"), distribution.list_devices())\n' \
            'check("01.2", mesh_4x2)'  # 01.2 wrong (2 x 4, not 4 x 2); 01.3 left as given: `answer = ...`
    ada = nbformat.read(course / "release" / "lesson01" / LESSON.name, as_version=4)
    for cell in ada.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ("answer_01_1", "answer_01_2"):
            cell.source = right if grade_id == "answer_01_1" else wrong
    _submit(course, "ada", ada)  # nbgrader's release, as nbgrader hands it out
    _submit(course, "bob", nbformat.read(course / "source" / "lesson01" / LESSON.name, as_version=4))  # all solved
    # the lesson as Binder gives it (notebooks/, solutions collapsed below), one right answer
    binder = _submit(course, "cy", _answered(nbformat.read(LESSON, as_version=4), {"01.1": right}))
    before = binder.read_bytes()
    # the student build, renamed by JupyterLab's "Duplicate", one right and one wrong
    _submit(course, "dee", _answered(student_notebook(nbformat.read(LESSON, as_version=4)),
                                     {"01.1": right, "01.2": wrong}), name="01_mesh_grids-Copy1.ipynb")
    _submit(course, "eve", nbformat.read(ROOT / "notebooks" / "02_axis_roles.ipynb", as_version=4))  # wrong lesson
    return before


def test_autograde_scores_known_submissions(in_background):
    course, before = in_background["course"], in_background["before"]
    submissions, grades, left_out = (in_background[k] for k in ("submissions", "grades", "left_out"))
    status = {s.student: s.status for s in submissions}
    assert status == {"ada": "as released", "bob": "as released", "cy": "carried over", "dee": "carried over",
                      "eve": "refused"}
    refused = next(s for s in submissions if s.student == "eve")
    assert "holds none of lesson01's exercises 01.1, 01.2, 01.3 (it holds exercises 02.1, 02.2, 02.3)" in str(refused)
    assert "Hand out release/lesson01/01_mesh_grids.ipynb" in str(refused)
    assert scores(course, "lesson01", "ada") == {"test_01_1": 1.0, "test_01_2": 0.0, "test_01_3": 0.0}
    assert scores(course, "lesson01", "bob") == {"test_01_1": 1.0, "test_01_2": 1.0, "test_01_3": 1.0}
    assert scores(course, "lesson01", "cy") == {"test_01_1": 1.0, "test_01_2": 0.0, "test_01_3": 0.0}  # once 0/3
    cy = next(s for s in submissions if s.student == "cy")
    assert ("its answers to 01.1 carried into nbgrader's release version; 01.2, 01.3 are still the blank "
            "handed out (0 points)") in str(cy)
    assert scores(course, "lesson01", "dee") == {"test_01_1": 1.0, "test_01_2": 0.0, "test_01_3": 0.0}
    kept = course / "submitted-originals" / "cy" / "lesson01" / LESSON.name
    assert kept.read_bytes() == before  # what the student handed in is never lost
    assert (course / "submitted-originals" / "dee" / "lesson01" / "01_mesh_grids-Copy1.ipynb").exists()
    import csv

    rows = list(csv.DictReader(grades.open()))
    assert {row["assignment"] for row in rows} == {"lesson01"}
    others = sorted(p.stem[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if p.stem[:2] not in ("00", "01"))
    assert left_out == [f"lesson{n}" for n in others]  # never handed in: left out
    assert {row["student_id"]: float(row["raw_score"]) for row in rows} == {"ada": 1.0, "bob": 3.0, "cy": 1.0,
                                                                            "dee": 1.0}
    notes = {row["student_id"]: row["note"] for row in rows}  # what the console said is in grades.csv too
    assert "01.2, 01.3 are still the blank handed out (0 points)" in notes["cy"]
    assert "its answers to 01.1, 01.2 carried into nbgrader's release version" in notes["dee"]


def test_a_blank_exercise_is_told_from_an_answer_in_every_lesson():
    from course_utils.course.grading.submissions import untouched
    from course_utils.course.lesson_parts import lessons

    cells = [(nb.cells[i].source, solution_for(nb, i)) for p in lessons(ROOT / "notebooks")
             for nb in [nbformat.read(p, as_version=4)] for i in exercise_cells(nb)]
    assert len(cells) >= 28 and all(untouched(blank) and not untouched(solution) for blank, solution in cells)
    assert not untouched('answer = ...\nanswer = (4, 2)\ncheck("01.1", answer)')
    assert not untouched('other = ...\ncheck("01.1", answer)')
