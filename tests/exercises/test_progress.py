"""progress(): a learner's best verdict per exercise, saved for the teacher and summed over a room."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course_utils import check, progress
from course_utils.exercises.progress import ProgressFileError, ProgressWarning, read
from course_utils.exercises.room import main, room

ROOT = Path(__file__).resolve().parents[2]


def _verdicts():
    return [check("01.3", [(2, 1, 4)]), check("01.3", [(2, 1, 4), (2, 2, 2), (2, 4, 1)]),
            check("01.1", "cpu:0"), check("01.2")]


def test_progress_keeps_the_best_verdict_and_counts_attempts():
    rows = progress("01", student="Ada", verdicts=_verdicts()).rows
    assert [(r.exercise, r.status, r.attempts) for r in rows] == [
        ("01.1", "not yet", 1), ("01.2", "not attempted", 0), ("01.3", "correct", 2)]
    assert progress("01", student="Ada", verdicts=_verdicts()).correct == 1


def _kernel(*answers):
    """A fresh kernel's verdicts: `(exercise, status)` pairs, in the order they were checked."""
    from course_utils.exercises import progress as module
    from course_utils.exercises.core import Verdict

    module._ADDED.clear()  # what a restart forgets: which answers this kernel already saved
    return [Verdict(exercise, status, "") for exercise, status in answers]


def _saved(path):
    return {r.exercise: (r.status, r.attempts) for r in read(path)}


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_a_save_after_a_restart_keeps_the_best_result_ever_saved_and_adds_the_tries(tmp_path, suffix):
    path = tmp_path / f"progress{suffix}"
    first = _kernel(("01.1", "correct"), ("01.2", "not yet"), ("01.2", "correct"), ("01.3", "correct"))
    progress("01", student="Ana", verdicts=first).save(path)
    assert _saved(path) == {"01.1": ("correct", 1), "01.2": ("correct", 2), "01.3": ("correct", 1)}
    second = _kernel(("01.3", "correct"), ("01.1", "not yet"))  # restarted: checks 01.3, gets 01.1 wrong
    progress("01", student="Ana", verdicts=second).save(path)
    assert _saved(path) == {"01.1": ("correct", 2), "01.2": ("correct", 2), "01.3": ("correct", 2)}
    second.append(second[0])  # the same kernel checks 01.3 once more and saves again: one try more, not three
    progress("01", student="Ana", verdicts=second).save(path)
    progress("01", student="Ana", verdicts=second).save(path)  # saving twice adds nothing
    assert _saved(path) == {"01.1": ("correct", 2), "01.2": ("correct", 2), "01.3": ("correct", 3)}


def test_reset_is_the_one_way_to_lower_a_saved_result(tmp_path):
    path = tmp_path / "progress.json"
    progress("01", student="Ana", verdicts=_kernel(("01.1", "correct"))).save(path)
    progress("02", student="Ana", verdicts=_kernel(("02.3", "correct"))).save(path)
    progress("01", student="Bob", verdicts=_kernel(("01.1", "correct"))).save(path)
    progress("01", student="Ana", verdicts=_kernel(("01.1", "not yet"))).reset(path)
    rows = {(r.student, r.exercise): (r.status, r.attempts) for r in read(path)}
    assert rows[("Ana", "01.1")] == ("not yet", 1) and rows[("Ana", "02.3")] == ("correct", 1)
    assert rows[("Bob", "01.1")] == ("correct", 1)


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
    saved = json.loads(path.read_text())
    assert saved["format"] == 1
    assert saved["rows"][0] == {"student": "Ada", "exercise": "01.1", "status": "not yet", "attempts": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".p.json.lock", "p.json"]  # nothing half-written left
    with pytest.raises(ValueError, match="json or a .csv"):
        progress("01", verdicts=[]).save(tmp_path / "p.txt")


def test_every_lesson_with_exercises_ends_them_with_its_progress_cell():
    from pathlib import Path

    import nbformat

    from course_utils.course.lesson_parts import exercise_cells, lessons

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


# Each of three processes saves its own student's rows to one file, again and again, all at once. Its
# verdicts come from a checker that needs no devices, so each process starts in a fraction of a second
# and the three spend their time saving, side by side (about a second of saves each).
SAVER = """
import sys
from course_utils import check, progress
verdicts = [check("01.3", [(2, 1, 4)]), check("01.3", [(2, 1, 4), (2, 2, 2), (2, 4, 1)])]
for _ in range(300):
    progress("01", student=sys.argv[2], verdicts=verdicts).save(sys.argv[1])
print("saved")
"""


