"""A lesson notebook's parts, and the copies made from it: exercises, solutions, teacher's notes.

An exercise is a code cell tagged `exercise`; its worked solution is the ```python block inside
the `<details>` markdown cell that follows it. Teacher-only cells are the collapsed solutions and
the slides' teacher's notes. The runner, the student build, the answer key and nbgrader's
assignments all read a lesson through these functions.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.parsing import parse_source

EXERCISE_TAG = "exercise"
_SOLUTION = re.compile(r"<details>.*?```python\n(.*?)```.*?</details>", re.S)
_TEACHER_ONLY = re.compile(r"\s*<details>\s*<summary>\s*(Solution|Teacher's notes)\s*</summary>")


def lessons(folder: str | os.PathLike = "notebooks") -> list[Path]:
    """The lessons of the series, in order (files named `NN_*.ipynb`)."""
    return sorted(p for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))


def compares_runs(path: str | os.PathLike) -> bool:
    """Whether a lesson compares training runs (a code cell calls `compare_runs`): where the last bits
    a CPU computes could change what its text says, so the tests run it on every instruction set."""
    import nbformat

    return any(c.cell_type == "code" and "compare_runs(" in c.source for c in nbformat.read(path, as_version=4).cells)


def solution_for(notebook, index: int) -> str:
    """The worked solution of the exercise cell at `index`."""
    following = notebook.cells[index + 1] if index + 1 < len(notebook.cells) else None
    found = _SOLUTION.search(following.source) if following and following.cell_type == "markdown" else None
    if found is None:
        raise ValueError(
            f"Exercise cell {index} has no solution: the next cell must be markdown with a "
            f"<details> block holding a ```python block."
        )
    return found.group(1)


def exercise_cells(notebook) -> list[int]:
    """Indexes of the exercise cells."""
    return [i for i, c in enumerate(notebook.cells)
            if c.cell_type == "code" and EXERCISE_TAG in c.metadata.get("tags", [])]


def with_solutions(notebook):
    """A copy of the notebook whose exercise cells hold their worked solutions."""
    filled = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in exercise_cells(filled):
        filled.cells[i].source = solution_for(notebook, i)
    return filled


@dataclass(frozen=True)
class ExerciseCell:
    """What an exercise cell checks: `check("03.2", answer)` gives exercise "03.2", name "answer"."""

    exercise: str
    name: str
    blank: str  # the cell's lines before the check call, e.g. "answer = ...  # a shape"


def exercise_cell(source: str) -> ExerciseCell:
    """Reads the exercise id and the checked name from an exercise cell's `check(...)` call."""
    for node in ast.walk(parse_source(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and \
                [type(a) for a in node.args] == [ast.Constant, ast.Name]:
            blank = "\n".join(line for line in source.splitlines() if "check(" not in line)
            return ExerciseCell(node.args[0].value, node.args[1].id, blank)
    raise ValueError(f'Received an exercise cell without a check("NN.M", name) call:\n{source}')


def teacher_only(cell) -> bool:
    """Whether a cell is for the teacher: a collapsed worked solution or the slides' teacher's notes."""
    found = _TEACHER_ONLY.match(cell.source) if cell.cell_type == "markdown" else None
    return found is not None


def teachers_notes(cell) -> bool:
    """Whether a cell is the slides' teacher's notes (a collapsed "Teacher's notes", not a solution)."""
    found = _TEACHER_ONLY.match(cell.source) if cell.cell_type == "markdown" else None
    return found is not None and found.group(1) == "Teacher's notes"


_SELF_STUDY = re.compile(r"<!-- self-study -->.*?<!-- /self-study -->", re.S)
_STUDENT = re.compile(r"<!-- student: (.*?) -->", re.S)


def student_text(markdown: str) -> str:
    """Markdown as the student copy reads it.

    A lesson marks what is true only of the self-study copy (that solutions sit below each exercise)
    as `<!-- self-study -->...<!-- /self-study -->`: the student copy leaves it out. Text only the
    student copy shows is written `<!-- student: ... -->`, a comment the self-study copy does not render.
    """
    return _STUDENT.sub(lambda found: found.group(1), _SELF_STUDY.sub("", markdown))


# What the lessons keep for the teacher's side in metadata: each cell's claims (which quote the
# teacher's notes and the worked answers, and the checks that compute them), the decks' summaries
# of outputs, and the lesson's givens. JupyterLab's property inspector shows a cell's metadata, so
# no copy a student receives may keep them.
TEACHER_CELL_METADATA = ("claims", "deck_summary")
TEACHER_NOTEBOOK_METADATA = ("course",)


def without_teacher_metadata(notebook) -> None:
    """Takes, in place, the teacher's side of a lesson's metadata out (claims, deck summaries, givens)."""
    for key in TEACHER_NOTEBOOK_METADATA:
        notebook.metadata.pop(key, None)
    for cell in notebook.cells:
        for key in TEACHER_CELL_METADATA:
            cell.metadata.pop(key, None)


def student_notebook(notebook):
    """A copy of a lesson without solutions: every worked solution and teacher's note removed,
    the text that speaks of them as the student copy reads it (`student_text`), and none of the
    teacher's metadata (`without_teacher_metadata`)."""
    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in exercise_cells(copy):
        solution_for(copy, i)  # raises when the cell after an exercise is not its solution
    copy.cells = [cell for cell in copy.cells if not teacher_only(cell)]
    for cell in copy.cells:
        if cell.cell_type == "markdown":
            cell.source = student_text(cell.source)
    without_teacher_metadata(copy)
    return copy


def build_student(folder: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Writes every lesson of `folder` into `out`, without solutions."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in lessons(folder):
        nbformat.write(student_notebook(nbformat.read(path, as_version=4)), out / path.name)
        written.append(out / path.name)
    return written


_SENTENCE = re.compile(r"\n|(?<=[.:;!?])\s")
_TAG = re.compile(r"</?(?:details|summary)>")  # the collapsing markup around a teacher's cell


def teacher_passages(notebook) -> dict[str, str]:
    """Every passage only the teacher's side of a lesson holds, each with where it comes from.

    They are the lines of each worked solution, the sentences of each collapsed solution and
    teacher's note, each claim's quoted passage and check, and each deck summary, less whatever the
    lesson's other cells also say (a solution line a later cell uses is no secret). Short
    fragments (under 12 characters of code, 25 of prose) are left out: they match ordinary text.
    Text is compared as claims are (`claims.normal`). A student's copy should hold none of them
    (`passages_in`).
    """
    from course_utils.course.checking.claims import normal

    shown = normal("\n".join(cell.source for cell in notebook.cells if not teacher_only(cell)))
    found: dict[str, str] = {}

    def keep(text: str, where: str, shortest: int) -> None:
        text = normal(text.strip())
        if len(text) >= shortest and text not in shown:
            found.setdefault(text, where)

    for i in exercise_cells(notebook):
        for line in solution_for(notebook, i).splitlines():
            keep(line, f"the worked solution of exercise cell {i}", 12)
    for i, cell in enumerate(notebook.cells):
        if teacher_only(cell):
            for sentence in _SENTENCE.split(cell.source):
                keep(_TAG.sub("", sentence), f"the teacher's cell {i}", 25)
        for claim in cell.metadata.get("claims", []):
            keep(claim["says"], f"a claim of cell {i}", 1)
            keep(claim["check"], f"a claim's check of cell {i}", 1)
        if "deck_summary" in cell.metadata:
            keep(cell.metadata["deck_summary"], f"the deck summary of cell {i}", 1)
    for given in notebook.metadata.get("course", {}).get("given", []):
        keep(given, "the lesson's givens", 1)
    return found


def passages_in(copy, passages: dict[str, str]) -> list[str]:
    """The passages (`teacher_passages`) that a copy of a lesson holds anywhere: in a cell's source,
    outputs or metadata, or the notebook's metadata. `copy` is a notebook or its text."""
    from course_utils.course.checking.claims import normal

    if isinstance(copy, str):
        copy = json.loads(copy)
    text = normal("\n".join(_strings(copy)))
    return [f"{where}: {passage[:100]!r}" for passage, where in passages.items() if passage in text]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
