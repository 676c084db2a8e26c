"""Grading holds against its students (grade_isolated, grade_check, grade_wire, grade_run).

Planted in one grading run of lesson 01 (`in_background`): a hand-in that rebinds `check`, one
that patches the checkers' module, `Verdict.ok` and IPython's error display, one that swaps
`wire` in `sys.modules`, one that goes after the course (it deletes its classmates' hand-ins by
relative and absolute path, finds the course directory from its ancestors' open files and command
lines in /proc, overwrites the start of `gradebook.db`, reads the solutions, and leaves a process
running in a session of its own), one that is not JSON, one with an exercise cell twice, and one
whose cell never ends; beside them a fully solved hand-in. Each is graded by the course's own
check, or gets a zero with its reason, and the others are graded; the gradebook and every
hand-in come through whole, and no process is left. Then: a second run while one holds the lock is
refused, the teacher's `nbgrader_config.py` is kept, and `--timeout` is validated.
"""

import csv
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

pytest.importorskip("nbgrader", reason="grading needs nbgrader==0.9.6 (requirements-test.txt; make test installs it)")

from course_utils.course.grading import wire as grade_wire# noqa: E402
from course_utils.course.grading.isolation import LOCK, GradingBusy, grading_lock  # noqa: E402
from course_utils.course.grading.assignment import grade_assignment as grade  # noqa: E402
from course_utils.course.grading.nbgrader_course import COURSE_DEFAULT, CONFIG, build_course, scores  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
LESSON = ROOT / "notebooks" / "01_mesh_grids.ipynb"
WRONG = {"answer_01_1": 'answer = "cpu:99"', "answer_01_2": "mesh_4x2 = []"}  # and 01.3 left blank
REBIND = 'def check(*args, **kwargs):\n    class Verdict:\n        ok = True\n    return Verdict()'
TAMPER = '''import course_utils.exercises as _e, course_utils.exercises.core as _c
_c.Verdict.ok = property(lambda self: True)
_e.check = _c.check = lambda exercise_id, answer=...: _c.Verdict(exercise_id, "correct", "Well done.")
get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)'''
SWAP = '''import sys, types
_fake = types.ModuleType("course_utils.course.grading.wire")
_fake.hand_in = lambda *args, **kwargs: None
sys.modules["course_utils.course.grading.wire"] = _fake'''
LINGER = "course-grading-test-lingers"  # in the command line of the process the hand-in leaves running
DELETE = '''import glob, os, subprocess, sys
for path in glob.glob("../../../submitted/*/lesson01/*.ipynb") + glob.glob("../../../../*/submitted/*/lesson01/*"):
    if "/del/" not in path:
        os.remove(path)
found, pid = set(), os.getpid()
while pid > 1:  # the course directory, from an ancestor's open files (grading.lock) and command line (--out)
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            if os.readlink(fd).endswith("/grading.lock"):
                found.add(os.path.dirname(os.readlink(fd)))
        except OSError:
            pass
    try:
        words = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\\0")
        found.update(words[i + 1] for i, word in enumerate(words[:-1]) if word == "--out")
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break
found.add(COURSE)  # and by the absolute path a classmate could guess
reached = []
for course in found:
    for path in glob.glob(course + "/submitted/*/lesson01/*.ipynb"):
        if "/del/" not in path:
            os.remove(path)
            reached.append("deleted " + path)
    try:
        with open(course + "/gradebook.db", "r+b") as gradebook:
            gradebook.write(b"overwritten by a hand-in" * 8)
        reached.append("gradebook")
    except OSError:
        pass
    for path in glob.glob(course + "/source/*/*.ipynb") + glob.glob(REPO + "/notebooks/*.ipynb"):
        reached.append("read " + path + ": " + str(len(open(path).read())))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", LINGER], start_new_session=True)
print("REACHED", reached)'''
TIMEOUT = 40  # seconds per cell: lesson 01's slowest cell takes a few


