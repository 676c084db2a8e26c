"""Every lesson runs top to bottom in a fresh kernel on 8 simulated CPU devices, and says only what it computed.

Each lesson runs twice (the session's `lesson_runs`): as a learner finds it, in Binder's environment
(exercises untouched must not stop "Run All"), and with every worked solution filled in (every
checker must say correct). In both runs every claim of the lesson's text must hold
(`course_utils.course.checking.claims`), and every figure of its text must be claimed. A lesson that compares
training runs is solved for the oldest instruction set XLA CPU targets, and runs once more for every
instruction set between that and XLA's default, so its claims are checked as older CPUs compute them.
"""

import nbformat
import pytest

from course_utils.course.checking.claims import claims_of, unclaimed, unquoted
from course_utils.course.lesson_parts import compares_runs, exercise_cells, lessons, solution_for

LESSONS = lessons("notebooks")
IDS = [p.stem for p in LESSONS]
VERDICT_LINES = ("EQUIVALENT", "NOT equivalent", "AGREE", "DIFFER")
# The lessons that compare training runs: where a CPU's last bits could change what the text says
COMPARING = [p for p in LESSONS if compares_runs(p)]


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
def test_every_figure_of_the_text_is_claimed_and_every_claim_quotes_the_text(path):
    nb = nbformat.read(path, as_version=4)
    assert unquoted(nb) == [], "these claims quote a passage the lesson no longer has"
    assert unclaimed(nb) == [], ("tie each figure to a claim on the cell that computes it, or list its "
                                 "passage under the notebook's course.given (course_utils/course/checking/claims.py)")


@pytest.mark.lesson_runs("learner")
@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_runs_as_a_learner_finds_it(path, lesson_runs):
    run = lesson_runs.learner(path)
    assert {e: v for e, v in run.verdicts().items() if v[0] != "not attempted"} == {}
    outputs = [o for c in run.notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    if any("draw_" in c.source for c in run.notebook.cells):
        assert any("image/png" in o.get("data", {}) for o in outputs), "the lesson's figures show as images"


@pytest.mark.lesson_runs("learner", "solved")
@pytest.mark.parametrize("solved", [False, True], ids=["as a learner finds it", "solved"])
@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_claim_holds(path, solved, lesson_runs):
    run = lesson_runs.solved(path) if solved else lesson_runs.learner(path)
    assert [str(v) for v in run.false_claims] == []
    assert len(run.claims) == len(claims_of(nbformat.read(path, as_version=4)))  # every check ran


@pytest.mark.lesson_runs("isa")
@pytest.mark.parametrize("path", COMPARING, ids=[p.stem for p in COMPARING])
def test_every_claim_of_a_lesson_that_compares_runs_holds_on_every_instruction_set(path, older_isa, lesson_runs):
    """`older_isa`: each instruction set between the two runs' (conftest's `OLDER_ISAS`)."""
    run = lesson_runs.on(path, older_isa)
    assert [str(v) for v in run.false_claims] == []
    assert len(run.claims) == len(claims_of(nbformat.read(path, as_version=4)))


def test_the_lessons_that_compare_runs_are_known():
    assert [p.stem[:2] for p in COMPARING] == ["03", "05", "08", "09", "11", "12"]


@pytest.mark.lesson_runs("learner")
@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_verdict_a_cell_prints_is_claimed(path, lesson_runs):
    """A cell that prints EQUIVALENT, AGREE or their opposites carries a claim that says which."""
    run = lesson_runs.learner(path)
    unclaimed_verdicts = []
    for i, cell in enumerate(run.notebook.cells):
        shown = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                        for o in cell.get("outputs", []))
        if any(word in shown for word in VERDICT_LINES) and not cell.metadata.get("claims"):
            unclaimed_verdicts.append((i, cell.source[:60]))
    assert unclaimed_verdicts == []


@pytest.mark.lesson_runs("solved")
@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_solution_is_correct(path, lesson_runs):
    expected = len(exercise_cells(nbformat.read(path, as_version=4)))
    found = lesson_runs.solved(path).verdicts()
    assert {e: v for e, v in found.items() if v[0] != "correct"} == {}
    assert len(found) == expected, found
