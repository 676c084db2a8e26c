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

from course_utils.course.publish.pdf import print_pdf
from course_utils.course.checking.lesson_runs import VERDICTS_CELL, Failed, IncompleteBuild, execute, execute_series, why_failed
from course_utils.course.lesson_parts import exercise_cell, exercise_cells, lessons, solution_for, teachers_notes

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
        run: Its solved run (`execute(path, solutions=True, extra_cells=(VERDICTS_CELL,))`), or a
            `lesson_runs.Failed` (each exercise is then "not run", with why); None runs it.
    """
    original = nbformat.read(path, as_version=4)
    run = run or execute(path, solutions=True, extra_cells=(VERDICTS_CELL,))
    failed = isinstance(run, Failed)
    verdicts = {} if failed else run.verdicts()
    entries = []
    for i in exercise_cells(original):
        exercise_id = exercise_cell(original.cells[i].source).exercise
        task = "\n\n".join(_as_markdown(c) for c in _task_cells(original, i, exercise_id))
        if failed:
            status, message = "not run", f"the lesson stopped before its checker ran: {run.why}"
            shown = f'<p class="mark">Not run: {html.escape(message)}</p>'
        else:
            status, message = verdicts.get(exercise_id, ("not run", "the checker was never called"))
            shown = _shown(run.notebook.cells[i])
        entries.append(KeyEntry(exercise_id, Path(path).stem, task, solution_for(original, i), status, message, shown))
    return entries


def _as_markdown(cell) -> str:
    if cell.cell_type == "code":  # the code an exercise starts from (04.2's buggy map)
        return f"```python\n{cell.source}\n```"
    return _DETAILS.sub("", cell.source)


def _task_cells(notebook, index: int, exercise_id: str) -> list:
    """The cells from the exercise's prompt ("**Exercise 03.2.**") down to its cell, the code it starts
    from included, then the teacher's notes that follow its worked solution (the lessons keep a note
    with an answer below the exercise, where a learner opens it on purpose), so every exercise shows
    its task first. Without a prompt within the slide, the markdown cells just above the exercise."""
    prompt = next((j for j in range(index - 1, max(index - 12, -1), -1)
                   if notebook.cells[j].cell_type == "markdown"
                   and f"**Exercise {exercise_id}.**" in notebook.cells[j].source), None)
    start = index if prompt is None else prompt
    while prompt is None and start > 0 and notebook.cells[start - 1].cell_type == "markdown":
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


def key_html(entries: list[KeyEntry], *, marks: dict[str, list[str]] | None = None, paper: str = "A4") -> str:
    """The answer key as one HTML page, for A4 or US Letter paper (`"letter"`).

    Args:
        entries: The exercises, in series order.
        marks: Per lesson (its file stem), the lines saying why its key is not to be trusted as it
            stands: it did not run, or its text says what its solved run did not compute.
        paper: The page size when printed.
    """
    from nbconvert.filters import markdown2html

    marks = marks or {}
    correct = sum(e.status == "correct" for e in entries)
    sections, lesson = [], None
    for e in entries:
        if e.lesson != lesson:
            lesson = e.lesson
            sections.append(f"<h2>{html.escape(lesson)}</h2>")
            if marks.get(lesson):
                sections.append('<div class="mark"><p><strong>Marked by the build:</strong></p><ul>'
                                + "".join(f"<li>{html.escape(line)}</li>" for line in marks[lesson]) + "</ul></div>")
        sections.append(
            f'<section class="exercise"><h3>Exercise {html.escape(e.exercise)}</h3>{markdown2html(e.task)}'
            f"<pre><code>{html.escape(e.solution)}</code></pre><p>Checker's verdict, from a real run:</p>"
            f"{e.shown}</section>")
    marked = (f'<p class="mark">{len(marks)} lesson{"s are" if len(marks) != 1 else " is"} marked below: '
              f"fix {'them' if len(marks) != 1 else 'it'} and build the key again.</p>" if marks else "")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Answer key</title>"
            f"<style>@page{{size:{paper};margin:16mm 15mm}}"
            "body{font-family:sans-serif;max-width:50em;margin:2em auto;line-height:1.4}"
            "pre{background:#f6f8fa;padding:.6em;white-space:pre-wrap}section{break-inside:avoid}"
            ".mark{color:#b00020}"
            "h2{break-before:page}h2:first-of-type{break-before:auto}</style></head><body>"
            "<h1>Answer key: device meshes with Keras 3 on JAX</h1>"
            f"<p>For the teacher. Every lesson was run with its worked solutions filled in; "
            f"{correct} of {len(entries)} exercises were checked correct.</p>{marked}"
            + "".join(sections) + "</body></html>")


PAPERS = {"answer_key.pdf": "A4", "answer_key-letter.pdf": "letter"}


def build_answer_key(folder: str | os.PathLike, out: str | os.PathLike, *, pdf: bool = True,
                     only: tuple[str, ...] = (), solved_run=None, timeout: int = 600) -> list[KeyEntry]:
    """Writes `answer_key.html` (and, printed, `answer_key.pdf` in A4 and `answer_key-letter.pdf`) into `out`.

    One lesson never stops the key: a lesson that fails keeps its exercises, tasks and solutions,
    marked "not run" with why; one whose text says what its solved run did not compute is marked
    with each such passage.

    Args:
        folder: The lessons' folder.
        out: The output folder.
        pdf: Also print the page to PDF with headless Chromium.
        only: Lesson numbers to include (e.g. `("01", "02")`); empty means all.
        solved_run: A function giving a lesson's solved run (see `key_entries`) from its path,
            when the lessons already ran; by default they run here, two at a time.
        timeout: Seconds a lesson's cell may run, when they run here.

    Returns:
        The key's entries, in series order.

    Raises:
        IncompleteBuild: Once the key is written, when a lesson was marked; it names each.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [path for path in lessons(folder) if not only or path.stem[:2] in only]
    runs = (_given(solved_run, path, timeout) for path in paths) if solved_run else execute_series(
        paths, solutions=True, extra_cells=(VERDICTS_CELL,), timeout=timeout, keep_going=True)
    entries, marks = [], {}
    try:
        for path in paths:
            run = next(runs)
            if isinstance(run, Failed):
                marks[path.stem] = [f"It did not run to its end with its solutions filled in: {run.why}"]
            elif run.false_claims:
                marks[path.stem] = [f"Its text says what its solved run did not compute: {v}" for v in run.false_claims]
            entries += key_entries(path, run)
    finally:
        runs.close()  # the lessons not yet started never start
    page = out / "answer_key.html"
    page.write_text(key_html(entries, marks=marks), encoding="utf-8")
    for name, paper in PAPERS.items() if pdf else ():
        printed = out / f".{name}.html"
        printed.write_text(key_html(entries, marks=marks, paper=paper), encoding="utf-8")
        try:
            print_pdf(printed, out / name)
        finally:
            printed.unlink()
    if marks:
        raise IncompleteBuild(page, [f"{stem}: {line}" for stem, lines in marks.items() for line in lines])
    return entries


def _given(solved_run, path: Path, timeout: int):
    try:
        return solved_run(path)
    except Exception as error:  # a lesson that no longer runs: marked, and the key goes on
        return Failed(path, why_failed(error, timeout))
