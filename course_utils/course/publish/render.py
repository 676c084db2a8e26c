"""Builds the course for reading and for lecturing: `python -m course_utils.course render`.

Runs every lesson once, top to bottom, then writes from the same executed notebook a static
HTML page (the rendered course) and a reveal.js deck for a projector and a clicker, side by
side in one folder with an index in series order. Nothing they load comes from the network:
reveal.js, its notes plugin, the theme and its fonts are copied beside them.

The deck reads the lesson's own slide metadata (as RISE does) and a few cell tags:
`deck-hide-code` shows a cell's output without its code (the code that only draws a figure),
`deck-hide-output` shows the code without its output, and a cell's `deck_summary` metadata
(markdown) stands in for its output on the deck: a long table summarised on the slide.
Speaker notes are the cells of slide type "notes"; a `<details>` block in them, collapsed in
the notebook, is open in the speaker view.

    python -m course_utils.course render --out _build            # pages and decks
    python -m course_utils.course render --out _build --slides   # decks only
    python -m course_utils.course render --slides --lesson 10    # lesson 10's deck only (and pages
                                                                 # without --slides); the index is kept
"""

from __future__ import annotations

import argparse
import copy
import html
import importlib.util
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat

from course_utils.course.checking.jupyter_kernels import stopped_like_ctrl_c
from course_utils.course.checking.lesson_runs import CELL_TIMEOUT, Failed, IncompleteBuild, cell_seconds

TEMPLATES = Path(__file__).parent / "templates"
REVEAL_DIR = "reveal.js"
THEME = "course"
HIDE_CODE, HIDE_OUTPUT = "deck-hide-code", "deck-hide-output"
SUMMARY = "deck_summary"
_LESSON_LINK = re.compile(r"(?<![\w/.])(\d\d_\w+)\.ipynb\b")
_FENCED = re.compile(r"^```.*?^```", re.S | re.M)


def reveal_assets() -> Path:
    """The folder holding reveal.js's `dist/` and `plugin/` (from the sphinx-revealjs wheel)."""
    spec = importlib.util.find_spec("sphinx_revealjs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The slides need reveal.js's files, which come from the sphinx-revealjs package. "
            "Run `make slides` (it installs them), or: pip install --no-deps sphinx-revealjs==3.2.1"
        )
    return Path(spec.submodule_search_locations[0]) / "_static" / "revealjs"


def copy_reveal(out: Path) -> None:
    """reveal.js's script, styles, fonts and notes plugin, plus the course theme, under `out`."""
    source, target = reveal_assets(), out / REVEAL_DIR
    shutil.copytree(source / "dist", target / "dist", dirs_exist_ok=True)
    shutil.copytree(source / "plugin" / "notes", target / "plugin" / "notes", dirs_exist_ok=True)
    shutil.copy(TEMPLATES / "course_slides" / f"{THEME}.css", target / "dist" / "theme" / f"{THEME}.css")


def lesson_title(notebook) -> str:
    """The lesson's first heading, without the leading '#'."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return cell.source.lstrip().splitlines()[0].lstrip("#").strip()
    return "Untitled lesson"


def link_lessons(notebook, suffix: str):
    """A copy whose links to `NN_name.ipynb` point at the built `NN_name<suffix>` instead."""
    linked = copy.deepcopy(notebook)
    for cell in linked.cells:
        if cell.cell_type == "markdown":
            cell.source = _LESSON_LINK.sub(rf"\1{suffix}", cell.source)
    return linked


def slide_type(cell) -> str:
    return cell.metadata.get("slideshow", {}).get("slide_type", "-")


def deck_cells(notebook):
    """A copy laid out for a clicker: sub-slides become slides, notes' `<details>` are open."""
    deck = link_lessons(notebook, ".slides.html")
    for cell in deck.cells:
        if slide_type(cell) == "subslide":
            cell.metadata.slideshow["slide_type"] = "slide"
        if slide_type(cell) == "notes" and cell.cell_type == "markdown":
            cell.source = cell.source.replace("<details>", "<details open>")
        if SUMMARY in cell.metadata:
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": cell.metadata[SUMMARY]})]
    return deck