@pytest.mark.processes
@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_several_students_saving_to_one_file_at_once_lose_nothing(tmp_path, suffix):
    path = tmp_path / f"progress{suffix}"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    savers = [subprocess.Popen([sys.executable, "-c", SAVER, str(path), name], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in ("Ada", "Bob", "Cy")]
    for saver in savers:
        out, err = saver.communicate(timeout=120)
        assert saver.returncode == 0 and out.strip() == "saved", err
    rows = read(path)
    assert sorted({r.student for r in rows}) == ["Ada", "Bob", "Cy"] and len(rows) == 3 * 3
    assert not list(tmp_path.glob("*.damaged-*")) and not list(tmp_path.glob("*partial*"))


@pytest.mark.processes
def test_a_save_waits_for_the_lock_so_another_writer_s_rows_are_never_overwritten(tmp_path):
    # Saving reads the file, merges its rows and writes: without the lock, a save that read before
    # another writer wrote would put the file back without that writer's rows.
    import threading

    from filelock import FileLock

    from course_utils.exercises.progress_file import write

    path = tmp_path / "progress.json"
    bob = progress(None, student="Bob", verdicts=_verdicts())
    with FileLock(tmp_path / ".progress.json.lock"):  # another writer holds it
        saving = threading.Thread(target=bob.save, args=(path,))
        saving.start()
        saving.join(timeout=1.0)
        assert saving.is_alive() and not path.exists()  # Bob's save waits
        write(path, progress(None, student="Ada", verdicts=_verdicts()).rows)  # the other writer writes
    saving.join(timeout=30)
    assert sorted({r.student for r in read(path)}) == ["Ada", "Bob"]


def test_a_lock_held_too_long_stops_the_save_with_what_to_do(tmp_path, monkeypatch):
    from filelock import FileLock

    from course_utils.exercises import progress as progress_module

    monkeypatch.setattr(progress_module, "LOCK_TIMEOUT_S", 0.3)
    path = tmp_path / "progress.json"
    progress(None, student="Ada", verdicts=_verdicts()).save(path)
    before = path.read_bytes()
    with FileLock(tmp_path / ".progress.json.lock"):
        with pytest.raises(TimeoutError, match=r"has held its lock for 0\.3 s\. Run this cell again in a moment; "
                                                r"nothing was written"):
            progress(None, student="Bob", verdicts=_verdicts()).save(path)
    assert path.read_bytes() == before


def test_a_save_that_fails_midway_leaves_the_old_file_whole(tmp_path):
    """A write cut off by the file system (here: a file size limit, as a full disk does) changes nothing."""
    path = tmp_path / "progress.json"
    progress(None, student="Ada", verdicts=_verdicts()).save(path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import resource, signal
        from course_utils import progress
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails with an error instead
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) // 2}, {len(before) // 2}))
        try:
            progress(None, student="Bob", verdicts=[]).save({str(path)!r})
        except OSError as error:
            print(error)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)})
    assert "Could not save to" in done.stdout and "is unchanged" in done.stdout, done.stdout + done.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".progress.json.lock", "progress.json"]


@pytest.mark.parametrize("content", ["", "[{\"student\": \"Ada\", \"exer", "not json at all", "{}",
                                     json.dumps([{"student": "Ada", "exercise": "01.1", "status": "mastered",
                                                  "attempts": 1}])])
def test_a_damaged_file_is_kept_aside_and_saving_works_again(tmp_path, content):
    path = tmp_path / "progress.json"
    path.write_text(content)
    with pytest.warns(ProgressWarning, match=r"progress.json.*kept as 'progress.damaged-\d{8}-\d{6}.json'"):
        progress("01", student="Ada", verdicts=_verdicts()).save(path)
    (aside,) = tmp_path.glob("progress.damaged-*.json")
    assert aside.read_text() == content
    assert len(read(path)) == 3
    progress("02", student="Ada", verdicts=[]).save(path)  # and the next save merges as usual
    assert len(read(path)) == 6


def test_a_file_of_the_first_format_a_plain_list_is_read(tmp_path):
    (tmp_path / "old.json").write_text('[{"student": "Ada", "exercise": "01.1", "status": "correct", "attempts": 2}]')
    assert [r.status for r in read(tmp_path / "old.json")] == ["correct"]


def test_spreadsheet_csv_files_are_read(tmp_path):
    rows = "student,exercise,status,attempts\r\nJosé,01.1,correct,2\r\n"
    for name, data in (("bom.csv", rows.encode("utf-8-sig")), ("latin.csv", rows.encode("cp1252")),
                       ("semicolons.csv", rows.replace(",", ";").encode("utf-8")),
                       ("capitals.csv", rows.replace("student,exercise,status,attempts",
                                                     "Student, Exercise, Status, Attempts").encode())):
        (tmp_path / name).write_bytes(data)
        assert [tuple(vars(r).values()) for r in read(tmp_path / name)] == [("José", "01.1", "correct", 2)], name


