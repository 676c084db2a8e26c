"""progress(): a learner's best verdict per exercise, saved for the teacher and summed over a room."""

import json

import pytest

from course_utils import check, progress
from course_utils.course.exercises.progress import main, read, room


def _verdicts():
    return [check("01.3", [(2, 1, 4)]), check("01.3", [(2, 1, 4), (2, 2, 2), (2, 4, 1)]),
            check("01.1", "cpu:0"), check("01.2")]


def test_progress_keeps_the_best_verdict_and_counts_attempts():
    rows = progress("01", student="Ada", verdicts=_verdicts()).rows
    assert [(r.exercise, r.status, r.attempts) for r in rows] == [
        ("01.1", "not yet", 1), ("01.2", "not attempted", 0), ("01.3", "correct", 2)]
    assert progress("01", student="Ada", verdicts=_verdicts()).correct == 1


def test_progress_refuses_a_lesson_without_exercises():
    with pytest.raises(ValueError, match="lesson='00'"):
        progress("00")


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_save_merges_lessons_and_room_counts_students(tmp_path, suffix):
    path = tmp_path / f"progress{suffix}"
    progress("01", student="Ada", verdicts=_verdicts()).save(path)
    progress("02", student="Ada", verdicts=[check("02.3", "data")]).save(path)
    rows = read(path)
    assert len(rows) == 6 and {r.exercise[:2] for r in rows} == {"01", "02"}
    other = tmp_path / f"bob{suffix}"
    progress("01", student="Bob", verdicts=[check("01.1", "cpu:5")]).save(other)
    counts = room([path, other])
    assert counts["01.1"] == {"not attempted": 0, "not yet": 1, "correct": 1}
    assert counts["02.3"]["correct"] == 1
    assert main([str(path), str(other)]) == 0


def test_saved_json_is_plain_records(tmp_path):
    path = progress("01", student="Ada", verdicts=_verdicts()).save(tmp_path / "p.json")
    assert json.loads(path.read_text())[0] == {"student": "Ada", "exercise": "01.1", "status": "not yet",
                                               "attempts": 1}
    with pytest.raises(ValueError, match="json or a .csv"):
        progress("01", verdicts=[]).save(tmp_path / "p.txt")


def test_every_lesson_with_exercises_ends_them_with_its_progress_cell():
    from pathlib import Path

    import nbformat

    from course_utils.course.transforms import exercise_cells, lessons

    for path in lessons(Path(__file__).resolve().parents[2] / "notebooks"):
        notebook = nbformat.read(path, as_version=4)
        exercises = exercise_cells(notebook)
        cells = [i for i, c in enumerate(notebook.cells)
                 if c.cell_type == "code" and "progress" in c.metadata.get("tags", [])]
        if not exercises:
            assert cells == [], path.name
            continue
        assert len(cells) == 1 and cells[0] > exercises[-1], path.name
        assert f'progress("{path.stem[:2]}")' in notebook.cells[cells[0]].source, path.name
