"""A lesson run reports its kernel's own time, claims and memory; a series runs two at once."""

import os

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from course_utils.course.runner import execute, execute_series

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
