"""nbgrader (0.9.6) grades the course's exercises with the course's checkers.

The build writes an nbgrader course directory from lesson 01, nbgrader's own
generate_assignment writes the release version, and nbgrader autograde scores a
student notebook with one right, one wrong and one untouched answer (1, 0, 0) and
the source version, every solution in place (1, 1, 1).
"""

from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="grading needs nbgrader==0.9.6 (requirements-test.txt; make test installs it)")

from course_utils.course.grading import build_course, nbgrader_command, scores, source_notebook  # noqa: E402
from course_utils.course.transforms import exercise_cells, solution_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "notebooks" / "01_mesh_grids.ipynb"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return build_course(ROOT / "notebooks", tmp_path_factory.mktemp("nbgrader") / "course", only=("01",))


def _cells(path):
    notebook = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if "nbgrader" in c.metadata}


def test_each_exercise_is_a_solution_cell_and_a_one_point_test_of_its_checker():
    source = source_notebook(nbformat.read(LESSON, as_version=4))
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells if "nbgrader" in c.metadata}
    assert sorted(cells) == ["answer_01_1", "answer_01_2", "answer_01_3", "test_01_1", "test_01_2", "test_01_3"]
    assert cells["test_01_2"].source == '_verdict = check("01.2", mesh_4x2)\nassert _verdict.ok, _verdict'
    assert cells["test_01_2"].metadata["nbgrader"] == {
        "grade": True, "solution": False, "locked": True, "grade_id": "test_01_2", "points": 1,
        "schema_version": 3, "task": False}
    assert "### BEGIN SOLUTION" in cells["answer_01_1"].source


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


def _submit(course, student, notebook):
    submitted = course / "submitted" / student / "lesson01" / LESSON.name
    submitted.parent.mkdir(parents=True)
    nbformat.write(notebook, submitted)


def test_autograde_scores_known_submissions(course):
    lesson = nbformat.read(LESSON, as_version=4)
    first, _, _ = exercise_cells(lesson)
    answers = {
        "answer_01_1": solution_for(lesson, first),  # right: the lesson's own solution
        "answer_01_2": 'mesh_4x2 = distribution.DeviceMesh((2, 4), ("data", "model"), distribution.list_devices())',
    }  # 01.2 wrong (2 x 4, not 4 x 2); 01.3 left as released: `answer = ...`
    ada = nbformat.read(course / "release" / "lesson01" / LESSON.name, as_version=4)
    for cell in ada.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    _submit(course, "ada", ada)
    _submit(course, "bob", nbformat.read(course / "source" / "lesson01" / LESSON.name, as_version=4))  # all solved
    nbgrader_command(course, "autograde", "lesson01", "--force")
    assert scores(course, "lesson01", "ada") == {"test_01_1": 1.0, "test_01_2": 0.0, "test_01_3": 0.0}
    assert scores(course, "lesson01", "bob") == {"test_01_1": 1.0, "test_01_2": 1.0, "test_01_3": 1.0}
