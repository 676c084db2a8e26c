"""Student and teacher builds from the same lessons: `python -m course_utils.course.builds`.

    python -m course_utils.course.builds student      # _build/student: lessons without solutions
    python -m course_utils.course.builds answer-key   # _build/answer-key: every exercise, solved and checked
    python -m course_utils.course.builds handout      # _build/handout: the one-page handout
    python -m course_utils.course.builds nbgrader     # _build/nbgrader: an nbgrader course directory

The answer key runs every lesson with its worked solutions filled in, so each
verdict in it is the checker's own, not a copy.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.runner import VERDICTS_CELL, execute, exercise_cells, lessons, solution_for

_TEACHER_ONLY = re.compile(r"\s*<details>\s*<summary>\s*(Solution|Teacher's notes)\s*</summary>")
_DETAILS = re.compile(r"</?details>|<summary>.*?</summary>")


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


def student_notebook(notebook):
    """A copy of a lesson without solutions: every worked solution and teacher's note removed."""
    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for i in exercise_cells(copy):
        solution_for(copy, i)  # raises when the cell after an exercise is not its solution
    copy.cells = [cell for cell in copy.cells if not teacher_only(cell)]
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
    """The markdown cells from the exercise's prompt ("**Exercise 03.2.**") down to its cell."""
    start = index
    while start > 0 and notebook.cells[start - 1].cell_type == "markdown":
        start -= 1
        if f"Exercise {exercise_id}" in notebook.cells[start].source:
            break
    return notebook.cells[start:index]


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
                     only: tuple[str, ...] = (), solved_run=None) -> list[KeyEntry]:
    """Writes `answer_key.html` (and `answer_key.pdf`) into `out`.

    Args:
        folder: The lessons' folder.
        out: The output folder.
        pdf: Also print the page to PDF with headless Chromium.
        only: Lesson numbers to include (e.g. `("01", "02")`); empty means all.
        solved_run: A function giving a lesson's solved run (see `key_entries`) from its path,
            when the lessons already ran; by default each runs here.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for path in lessons(folder):
        if only and path.stem[:2] not in only:
            continue
        try:
            entries += key_entries(path, solved_run(path) if solved_run else None)
        except Exception as error:  # a lesson that no longer runs: name it, keep the cause
            raise RuntimeError(f"{path.name} stopped with {type(error).__name__} while its solutions ran; "
                               f"fix the lesson (tests/course/test_notebooks.py runs it), then build the "
                               f"answer key again.") from error
    page = out / "answer_key.html"
    page.write_text(key_html(entries), encoding="utf-8")
    if pdf:
        print_pdf(page, out / "answer_key.pdf")
    return entries


def chromium() -> str:
    """The headless browser that prints PDFs."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("Printing to PDF needs Chromium. Install it with: apt-get install -y chromium "
                           "(or build the HTML only with --no-pdf).")
    return found


def print_pdf(page: str | os.PathLike, pdf: str | os.PathLike, *, timeout: int = 120) -> Path:
    """Prints an HTML file to PDF with headless Chromium (paper size from the page's CSS @page)."""
    pdf = Path(pdf)
    pdf.unlink(missing_ok=True)
    command = [chromium(), "--headless", "--disable-gpu", "--no-pdf-header-footer",
               f"--print-to-pdf={pdf.resolve()}", Path(page).resolve().as_uri()]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses to start its sandbox as root
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if not pdf.exists():
        raise RuntimeError(f"Chromium wrote no PDF (exit {done.returncode}): {done.stderr[-500:]}")
    return pdf


def pdf_pages(pdf: str | os.PathLike) -> int:
    """The number of pages of a PDF (its page objects, counted)."""
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", Path(pdf).read_bytes()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", choices=("student", "answer-key", "handout", "nbgrader"))
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", help="output folder (default: _build/<build>)")
    parser.add_argument("--no-pdf", action="store_true", help="HTML only (no Chromium needed)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path("_build") / args.build)
    if args.build == "student":
        for path in build_student(args.notebooks, out):
            print(path)
    elif args.build == "answer-key":
        entries = build_answer_key(args.notebooks, out, pdf=not args.no_pdf)
        print(f"{out / 'answer_key.html'}: {len(entries)} exercises, "
              f"{sum(e.status == 'correct' for e in entries)} checked correct")
    elif args.build == "handout":
        from course_utils.course.handout import build_handout

        for path in build_handout(out, notebooks=args.notebooks, pdf=not args.no_pdf):
            print(path)
    else:
        from course_utils.course.grading import build_course

        print(build_course(args.notebooks, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
