"""Every lesson runs top to bottom in a fresh kernel on 8 simulated CPU devices.

Each lesson runs twice: as a learner finds it (exercises untouched must not stop
"Run All"), and with every worked solution filled in (every checker must say
correct).
"""

import nbformat
import pytest

from course_utils.course.runner import exercise_cells, execute, lessons, solution_for

LESSONS = lessons("notebooks")
IDS = [p.stem for p in LESSONS]

def test_the_series_is_there():
    assert [p.stem[:2] for p in LESSONS] == [f"{i:02d}" for i in range(len(LESSONS))]
    assert len(LESSONS) >= 6

@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_committed_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.metadata["kernelspec"]["language"] == "python"
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert dirty == [], f"cells {dirty} have saved outputs; clear them before committing"

@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_exercises_have_solutions(path):
    nb = nbformat.read(path, as_version=4)
    cells = exercise_cells(nb)
    if path.stem.startswith("00"):
        return
    assert len(cells) >= 2, "every lesson from 01 on has at least two exercises"
    for i in cells:
        assert "..." in nb.cells[i].source, "an exercise cell starts with a blank (...)"
        assert "check(" in solution_for(nb, i)

@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_runs_as_a_learner_finds_it(path):
    run = execute(path, extra_cells=(
        "from course_utils.course.exercises import results\n"
        "assert all(v.status == 'not attempted' for v in results()), results()",
    ))
    outputs = [o for c in run.notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    if any("draw_" in c.source for c in run.notebook.cells):
        assert any("image/png" in o.get("data", {}) for o in outputs), "the lesson's figures show as images"

@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_solution_is_correct(path):
    expected = len(exercise_cells(nbformat.read(path, as_version=4)))
    execute(path, solutions=True, extra_cells=(
        "from course_utils.course.exercises import results\n"
        "_verdicts = results()\n"
        "assert all(v.ok for v in _verdicts), _verdicts\n"
        f"assert len(_verdicts) == {expected}, _verdicts",
    ))
