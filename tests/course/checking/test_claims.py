"""A lesson's claims: which figures of its text need one, and the checks that run with it."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_utils.course.checking.claims import claims_of, figures, normal, unclaimed, unquoted
from course_utils.course.checking.lesson_runs import execute


def _figures(text):
    text = normal(text)
    return [text[a:b] for a, b in figures(text)]


def test_the_figures_a_reader_takes_as_results():
    text = ("Gemma 7B has 8.5 billion parameters: 34 GB, or 340,008 bytes and 27 % of it, `426,756` in code, "
            "on 8 devices of a 2 × 4 mesh with 128 units; exercise 05.1; cpu:6 holds it and `cpu:7` too; "
            "equivalent, NOT equivalent, AGREE, DIFFER, it fits; 4 bytes; 2³⁰ bytes; **93,480** B")
    assert _figures(text) == ["8.5", "34 GB", "340,008 bytes", "27 %", "cpu:6", "cpu:7", "equivalent",
                              "NOT equivalent", "AGREE", "DIFFER", "fits", "4 bytes", "93,480 B"]


def _lesson(prose, claims=(), given=()):
    notebook = new_notebook(cells=[new_markdown_cell(prose), new_code_cell("x = 6 * 7\nx")])
    notebook.cells[1].metadata["claims"] = [{"says": s, "check": c} for s, c in claims]
    notebook.metadata["course"] = {"given": list(given)}
    return notebook


def test_a_figure_is_covered_by_a_claim_or_a_given_passage_and_only_where_it_stands():
    prose = "The answer is 42.0 here, and **42.0** again; the budget is 1,000 bytes."
    assert len(unclaimed(_lesson(prose))) == 3
    claimed = _lesson(prose, claims=[("The answer is 42.0 here", "x == 42")], given=["1,000 bytes"])
    assert unclaimed(claimed) == ["'42.0' in “…The answer is 42.0 here, and 42.0 again; the budget is 1,000 by…”"]
    both = _lesson(prose, claims=[("42.0", "x == 42")], given=["1,000 bytes"])
    assert unclaimed(both) == [] and unquoted(both) == []


def test_a_claim_must_quote_the_text_and_be_an_expression():
    stale = _lesson("The answer is 42.", claims=[("The answer is 41", "x == 41")], given=["gone"])
    assert unquoted(stale) == ["cell 1: 'The answer is 41'", "given: 'gone'"]
    broken = _lesson("The answer is 42.", claims=[("42", "x = 42")])
    with pytest.raises(ValueError, match="not a Python expression"):
        claims_of(broken)
    misplaced = _lesson("The answer is 42.")
    misplaced.cells[0].metadata["claims"] = [{"says": "42", "check": "True"}]
    with pytest.raises(ValueError, match="claims belong to the code cell"):
        claims_of(misplaced)


def test_checks_run_after_their_cell_and_say_what_was_found(tmp_path):
    notebook = _lesson("Six times seven is 42.0, and a list is not a verdict.", claims=[
        ("42.0", "_ == 42.0"),
        ("Six times seven", "x == 43"),
        ("a list", "[x]"),
        ("is not a verdict", "undefined_name > 1"),
        ("Six times seven is", "__import__('numpy').int64(x) == 42"),  # a NumPy bool is a verdict too
    ])
    notebook.cells.append(new_code_cell("x = 0"))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "lesson.ipynb"
    nbformat.write(notebook, path)
    run = execute(path)
    assert [v.holds for v in run.claims] == [True, False, False, False, True]
    found = [v.found for v in run.false_claims]
    assert found[0] == "is False: the left side is 42, the right side 43"
    assert found[1] == "gives list [42], not True or False"
    assert found[2].startswith("raised NameError")
    assert str(run.false_claims[0]) == "cell 1: the lesson says 'Six times seven', but `x == 43` is False: " \
                                       "the left side is 42, the right side 43"
    assert [c.source for c in run.notebook.cells] == [c.source for c in notebook.cells]  # no harness cell left
    assert run.notebook.cells[1].outputs[0]["data"]["text/plain"] == "42"