@pytest.mark.parametrize("name, content, words", [
    ("empty.json", "", ["empty.json", "is empty"]),
    ("cut.json", '{"format": 1, "rows": [{"student": "Ada"', ["cut.json", "not whole JSON", "cut off"]),
    ("future.json", '{"format": 2, "rows": []}', ["format 2", "newer course_utils", "reads format 1",
                                                  "git pull"]),
    ("other.json", '{"hello": 1}', ["not a progress file", "student, exercise, status, attempts"]),
    ("status.csv", "student,exercise,status,attempts\nAda,01.1,mastered,1\n",
     ["Row 1", "status 'mastered'", "'correct'"]),
    ("attempts.csv", "student,exercise,status,attempts\nAda,01.1,correct,two\n",
     ["Row 1", "attempts='two'", "whole number"]),
    ("columns.csv", "name,score\nAda,3\n", ["lacks the column(s) student, exercise, status, attempts",
                                             "starts with the line student,exercise,status,attempts"]),
    ("missing.csv", "student,exercise,status,attempts\nAda,,correct,1\n", ["Row 1", "has no exercise"]),
    ("blank.csv", "student,exercise,status,attempts\n  \t ,01.1,correct,1\n", ["Row 1", "has no student"]),
])
def test_unreadable_files_say_which_file_and_why(tmp_path, name, content, words):
    (tmp_path / name).write_text(content)
    with pytest.raises(ProgressFileError) as error:
        read(tmp_path / name)
    for word in words:
        assert word in str(error.value)


def test_the_room_command_names_what_it_left_out(tmp_path, capsys):
    good = progress("01", student="Ada", verdicts=_verdicts()).save(tmp_path / "ada.json")
    (tmp_path / "bad.csv").write_text("student,exercise,status,attempts\nBob,01.1,great,1\n")
    assert main([str(good), str(tmp_path / "nobody.json"), str(tmp_path / "bad.csv")]) == 1
    out, err = capsys.readouterr()
    assert "01.1" in out and "Traceback" not in err
    assert "left out: No progress file at" in err and "nobody.json" in err
    assert "status 'great'" in err and "2 of 3 files left out" in err
    assert main([str(tmp_path / "nobody.json")]) == 1


def test_save_follows_links_and_expands_the_home_folder(tmp_path, monkeypatch):
    target = tmp_path / "kept" / "progress.json"
    target.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(target)
    progress("01", student="Ada", verdicts=_verdicts()).save(link)
    assert link.is_symlink() and len(read(target)) == 3
    monkeypatch.setenv("HOME", str(tmp_path))
    saved = progress("01", student="Ada", verdicts=[]).save("~/home.json")
    assert saved == tmp_path / "home.json" and not (Path.cwd() / "~").exists()


# Names as students type them. An earlier save wrote "Ana\r" unquoted into a CSV, so every later save
# of that file failed; " Ana" and "Ana" were two students (every exercise saved twice).
@pytest.mark.parametrize("suffix", [".json", ".csv"])
@pytest.mark.parametrize("typed", ["Ana\r", " Ana", "Ana\r\n", "\tAna  ", "Ana\n"])
def test_a_name_as_typed_is_one_student_and_every_save_works(tmp_path, suffix, typed):
    path = tmp_path / f"progress{suffix}"
    for name in (typed, "Ana", typed):
        progress("01", student=name, verdicts=_verdicts()).save(path)
    rows = read(path)
    assert {r.student for r in rows} == {"Ana"} and len(rows) == 3
    assert main([str(path)]) == 0 and not list(tmp_path.glob("*.damaged-*"))


def test_names_are_spelled_one_way():
    from course_utils.exercises.progress import student_name

    assert student_name("  Ana \r\n Lima\t") == "Ana Lima"
    assert student_name("Jose\u0301") == student_name("Jos\u00e9") == "Jos\u00e9"  # one é, however typed
    assert student_name("Zoë 🙂") == "Zoë 🙂"


@pytest.mark.parametrize("typed, words", [
    ("", ["Received student=''", "empty", 'student="Ada Lovelace"']),
    ("   ", ["Received student='   '", "empty", 'student="Ada Lovelace"']),
    ("\r\n", ["Received student='\\r\\n'", "empty"]),
    ("Ana \ud83d", ["Received student='Ana \\ud83d'", "half of a character", "Type the name again"]),
])
def test_a_name_no_file_can_hold_is_refused_with_what_to_do(tmp_path, typed, words):
    with pytest.raises(ValueError) as error:
        progress("01", student=typed, verdicts=_verdicts())
    for word in words:
        assert word in str(error.value)
    with pytest.raises(TypeError, match="Received student=7 .int.. Give the name as text"):
        progress("01", student=7, verdicts=[])


def test_a_name_from_the_environment_is_spelled_and_checked_the_same(monkeypatch):
    monkeypatch.setenv("COURSE_STUDENT", " Ana\r")
    assert progress("01", verdicts=[]).rows[0].student == "Ana"
    monkeypatch.setenv("COURSE_STUDENT", "  ")
    with pytest.raises(ValueError, match="Received COURSE_STUDENT='  ', which is empty"):
        progress("01", verdicts=[])


