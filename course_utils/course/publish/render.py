"""Builds the course for reading and for lecturing: `python -m course_utils.course render`.

Runs every lesson once, top to bottom, then writes from the same executed notebook a static
HTML page (the rendered course, `pages`) and a reveal.js deck for a projector and a clicker
(`deck`, which says which slide metadata and cell tags it reads), side by side in one folder
with an index in series order. Nothing they load comes from the network: reveal.js, its notes
plugin, the theme and its fonts are copied beside them.

    python -m course_utils.course render --out _build            # pages and decks
    python -m course_utils.course render --out _build --slides   # decks only
    python -m course_utils.course render --slides --lesson 10    # lesson 10's deck only (and pages
                                                                 # without --slides); the index is kept
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import nbformat

from course_utils.course.checking.jupyter_kernels import stopped_like_ctrl_c
from course_utils.course.checking.lesson_runs import CELL_TIMEOUT, Failed, IncompleteBuild, cell_seconds
from course_utils.course.publish.deck import copy_reveal, deck_slides, write_deck
from course_utils.course.publish.pages import lesson_title, write_index, write_page


def publish(notebook, stem: str, out: Path, *, pages: bool = True, slides: bool = True):
    """Writes the page and/or the deck of one executed lesson; returns its index entry."""
    page = f"{stem}.html" if pages else None
    deck = f"{stem}.slides.html" if slides else None
    if page:
        write_page(notebook, out / page)
    if deck:
        write_deck(notebook, out / deck)
    return lesson_title(notebook), page, deck


def numbered_lesson(folder: str | os.PathLike, number: str) -> Path:
    """The lesson of `folder` whose file name starts with `number` ("8" and "08" both name `08_*.ipynb`).

    Raises:
        ValueError: When no lesson there has that number; the message lists the numbers there are.
    """
    from course_utils.course.lesson_parts import lessons

    found = {path.name[:2]: path for path in lessons(folder)}
    key = str(number).strip()
    key = key.zfill(2) if key.isdigit() and len(key) <= 2 else key
    if key not in found:
        there = ", ".join(found) or "none"
        raise ValueError(f"Received: --lesson {number}. There is no lesson numbered {number!r} in {folder} "
                         f"(the lessons there are numbered {there}). Give one of them, e.g. --lesson "
                         f"{next(reversed(found), '10')}.")
    return found[key]


def build(folder: str | os.PathLike, out: str | os.PathLike, *, pages: bool = True,
          slides: bool = True, timeout: int = 600, lesson: str | None = None) -> Path:
    """Executes every lesson once (two at a time, `lesson_runs.execute_series`) and writes the rendered course
    and/or the slide decks; or, given `lesson`, that one lesson only.

    One lesson never stops the others: a lesson that fails is listed in the index as not built,
    with its error; a lesson whose text states what its run did not compute is written with a
    banner on its first page and slide naming each such passage, and marked in the index.

    Args:
        folder: The folder of the lessons (`NN_*.ipynb`).
        out: The folder to write; pages, decks and reveal.js go side by side in it.
        pages: Write the rendered pages (`NN_name.html`).
        slides: Write the decks (`NN_name.slides.html`).
        timeout: Seconds a lesson's cell may run.
        lesson: A lesson's number ("10"): run and write that lesson only, leaving the index and the
            other lessons already in `out` as they are.

    Returns:
        The index page written (`out/index.html`); with `lesson`, its deck (or its page with `slides=False`).

    Raises:
        ValueError: When `lesson` numbers no lesson in `folder` (before anything runs).
        IncompleteBuild: Once everything else is written, when a lesson failed or states something
            its run did not compute; it names each.
    """
    from course_utils.course.checking.lesson_runs import execute_series
    from course_utils.course.lesson_parts import lessons

    paths = [numbered_lesson(folder, lesson)] if lesson is not None else lessons(folder)
    problems: list[str] = []
    runs = _reported(execute_series(paths, timeout=timeout, keep_going=True), problems)
    index = build_from_runs(runs, out, pages=pages, slides=slides, index=lesson is None)
    if lesson is not None:
        index = Path(out) / f"{paths[0].stem}{'.slides' if slides else ''}.html"
    if problems:
        raise IncompleteBuild(index, problems)
    return index


def _reported(runs, problems: list[str]):
    """The runs as they come, each reported on one line; a failed or contradicted lesson also added to `problems`."""
    for run in runs:
        if isinstance(run, Failed):
            problems.append(str(run))
            print(f"{run.path.name}: FAILED, not built: {run.why}", flush=True)
        elif run.false_claims:
            problems.extend(f"{run.path.name}: {verdict}" for verdict in run.false_claims)
            print(f"{run.path.name}: ran in {run.seconds:.1f} s, but says what its run did not compute "
                  f"(marked)", flush=True)
        else:
            print(f"{run.path.name}: ran in {run.seconds:.1f} s", flush=True)
        yield run


def marked(run) -> tuple:
    """A run as `build_from_runs` writes it: the executed notebook, with a banner first when its text
    states what it did not compute, and the index's mark ("" when there is none)."""
    if not run.false_claims:
        return run.notebook, ""
    notebook = copy.deepcopy(run.notebook)
    lines = "\n".join(f"- cell {v.cell}: the lesson says *{v.says}*, but `{v.check}` {v.found}"
                      for v in run.false_claims)
    banner = nbformat.v4.new_markdown_cell(
        f"**Marked by the build: this lesson's text states what its run did not compute.** The rest "
        f"is as it ran; fix these passages (or what they describe) before you show it:\n\n{lines}",
        metadata={"slideshow": {"slide_type": "slide"}})
    notebook.cells.insert(0, banner)
    count = len(run.false_claims)
    return notebook, f"marked: {count} passage{'s' if count != 1 else ''} its run did not compute"


