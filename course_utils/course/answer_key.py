"""The answer key: every exercise of the course, its worked solution and its checker's verdict from a real run.

The answer key runs every lesson with its worked solutions filled in, so each verdict in it is
the checker's own, not a copy.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.pdf import print_pdf
from course_utils.course.runner import VERDICTS_CELL, execute, execute_series
from course_utils.course.transforms import exercise_cell, exercise_cells, lessons, solution_for, teachers_notes

_DETAILS = re.compile(r"</?details>|<summary>.*?</summary>")


@dataclass(frozen=True)
class KeyEntry:
    """One exercise of the answer key: its task, worked solution and the checker's verdict on it."""

    exercise: str
    lesson: str
    task: str  # markdown
    solution: str
    status: str
    message: str
    shown: str  # the exercise cell's displayed output (HTML when the checker gave HTML)


def key_entries(path: str | os.PathLike, run=None) -> list[KeyEntry]:
    """Every exercise of a lesson and its checker's verdict, from a run with its solutions filled in.

    Args:
        path: The lesson.
        run: Its solved run (`execute(path, solutions=True, extra_cells=(VERDICTS_CELL,))`);
            None runs it.
    """
    original = nbformat.read(path, as_version=4)
    run = run or execute(path, solutions=True, extra_cells=(VERDICTS_CELL,))
    if run.false_claims:
        raise RuntimeError(f"{Path(path).name} says what its solved run did not compute:\n"
                           + "\n".join(map(str, run.false_claims)))
    verdicts = run.verdicts()
    entries = []
    for i in exercise_cells(original):
        exercise_id = exercise_cell(original.cells[i].source).exercise
        task = "\n\n".join(_DETAILS.sub("", c.source) for c in _task_cells(original, i, exercise_id))
        status, message = verdicts.get(exercise_id, ("not run", "the checker was never called"))
        entries.append(KeyEntry(exercise_id, Path(path).stem, task, solution_for(original, i),
                                status, message, _shown(run.notebook.cells[i])))
    return entries


def _task_cells(notebook, index: int, exercise_id: str) -> list:
    """The markdown cells from the exercise's prompt ("**Exercise 03.2.**") down to its cell, then the
    teacher's notes that follow its worked solution (the lessons keep a note with an answer below the
    exercise, where a learner opens it on purpose), so every exercise shows its task first."""
    start = index
    while start > 0 and notebook.cells[start - 1].cell_type == "markdown":
        start -= 1
        if f"Exercise {exercise_id}" in notebook.cells[start].source:
            break
    after = []
    for cell in notebook.cells[index + 2:]:  # after the exercise and its solution
        if not teachers_notes(cell):
            break
        after.append(cell)
    return notebook.cells[start:index] + after


def _shown(cell) -> str:
    for output in cell.outputs:
        data = output.get("data", {})
        if "text/html" in data:
            return data["text/html"]
        if "text/plain" in data:
            return f"<pre>{html.escape(data['text/plain'])}</pre>"
    return ""


def key_html(entries: list[KeyEntry]) -> str:
    """The answer key as one HTML page."""
    from nbconvert.filters import markdown2html

    correct = sum(e.status == "correct" for e in entries)
    sections, lesson = [], None
    for e in entries:
        if e.lesson != lesson:
            lesson = e.lesson
            sections.append(f"<h2>{html.escape(lesson)}</h2>")
        sections.append(
            f'<section class="exercise"><h3>Exercise {html.escape(e.exercise)}</h3>{markdown2html(e.task)}'
            f"<pre><code>{html.escape(e.solution)}</code></pre><p>Checker's verdict, from a real run:</p>"
            f"{e.shown}</section>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Answer key</title>"
            "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto;line-height:1.4}"
            "pre{background:#f6f8fa;padding:.6em;white-space:pre-wrap}section{break-inside:avoid}"
            "h2{break-before:page}h2:first-of-type{break-before:auto}</style></head><body>"
            "<h1>Answer key: device meshes with Keras 3 on JAX</h1>"
            f"<p>For the teacher. Every lesson was run with its worked solutions filled in; "
            f"{correct} of {len(entries)} exercises were checked correct.</p>"
            + "".join(sections) + "</body></html>")


def build_answer_key(folder: str | os.PathLike, out: str | os.PathLike, *, pdf: bool = True,
                     only: tuple[str, ...] = (), solved_run=None, timeout: int = 600) -> list[KeyEntry]:
    """Writes `answer_key.html` (and `answer_key.pdf`) into `out`.

    Args:
        folder: The lessons' folder.
        out: The output folder.
        pdf: Also print the page to PDF with headless Chromium.
        only: Lesson numbers to include (e.g. `("01", "02")`); empty means all.
        solved_run: A function giving a lesson's solved run (see `key_entries`) from its path,
            when the lessons already ran; by default they run here, two at a time.
        timeout: Seconds a lesson's cell may run, when they run here.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [path for path in lessons(folder) if not only or path.stem[:2] in only]
    runs = (solved_run(path) for path in paths) if solved_run else execute_series(
        paths, solutions=True, extra_cells=(VERDICTS_CELL,), timeout=timeout)
    entries = []
    try:
        for path in paths:
            try:
                entries += key_entries(path, next(runs))
            except Exception as error:  # a lesson that no longer runs: name it, keep the cause
                raise RuntimeError(f"{path.name} stopped with {type(error).__name__} while its solutions ran; "
                                   f"fix the lesson (tests/course/test_notebooks.py runs it), then build the "
                                   f"answer key again.") from error
    finally:
        runs.close()  # the lessons not yet started never start
    page = out / "answer_key.html"
    page.write_text(key_html(entries), encoding="utf-8")
    if pdf:
        print_pdf(page, out / "answer_key.pdf")
    return entries