def test_a_file_the_carriage_return_bug_wrote_is_read_and_saving_works_again(tmp_path, capsys):
    old = tmp_path / "old.csv"  # what an earlier save wrote for the name "Ana\r"
    old.write_bytes(b"student,exercise,status,attempts\nAna\r,01.1,correct,2\nAna\r,01.2,not yet,1\n")
    assert [(r.student, r.exercise) for r in read(old)] == [("Ana", "01.1"), ("Ana", "01.2")]
    assert main([str(old)]) == 0 and "Traceback" not in capsys.readouterr().err
    progress("02", student="Ana", verdicts=[]).save(old)
    assert len(read(old)) == 2 + 3 and not list(tmp_path.glob("*.damaged-*"))
    mac = tmp_path / "mac.csv"  # a spreadsheet that ends lines with a lone \r
    mac.write_bytes(b"student,exercise,status,attempts\rAna,01.1,correct,2\r")
    assert [(r.student, r.status) for r in read(mac)] == [("Ana", "correct")]


def test_a_json_file_with_two_spellings_of_one_name_keeps_the_best_row(tmp_path):
    path = tmp_path / "old.json"
    rows = [{"student": " Ana", "exercise": "01.1", "status": "correct", "attempts": 2},
            {"student": "Ana", "exercise": "01.1", "status": "not yet", "attempts": 1},
            {"student": "Ana\ud83d", "exercise": "01.1", "status": "not yet", "attempts": 1}]
    path.write_text(json.dumps({"format": 1, "rows": rows}))
    progress("02", student="Ana", verdicts=[]).save(path)  # a half character read is saved as U+FFFD
    saved = {(r.student, r.exercise): r.status for r in read(path)}
    assert saved[("Ana", "01.1")] == "correct" and saved[("Ana\ufffd", "01.1")] == "not yet"
    assert room([path])["01.1"] == {"not attempted": 0, "not yet": 1, "correct": 1}


def test_a_csv_line_no_reader_can_take_is_named_never_a_traceback(tmp_path, capsys):
    path = tmp_path / "huge.csv"
    path.write_text('student,exercise,status,attempts\n"' + "a" * 200_000 + '",01.1,correct,1\n')
    with pytest.raises(ProgressFileError, match=r"huge.csv' cannot be read near line \d.*field limit.*mend that"):
        read(path)
    assert main([str(path)]) == 1 and "Traceback" not in capsys.readouterr().err


def test_the_room_command_shows_each_learner_the_exercise_they_are_on_and_who_is_stuck(tmp_path, capsys):
    from course_utils.exercises.progress import STUCK_ATTEMPTS
    from course_utils.exercises.room import learners
    from course_utils.exercises.progress_file import Row, write

    lesson01 = sorted(e for e in __import__("course_utils").exercises.EXERCISES if e.startswith("01."))
    rows = {
        "ada": [Row("Ada", "01.1", "correct", 1), Row("Ada", "01.2", "not yet", STUCK_ATTEMPTS + 1)],
        "bob": [Row("Bob", "01.1", "correct", 2), Row("Bob", "01.2", "not attempted", 0)],
        "cy": [Row("Cy", e, "correct", 1) for e in lesson01],
        "dee": [Row("Dee", "01.1", "not yet", 1), Row("Dee", "01.3", "not yet", 2)],
    }
    paths = []
    for name, saved in rows.items():
        write(tmp_path / f"{name}.json", saved)
        paths.append(tmp_path / f"{name}.json")
    found = {learner.student: learner for learner in learners(paths)}
    assert [learner.student for learner in learners(paths)] == ["Ada", "Bob", "Cy", "Dee"]  # the stuck first
    assert (found["Ada"].on, found["Ada"].stuck, found["Ada"].correct) == ("01.2", (("01.2", STUCK_ATTEMPTS + 1),), 1)
    assert (found["Bob"].on, found["Bob"].stuck) == ("01.2", ())  # the next one after the last correct
    assert (found["Cy"].on, found["Cy"].correct, found["Cy"].exercises) == (None, len(lesson01), len(lesson01))
    assert found["Dee"].on == "01.3"  # the last one tried
    write(tmp_path / "dee.json", rows["dee"] + [Row("Dee", "01.3", "not yet", STUCK_ATTEMPTS)])
    assert [learner.student for learner in learners(paths)][:2] == ["Ada", "Dee"]
    assert main([str(p) for p in paths]) == 0
    out = capsys.readouterr().out
    assert "4 learners, 2 stuck" in out
    assert f"stuck: 01.2 ({STUCK_ATTEMPTS + 1} tries)" in out and "on done" in out
