"""The benchmark runs the series cold and warm, and says whether every claim held."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_utils.course.bench import lessons as bench

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)


def _lesson(folder, name, says, check):
    notebook = new_notebook(cells=[new_markdown_cell(f"The answer is {says}."), new_code_cell("x = 42.0\nx")])
    notebook.cells[1].metadata["claims"] = [{"says": says, "check": check}]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / name)


def test_cold_and_warm_columns_and_every_claim(tmp_path, capsys):
    _lesson(tmp_path, "00_tiny.ipynb", "42.0", "_ == 42.0")
    assert bench.main([str(tmp_path), "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "cold s" in out and "warm s" in out and "00_tiny.ipynb" in out
    assert "claims: 1 per series, every one held, cold and warm" in out
    assert '"cold_seconds"' in (tmp_path / "b.json").read_text()


def test_a_false_claim_fails_the_benchmark(tmp_path, capsys):
    _lesson(tmp_path, "00_tiny.ipynb", "41.0", "_ == 41.0")
    assert bench.main([str(tmp_path)]) == 1
    assert "2 did NOT hold" in capsys.readouterr().out


def test_budget_and_targets_are_judged_apart(tmp_path, capsys, monkeypatch):
    _lesson(tmp_path, "00_tiny.ipynb", "42.0", "_ == 42.0")
    monkeypatch.setattr(bench, "COLD_SECONDS", 0)  # no lesson starts that fast: the targets are missed
    assert bench.main([str(tmp_path)]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("00_tiny.ipynb"))
    assert line.split()[-2:] == ["yes", "NO"]


def test_a_lesson_that_fails_is_named_and_the_others_still_measured(tmp_path, capsys):
    _lesson(tmp_path, "00_tiny.ipynb", "42.0", "_ == 42.0")
    notebook = new_notebook(cells=[new_code_cell("raise RuntimeError('planted in the lesson')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "01_broken.ipynb")
    assert bench.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert next(l for l in out.splitlines() if l.startswith("00_tiny.ipynb")).split()[-2:] == ["yes", "yes"]
    assert "01_broken.ipynb: the cold run failed: RuntimeError: planted in the lesson" in out
    assert "claims: 1 per series (of the lessons that ran), every one held" in out


def test_a_cell_that_never_ends_is_stopped_at_the_time_limit(tmp_path, capsys):
    notebook = new_notebook(cells=[new_code_cell("import time\nwhile True: time.sleep(1)")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "00_endless.ipynb")
    assert bench.main([str(tmp_path), "--timeout", "3"]) == 1
    assert "00_endless.ipynb: the cold run failed: a cell ran over 3 s (--timeout)" in capsys.readouterr().out


def test_a_time_limit_that_is_not_seconds_is_refused(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        bench.main([str(tmp_path), "--timeout", "soon"])
    assert "a whole number of seconds of at least 1, e.g. --timeout 120. Received: 'soon'" in capsys.readouterr().err