def in_background(folder: Path) -> dict:
    """Lesson 01 built, eight hand-ins planted, graded once with a 40 s time limit per cell."""
    course = build_course(ROOT / "notebooks", folder / "course", only=("01",))
    attack = f"COURSE, REPO, LINGER = {str(course)!r}, {str(ROOT)!r}, {LINGER!r}\n{DELETE}"
    release = course / "release" / "lesson01" / LESSON.name
    source = nbformat.read(course / "source" / "lesson01" / LESSON.name, as_version=4)
    right = _cell(source, "answer_01_1").source
    _submit(course, "bob", source)  # every solution in place
    _submit(course, "mal", _edited(release, {**WRONG, "answer_01_1": f'{WRONG["answer_01_1"]}\n{REBIND}'}))
    _submit(course, "tam", _edited(release, WRONG, before=TAMPER))
    _submit(course, "sub", _edited(release, WRONG, before=SWAP))
    _submit(course, "del", _edited(release, {"answer_01_1": right}, before=attack))
    (course / "submitted" / "nj" / "lesson01").mkdir(parents=True)
    (course / "submitted" / "nj" / "lesson01" / LESSON.name).write_text("answer = 'cpu:5'\n")  # not JSON
    twice = _edited(release, {"answer_01_1": right})
    twice.cells.insert(0, nbformat.from_dict(json.loads(json.dumps(_cell(twice, "answer_01_2")))))
    _submit(course, "dup", twice)
    _submit(course, "slow", _edited(release, {"answer_01_1": right, "answer_01_3": "while True:\n    pass"}))
    _submit(course, "quit", _edited(release, {"answer_01_1": right, "answer_01_2": "import os\nos._exit(0)"}))
    (course / "submitted" / "empty" / "lesson01").mkdir(parents=True)
    (course / "submitted" / "empty" / "lesson01" / LESSON.name).write_text("")  # an empty file
    handed_in = {p: p.read_bytes() for p in (course / "submitted").glob("*/lesson01/*")}
    said = []
    submissions, grades, left_out = grade(course, "lesson01", timeout=TIMEOUT, say=said.append)
    return {"course": course, "submissions": submissions, "rows": list(csv.DictReader(grades.open())),
            "said": said, "handed_in": handed_in}


def _cell(notebook, grade_id):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _edited(release: Path, answers: dict[str, str], *, before: str = ""):
    """The release version with some answer cells replaced, and a cell of the student's own first."""
    notebook = nbformat.read(release, as_version=4)
    for grade_id, source in answers.items():
        _cell(notebook, grade_id).source = source
    if before:
        first = notebook.cells.index(_cell(notebook, "answer_01_1"))
        notebook.cells.insert(first, nbformat.v4.new_code_cell(before))
    return notebook


def _submit(course, student, notebook):
    target = course / "submitted" / student / "lesson01" / LESSON.name
    target.parent.mkdir(parents=True)
    # as written, not as nbformat would repair it (a doubled cell keeps its id), and with no warning to
    # raise: this runs in the background, beside tests that change the warning filters
    target.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")


def _row(in_background, student):
    return next(row for row in in_background["rows"] if row["student_id"] == student)


def test_the_checker_cannot_be_replaced_from_the_notebook(in_background):
    course = in_background["course"]
    zero = {"test_01_1": 0.0, "test_01_2": 0.0, "test_01_3": 0.0}
    for student in ("mal", "tam", "sub"):  # rebinding check; patching its module, Verdict.ok, error display
        assert scores(course, "lesson01", student) == zero, student
    assert scores(course, "lesson01", "bob") == {"test_01_1": 1.0, "test_01_2": 1.0, "test_01_3": 1.0}
    assert "01.1: the notebook's own check said correct, the course's check says not yet" in _row(
        in_background, "tam")["note"]
    assert "01.2: no answer reached its test cell" in _row(in_background, "sub")["note"]


def test_a_hand_in_cannot_reach_its_classmates(in_background):
    course = in_background["course"]
    for student in ("bob", "mal", "tam", "slow"):
        assert (course / "submitted" / student / "lesson01" / LESSON.name).exists(), student
    assert scores(course, "lesson01", "del")["test_01_1"] == 1.0
    assert {row["student_id"] for row in in_background["rows"]} == {"bob", "mal", "tam", "sub", "del", "nj", "dup",
                                                                     "slow", "quit", "empty"}


def _reached(in_background) -> str:
    """What the hand-in that goes after the course printed: the course's files it reached."""
    executed = in_background["course"] / "autograded" / "del" / "lesson01" / LESSON.name
    return next(line for cell in nbformat.read(executed, as_version=4).cells for output in cell.get("outputs", [])
                for line in output.get("text", "").splitlines() if line.startswith("REACHED"))