def deck_slides(notebook) -> int:
    """How many slides the lesson's deck has (the cells that start one; the title cell always does)."""
    starts = sum(slide_type(c) in ("slide", "subslide") for c in notebook.cells[1:])
    return 1 + starts if notebook.cells else 0


def deck_outline(notebook) -> list[str]:
    """Each slide's title, in deck order (slide 1 first): its first heading, else the start of its
    first text, else the first line of the first code it shows, else "(code and output)". The teacher's
    guide and the speaker notes name slides by these numbers and titles."""
    titles: list[str | None] = []
    texts: list[str | None] = []
    codes: list[str | None] = []
    for i, cell in enumerate(notebook.cells):
        if i == 0 or slide_type(cell) in ("slide", "subslide"):
            titles.append(None)
            texts.append(None)
            codes.append(None)
        lines = [line.strip() for line in cell.source.splitlines() if line.strip()]
        if slide_type(cell) in ("notes", "skip") or not lines:
            continue
        if cell.cell_type == "code":
            if HIDE_CODE not in cell.metadata.get("tags", []):
                codes[-1] = codes[-1] or lines[0]
            continue
        prose = [line for line in _FENCED.sub("", cell.source).splitlines() if line.strip()]  # a `#` in code is no heading
        heading = next((line.lstrip("#").strip() for line in prose if re.match(r"#{1,6}\s", line)), None)
        titles[-1] = titles[-1] or heading
        texts[-1] = texts[-1] or " ".join(lines[0].split()[:6])
    return [re.sub(r"[*`]", "", title or text or code or "(code and output)")
            for title, text, code in zip(titles, texts, codes)]


def write_page(notebook, path: Path) -> None:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="course_page", extra_template_basedirs=[str(TEMPLATES)])
    body, _ = exporter.from_notebook_node(link_lessons(notebook, ".html"))
    path.write_text(body, encoding="utf-8")


def write_deck(notebook, path: Path) -> None:
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = {HIDE_CODE}
    config.TagRemovePreprocessor.remove_all_outputs_tags = {HIDE_OUTPUT}
    exporter = SlidesExporter(config=config, template_name="course_slides",
                              extra_template_basedirs=[str(TEMPLATES)], reveal_url_prefix=REVEAL_DIR,
                              reveal_theme=THEME, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(deck_cells(notebook))
    path.write_text(body, encoding="utf-8")


def write_index(entries: list[tuple], folder: Path, heading: str) -> Path:
    """An index page linking every lesson in series order; entries are (title, page, deck) or
    (title, page, deck, mark): a mark (a lesson that failed, or whose text its run contradicts)
    is shown beside the lesson."""
    def link(href, text):
        return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'

    def item(title, page, deck, mark=""):
        links = " · ".join(link(href, text) for href, text in ((page, title), (deck, "slides")) if href)
        shown = links + ("" if page else f" ({html.escape(title)})")
        return f"<li>{shown}" + (f' <strong class="mark">{html.escape(mark)}</strong>' if mark else "") + "</li>"

    items = "\n".join(item(*entry) for entry in entries)
    marked = sum(1 for entry in entries if len(entry) > 3 and entry[3])
    warning = (f'<p class="mark">{marked} lesson{"s are" if marked != 1 else " is"} marked below: fix '
               f"{'them' if marked != 1 else 'it'} before class.</p>" if marked else "")
    index = folder / "index.html"
    index.write_text(
        f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(heading)}</title>"
        "<style>body{font-family:sans-serif;max-width:46em;margin:3em auto;line-height:1.5}"
        "li{margin:.4em 0}.mark{color:#b00020}</style></head><body>"
        f"<h1>{html.escape(heading)}</h1><p>Every lesson was run top to bottom on 8 simulated CPU devices; "
        f"the outputs and figures are those of that run.</p>{warning}<ol start=\"0\">{items}</ol></body></html>",
        encoding="utf-8",
    )
    return index


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
    problems = []

    def runs():
        for run in execute_series(paths, timeout=timeout, keep_going=True):
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

    index = build_from_runs(runs(), out, pages=pages, slides=slides, index=lesson is None)
    if lesson is not None:
        index = Path(out) / f"{paths[0].stem}{'.slides' if slides else ''}.html"
    if problems:
        raise IncompleteBuild(index, problems)
    return index


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