def build_from_runs(runs, out: str | os.PathLike, *, pages: bool = True, slides: bool = True,
                    index: bool = True) -> Path | None:
    """Writes the pages and/or decks of lessons that already ran (`lesson_runs.LessonRun`s, in series order;
    a `lesson_runs.Failed` is listed in the index as not built, with why).

    Returns:
        The index page written (`out/index.html`); None with `index=False` (the index is left as it was).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if slides:
        copy_reveal(out)
    entries, start = [], time.perf_counter()
    for run in runs:
        if isinstance(run, Failed):
            title = lesson_title(nbformat.read(run.path, as_version=4))
            entries.append((title, None, None, f"not built: {run.why}"))
            continue
        notebook, mark = marked(run)
        entries.append((*publish(notebook, run.path.stem, out, pages=pages, slides=slides), mark))
        deck = f": a deck of {deck_slides(notebook)} slides" if slides else ""
        print(f"{run.path.name} written{deck}" + (f" ({mark})" if mark else ""), flush=True)
    print(f"{sum(1 for e in entries if e[1] or e[2])} of {len(entries)} lessons built in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return write_index(entries, out, "Device meshes with Keras 3 on JAX") if index else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course render", description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", default="_build")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--slides", action="store_true", help="slide decks only")
    group.add_argument("--pages", action="store_true", help="rendered pages only")
    parser.add_argument("--lesson", metavar="NN", help="build this lesson only (its number, e.g. 10); "
                        "the index and the other lessons in --out are left as they are")
    parser.add_argument("--timeout", type=cell_seconds, default=CELL_TIMEOUT,
                        help=f"seconds a lesson's cell may run (default {CELL_TIMEOUT})")
    args = parser.parse_args(argv)
    if args.lesson is not None:
        try:
            numbered_lesson(args.notebooks, args.lesson)
        except ValueError as unknown:
            parser.error(str(unknown))
    os.environ.setdefault("COURSE_PLATFORM", "cpu")
    try:
        with stopped_like_ctrl_c():
            index = build(args.notebooks, args.out, pages=not args.slides, slides=not args.pages,
                          timeout=args.timeout, lesson=args.lesson)
    except KeyboardInterrupt:
        print(f"Stopped (Ctrl-C or a kill): the lessons' kernels were stopped; {args.out} holds what was "
              f"written before, without a new index. Run the same command again to build it all.", file=sys.stderr)
        return 130
    except IncompleteBuild as incomplete:
        print(incomplete, file=sys.stderr)
        print(f"Open {incomplete.written.resolve()}")
        return 1
    print(f"Open {index.resolve()}")
    return 0