def test_the_gradebook_and_every_hand_in_come_through_a_hand_in_that_goes_after_them(in_background):
    from course_utils.course.grading.safekeeping import gradebook_problem

    course, said = in_background["course"], in_background["said"]
    assert gradebook_problem(course / "gradebook.db") is None  # the next `grade` reads it
    assert scores(course, "lesson01", "bob") == {"test_01_1": 1.0, "test_01_2": 1.0, "test_01_3": 1.0}
    assert all(path.read_bytes() == data for path, data in in_background["handed_in"].items())
    mode = next(line for line in said if line.startswith("Hand-ins run"))
    if "bubblewrap sandbox" in mode:  # the course directory, the solutions and /proc's ancestors are out of reach
        assert _reached(in_background) == "REACHED []", _reached(in_background)
    else:  # no sandbox here: it reached them, and everything was put back, the teacher told
        assert "Hand-ins run as your user, without a sandbox" in mode
        assert "gradebook" in _reached(in_background)
        note = _row(in_background, "del")["note"]
        assert "this hand-in reached the course directory: changed gradebook.db" in note
        assert "Everything was put back" in note and any(line.startswith("del: ") for line in said)
    assert len(list((course / "gradebook-backups").glob("gradebook-2*.db"))) == 2  # before the run, and after


def test_every_process_a_hand_in_started_is_stopped(in_background):
    lingering = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and LINGER.encode() in (entry / "cmdline").read_bytes():
                lingering.append(entry.name)
        except OSError:
            pass
    assert _reached(in_background).startswith("REACHED")  # the hand-in ran to its end, its process started
    assert lingering == [], f"processes a hand-in started outlived its grading: {lingering}"


def test_a_broken_hand_in_gets_zero_with_its_reason_and_the_others_are_graded(in_background):
    status = {s.student: s.status for s in in_background["submissions"]}
    assert status["nj"] == status["dup"] == "broken" and status["bob"] == "as released"
    for student, reason in (("nj", "is not a notebook nbformat can read"),
                            ("dup", "holds the graded cell(s) answer_01_2 more than once")):
        row = _row(in_background, student)
        assert float(row["raw_score"]) == 0.0 and reason in row["note"], row
    slow = _row(in_background, "slow")
    assert "(answer_01_3) ran past the time limit and was stopped" in slow["note"]
    assert scores(in_background["course"], "lesson01", "slow") == {"test_01_1": 1.0, "test_01_2": 0.0,
                                                                   "test_01_3": 0.0}
    assert _row(in_background, "bob")["note"] == "" and float(_row(in_background, "bob")["raw_score"]) == 3.0
    empty = _row(in_background, "empty")  # named, with its reason
    assert float(empty["raw_score"]) == 0.0 and "is not a notebook nbformat can read" in empty["note"], empty
    ended = _row(in_background, "quit")  # its kernel ended itself: graded, never the end of the class's grading
    assert float(ended["raw_score"]) <= 1.0 and ended["note"], ended


def test_a_second_grading_run_is_refused_while_one_runs(in_background):
    course = in_background["course"]
    with grading_lock(course):
        with pytest.raises(GradingBusy, match=f"{course / LOCK} is held by pid"):
            grade(course, "lesson01")
        done = subprocess.run([sys.executable, "-m", "course_utils.course", "grade", "lesson01",
                               "--out", str(course)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and "another grading or build of this course directory is running" in done.stderr


def test_the_teachers_nbgrader_config_is_kept(tmp_path, capsys):
    course = build_course(ROOT / "notebooks", tmp_path, release=False, only=("01",))
    config = course / "nbgrader_config.py"
    assert config.read_text() == CONFIG and capsys.readouterr().out == ""
    config.write_text(CONFIG + "c.Execute.timeout = 1200  # the teacher's\n")
    build_course(ROOT / "notebooks", tmp_path, release=False, only=("01",))
    assert config.read_text().endswith("c.Execute.timeout = 1200  # the teacher's\n")
    assert (course / COURSE_DEFAULT).read_text() == CONFIG
    assert f"Kept your {config}" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "abc", "100000"])
