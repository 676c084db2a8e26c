"""A grading run keeps the course directory safe: the gradebook backed up, checked and restored, never lost,
and every file a hand-in changed put back (course_utils/course/grading/safekeeping.py)."""

import sqlite3
from pathlib import Path

import pytest

from course_utils.course.grading.safekeeping import (BACKUPS, CourseCopy, GradebookUnsafe, back_up,
                                                     gradebook_problem, gradebook_ready)


def _gradebook(root: Path, *scores) -> Path:
    """A gradebook as nbgrader's tables begin (enough for SQLite and the check), with some scores."""
    root.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(root / "gradebook.db") as db:
        db.execute("CREATE TABLE IF NOT EXISTS assignment (name TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS grade (student TEXT, score REAL)")
        db.executemany("INSERT INTO grade VALUES (?, ?)", scores)
    db.close()
    return root / "gradebook.db"


def _scores(path: Path) -> list:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT student, score FROM grade ORDER BY student").fetchall()
    db.close()
    return found


def _overwrite_its_start(path: Path) -> None:
    """What the issue's hand-in did: the first bytes of gradebook.db overwritten (SQLite: "file is not a database")."""
    with path.open("r+b") as file:
        file.write(b"overwritten by a hand-in" * 8)


def test_a_damaged_gradebook_is_restored_from_its_newest_backup_and_kept_aside(tmp_path):
    gradebook = _gradebook(tmp_path, ("ada", 3.0))
    assert gradebook_ready(tmp_path) == "" and len(list((tmp_path / BACKUPS).iterdir())) == 1
    _gradebook(tmp_path, ("bob", 2.0))
    back_up(tmp_path)  # after a run's scores are written
    _overwrite_its_start(gradebook)
    damaged = gradebook.read_bytes()
    assert "file is not a database" in gradebook_problem(gradebook)
    said = gradebook_ready(tmp_path)
    assert f"{gradebook} was damaged (SQLite cannot read it (file is not a database))" in said
    assert "the newest healthy backup" in said and "grade those assignments again" in said
    assert _scores(gradebook) == [("ada", 3.0), ("bob", 2.0)]  # every score of the earlier runs is there
    aside = list((tmp_path / BACKUPS).glob("gradebook-damaged-*.db"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged and str(aside[0]) in said  # never deleted


def test_a_damaged_gradebook_without_a_healthy_backup_stops_the_run_and_changes_nothing(tmp_path, capsys):
    from course_utils.course.grading.assignment import main

    gradebook = _gradebook(tmp_path, ("ada", 3.0))
    back_up(tmp_path)
    for backup in (tmp_path / BACKUPS).iterdir():
        _overwrite_its_start(backup)
    _overwrite_its_start(gradebook)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(GradebookUnsafe, match=f"{gradebook} is damaged: SQLite cannot read it .* holds no healthy "
                                               f"backup. Nothing was graded or changed. Put back a copy"):
        gradebook_ready(tmp_path)
    assert main(["lesson01", "--out", str(tmp_path)]) == 1  # the command: a message, no traceback
    assert "holds no healthy backup" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != "grading.lock"} == before


def test_backups_are_kept_to_a_limit(tmp_path):
    from course_utils.course.grading.safekeeping import KEPT_BACKUPS

    _gradebook(tmp_path)
    for _ in range(KEPT_BACKUPS + 3):
        back_up(tmp_path)
    assert len(list((tmp_path / BACKUPS).iterdir())) == KEPT_BACKUPS


def test_what_a_hand_in_changed_in_the_course_directory_is_put_back(tmp_path):
    gradebook = _gradebook(tmp_path / "course", ("ada", 3.0))
    course = tmp_path / "course"
    (course / "submitted" / "bob" / "lesson01").mkdir(parents=True)
    bob = course / "submitted" / "bob" / "lesson01" / "01.ipynb"
    bob.write_text("bob's notebook")
    (course / "source").mkdir()
    (course / "source" / "solutions.ipynb").write_text("the solutions")
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    kept = CourseCopy(course)
    assert kept.put_back("eve") == ""  # nothing changed: nothing said
    _overwrite_its_start(gradebook)
    bob.unlink()
    (course / "source").rename(tmp_path / "moved")
    (course / "source").symlink_to(tmp_path)  # a folder swapped for a link elsewhere
    (course / "gradebook.db-journal").write_bytes(b"a planted journal")  # SQLite would roll it into the gradebook
    said = kept.put_back("eve")
    assert {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and "grading-quarantine" not in p.parts} \
        == before
    assert not (course / "source").is_symlink()
    assert said.startswith("while it was graded, this hand-in reached the course directory: changed gradebook.db")
    assert "deleted source/solutions.ipynb, submitted/bob/lesson01/01.ipynb" in said
    assert "added gradebook.db-journal (moved to grading-quarantine/eve/" in said
    assert [p.name for p in (course / "grading-quarantine" / "eve").rglob("*.db-journal")] == ["gradebook.db-journal"]
    assert gradebook_problem(gradebook) is None and _scores(gradebook) == [("ada", 3.0)]
    assert kept.put_back("eve") == ""  # what it put back, and the quarantine, are the copy now


def test_a_file_the_grader_writes_is_kept_not_undone(tmp_path):
    kept = CourseCopy(tmp_path)
    written = tmp_path / "autograded" / "ada" / "lesson01" / "01.ipynb"
    written.parent.mkdir(parents=True)
    written.write_text("executed")
    kept.keep(written)
    assert kept.put_back("ada") == "" and written.read_text() == "executed"


def test_a_gradebook_that_cannot_be_backed_up_stops_the_run_before_it_writes(tmp_path):
    gradebook = _gradebook(tmp_path, ("ada", 3.0))
    (tmp_path / BACKUPS).write_text("a file where the backups' folder goes")
    with pytest.raises(GradebookUnsafe, match=f"{gradebook} could not be backed up into {tmp_path / BACKUPS}"):
        gradebook_ready(tmp_path)
    assert _scores(gradebook) == [("ada", 3.0)]
