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
    for node in ast.walk(ast.parse(source)):
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


def student_notebook(notebook):
    """A copy of a lesson without solutions: every worked solution and teacher's note removed,
    and the text that speaks of them as the student copy reads it (`student_text`)."""
    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in exercise_cells(copy):
        solution_for(copy, i)  # raises when the cell after an exercise is not its solution
    copy.cells = [cell for cell in copy.cells if not teacher_only(cell)]
    for cell in copy.cells:
        if cell.cell_type == "markdown":
            cell.source = student_text(cell.source)
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