def test_timeout_is_validated(value):
    done = subprocess.run([sys.executable, "-m", "course_utils.course", "grade", "lesson01",
                           "--timeout", value, "--out", "/nonexistent"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and f"Received: --timeout {value}. Give the seconds each cell may run" in done.stderr


def test_every_model_answer_is_named_live():
    """An exercise whose answer is a live model cannot leave the kernel: the grader must know which."""
    from course_utils.exercises import EXERCISES

    import re

    models = {e for e, x in EXERCISES.items() if re.search(r"\bthe (Keras )?model\b", x.form)}
    assert models == grade_wire.LIVE


def test_answers_cross_as_data_and_keep_their_kind():
    from course_utils.course.grading.wire import from_wire, to_wire

    class Sly(str):
        def __eq__(self, other):
            return True

    for answer in ("cpu:5", 3, 2.5, float("inf"), None, ..., True, (1, 2), [(2, 1, 4)], {"cpu:1"},
                   {".*d2/kernel": (None, "model")}, range(3), b"x"):
        assert from_wire(json.loads(json.dumps(to_wire(answer)))) == answer
        assert type(from_wire(to_wire(answer))) is type(answer)
    assert type(from_wire(to_wire(Sly("cpu:5")))) is str  # a str whose == says yes arrives as a plain str
    assert "object" in to_wire(object()) and "unreadable" in to_wire(iter(range(10**6)))
    with pytest.raises(ValueError, match="cannot be rebuilt"):
        from_wire({"pickle": "..."})


def test_a_doubled_cell_is_named_even_when_warnings_are_errors(tmp_path):
    import warnings

    from course_utils.course.grading.submissions import _read

    cell = {"cell_type": "code", "id": "same", "execution_count": None, "outputs": [], "source": "answer = 1",
            "metadata": {"nbgrader": {"grade_id": "answer_01_1", "solution": True, "grade": False,
                                      "locked": False, "schema_version": 3, "task": False}}}
    path = tmp_path / "01_mesh_grids.ipynb"
    path.write_text(json.dumps({"cells": [cell, cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as under python -W error, or a test beside that sets it
        notebook, why = _read(path)
    assert notebook is None and "holds the graded cell(s) answer_01_1 more than once" in why


def test_grading_stopped_with_ctrl_c_stops_the_kernel_and_leaves_no_file(tmp_path):
    """Ctrl-C (or SIGTERM) while a hand-in runs: the command says so and exits 130, the hand-in's kernel
    is gone, its connection file and the grading copies with it, and the hand-in is unchanged."""
    import os
    import signal
    import time

    course = build_course(ROOT / "notebooks", tmp_path / "course", only=("01",))
    release = course / "release" / "lesson01" / LESSON.name
    # the kernel marks its own folder (the one place a sandboxed hand-in may write), then waits
    _submit(course, "ana", _edited(release, {}, before="import time\nopen('kernel-started', 'w').close()\n"
                                                      "time.sleep(120)"))
    handed_in = (course / "submitted" / "ana" / "lesson01" / LESSON.name).read_bytes()
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "course_utils.course", "grade", "lesson01",
                                "--out", str(course)], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(temporary)})
    deadline = time.monotonic() + 120
    while not list(temporary.rglob("kernel-started")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(temporary.rglob("kernel-started")), process.communicate(timeout=60)
    assert list(temporary.rglob("*.json"))  # the kernel's connection file, while it runs
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Stopped (Ctrl-C or a kill): every kernel and grading process" in err, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while _running_in(temporary) and time.monotonic() < deadline:
        time.sleep(0.1)  # killed (SIGKILL to its tree) but not yet gone
    assert _running_in(temporary) == []  # the kernel, the keeper, the sandbox: every one named its folder
    assert not list(temporary.iterdir())  # no connection file, no grading copy
    assert (course / "submitted" / "ana" / "lesson01" / LESSON.name).read_bytes() == handed_in


def _running_in(folder: Path) -> list[str]:
    """The live processes whose command line names `folder` (zombies are dead already)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(folder).encode() in (entry / "cmdline").read_bytes() \
                    and (entry / "stat").read_text().rsplit(") ", 1)[-1][0] != "Z":
                found.append(entry.name)
        except (OSError, IndexError):
            pass
    return found


def test_a_full_disk_is_named_not_called_a_database_error(tmp_path):
    from course_utils.course.grading.isolation import _failure

    (tmp_path / "junk").write_bytes(bytes(3 * 2**20))  # what the hand-in wrote
    output = ("[AutogradeApp | ERROR] (sqlite3.OperationalError) database or disk is full\n"
              "[AutogradeApp | ERROR] There was an error accessing the nbgrader database. This may occur if you "
              "recently upgraded nbgrader.\n")
    said = _failure(output, tmp_path)
    assert said.startswith("the disk filled up while it ran ((sqlite3.OperationalError) database or disk is full)")
    assert "grown to 3 MiB, written by the hand-in's code" in said and "nbgrader database" not in said
