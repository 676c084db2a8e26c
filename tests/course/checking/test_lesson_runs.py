"""A lesson run reports its kernel's own time, claims and memory; a series runs two at once."""

import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_utils.course.checking.lesson_runs import execute, execute_series

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

ALLOCATED_MB = 700


def _lesson(tmp_path, name, source):
    notebook = new_notebook(cells=[new_code_cell(source)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / name
    nbformat.write(notebook, path)
    return path


def test_a_series_runs_two_lessons_at_once_and_yields_them_in_order(tmp_path):
    import time

    slow = _lesson(tmp_path, "01_slow.ipynb", "import time\ntime.sleep(3)\nprint('slow')")
    quick = _lesson(tmp_path, "02_quick.ipynb", "print('quick')")
    start = time.perf_counter()
    runs = list(execute_series([slow, quick], workers=2))
    wall = time.perf_counter() - start
    assert [r.path for r in runs] == [slow, quick]
    assert runs[1].seconds < runs[0].seconds  # the quick one finished first, and waited its turn
    assert [r.notebook.cells[0].outputs[0]["text"] for r in runs] == ["slow\n", "quick\n"]
    assert wall < runs[0].seconds + runs[1].seconds, (wall, [r.seconds for r in runs])


def test_a_lesson_that_fails_stops_the_series_and_the_kernel_beside_it(tmp_path):
    import time

    import pytest
    from nbclient.exceptions import CellExecutionError

    failing = _lesson(tmp_path, "01_failing.ipynb", "import os, time\nfor _ in range(300):  # until the lesson beside it runs\n"
                                                    "    if os.path.exists('pid'):\n        break\n    time.sleep(0.1)\n"
                                                    "raise ValueError('the lesson is wrong')")
    beside = _lesson(tmp_path, "02_beside.ipynb", "import os, time\nopen('pid', 'w').write(str(os.getpid()))\n"
                                                  "time.sleep(60)")
    never = _lesson(tmp_path, "03_never.ipynb", "open('started', 'w').write('yes')")
    start = time.perf_counter()
    with pytest.raises(CellExecutionError, match="the lesson is wrong"):
        list(execute_series([failing, beside, never], workers=2))
    assert time.perf_counter() - start < 30  # not the 60 s the lesson beside it would have taken
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # its kernel is gone
    assert not (tmp_path / "started").exists()


def test_a_lesson_that_fails_while_an_earlier_one_runs_starts_no_later_one(tmp_path, monkeypatch):
    """A thread takes the next lesson the moment its last one ends: the series stops there, not when the caller
    reaches the failed lesson (here after the first, slow one)."""
    import time

    from course_utils.course.checking import lesson_runs

    started = []

    def fake_execute(path, **kwargs):
        started.append(path.name)
        if path.name == "slow":
            time.sleep(2)
            return "slow's run"
        if path.name == "failing":
            raise ValueError("the lesson is wrong")
        return "a run after the failure"

    monkeypatch.setattr(lesson_runs, "execute", fake_execute)
    series = execute_series([tmp_path / "slow", tmp_path / "failing", tmp_path / "after"], workers=2)
    assert next(series) == "slow's run"
    with pytest.raises(ValueError, match="the lesson is wrong"):
        next(series)
    assert sorted(started) == ["failing", "slow"]
    kept_going = list(execute_series([tmp_path / "failing", tmp_path / "after"], workers=1, keep_going=True))
    assert [type(r).__name__ for r in kept_going] == ["Failed", "str"]


def test_a_kernels_peak_is_its_own_not_that_of_the_process_that_started_it(tmp_path):
    """Linux carries a parent's peak memory into the child it starts: a kernel started by this test
    process, made large here, must still report only what the kernel itself held."""
    notebook = new_notebook(cells=[new_code_cell("held = bytearray(200 * 2**20)\nfor i in range(0, len(held), 4096):\n"
                                                 "    held[i] = 1")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "00_tiny.ipynb"
    nbformat.write(notebook, path)
    large = bytearray(ALLOCATED_MB * 2**20)
    for i in range(0, len(large), 4096):
        large[i] = 1
    run = execute(path)
    del large
    assert 200 <= run.peak_rss_mb < ALLOCATED_MB, run.peak_rss_mb


def _stopped(tmp_path, module, args, sig):
    """Starts `python -m module args` on a lesson that sleeps, signals it once the kernel runs; what it left."""
    import subprocess
    import sys
    import time

    lesson = tmp_path / "lessons"
    lesson.mkdir()
    _lesson(lesson, "00_sleeps.ipynb", "import os, time\nopen(os.environ['MARK'], 'w').write(str(os.getpid()))\n"
                                       "time.sleep(120)")
    mark = tmp_path / "kernel-pid"
    env = {**os.environ, "MARK": str(mark), "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", module, *[a.format(lessons=lesson) for a in args]],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    connections = tmp_path / f"course-kernels-{os.getuid()}" / str(process.pid)
    during = sorted(p.name for p in connections.glob("kernel-*.json"))
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    kernel = int(mark.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(kernel):
        time.sleep(0.1)
    return process.returncode, out + err, during, connections, kernel


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_build_killed_with_sigterm_stops_its_kernels_and_leaves_no_connection_file(tmp_path):
    import signal

    code, said, during, connections, kernel = _stopped(
        tmp_path, "course_utils.course", ["render", "--notebooks", "{lessons}", "--out", str(tmp_path / "out"), "--pages"],
        signal.SIGTERM)
    assert len(during) == 1  # the kernel's connection file, in the run's own folder
    assert code == 130 and "Stopped (Ctrl-C or a kill): the lessons' kernels were stopped" in said
    assert "Traceback" not in said
    assert not list(connections.glob("*.json")) and not _alive(kernel)
    assert not list(tmp_path.glob("tmp*.json"))  # nor in the temporary folder, where jupyter_client puts them


def test_a_bench_stopped_with_ctrl_c_says_so_and_a_killed_runs_files_go_at_the_next_run(tmp_path):
    import signal

    from course_utils.course.checking.jupyter_kernels import connection_folder

    code, said, during, connections, kernel = _stopped(
        tmp_path, "course_utils.course", ["bench", "lessons", "{lessons}"], signal.SIGINT)
    assert code == 130 and "Stopped (Ctrl-C or a kill) during the cold pass: no figures to compare." in said
    assert "Traceback" not in said and "DeadKernelError" not in said
    assert not list(connections.glob("*.json")) and not _alive(kernel)
    again = tmp_path / "again"
    again.mkdir()
    code, said, during, connections, kernel = _stopped(again, "course_utils.course", ["bench", "lessons", "{lessons}"], signal.SIGKILL)
    assert code == -signal.SIGKILL and len(during) == 1 and connections.exists()  # nothing could clean up
    import tempfile

    before = tempfile.tempdir
    tempfile.tempdir = str(connections.parents[1])
    try:
        connection_folder()  # the next run's first kernel
    finally:
        tempfile.tempdir = before
    assert not connections.exists()
