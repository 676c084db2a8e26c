"""Builds the course for reading and for lecturing: `python -m course_utils.course.render`.

Runs every lesson once, top to bottom, then writes from the same executed
notebook both a static HTML page (the rendered course, with an index in series
order) and a reveal.js slide deck whose scripts sit beside it, so the decks open
offline in a classroom.

    python -m course_utils.course.render --out _build            # both
    python -m course_utils.course.render --out _build --slides   # slides only
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from course_utils.course.runner import execute, lessons

TEMPLATES = Path(__file__).parent / "templates"
REVEAL_DIR = "reveal.js"


def reveal_assets() -> Path:
    """The folder holding reveal.js's `dist/` and `plugin/` (from the sphinx-revealjs wheel)."""
    spec = importlib.util.find_spec("sphinx_revealjs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The slides need reveal.js's files, which come from the sphinx-revealjs package. "
            "Run `make slides` (it installs them), or: pip install --no-deps sphinx-revealjs==3.2.1"
        )
    return Path(spec.submodule_search_locations[0]) / "_static" / "revealjs"


def lesson_title(notebook) -> str:
    """The lesson's first heading, without the leading '#'."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return cell.source.lstrip().splitlines()[0].lstrip("#").strip()
    return "Untitled lesson"


def write_page(notebook, path: Path) -> None:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    path.write_text(body, encoding="utf-8")


def write_deck(notebook, path: Path) -> None:
    from nbconvert import SlidesExporter

    exporter = SlidesExporter(template_name="course_slides", extra_template_basedirs=[str(TEMPLATES)],
                              reveal_url_prefix=REVEAL_DIR, reveal_theme="simple")
    body, _ = exporter.from_notebook_node(notebook)
    path.write_text(body, encoding="utf-8")


def write_index(entries: list[tuple[str, str, str | None]], folder: Path, heading: str) -> Path:
    """An index page linking every lesson in series order; entries are (file, title, slides file)."""
    items = "\n".join(
        f'<li><a href="{html.escape(page)}">{html.escape(title)}</a>'
        + (f' · <a href="{html.escape(deck)}">slides</a>' if deck else "") + "</li>"
        for page, title, deck in entries
    )
    index = folder / "index.html"
    index.write_text(
        f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(heading)}</title>"
        "<style>body{font-family:sans-serif;max-width:46em;margin:3em auto;line-height:1.5}"
        "li{margin:.4em 0}</style></head><body>"
        f"<h1>{html.escape(heading)}</h1><p>Every lesson was run top to bottom on 8 simulated CPU devices; "
        f"the outputs and figures are those of that run.</p><ol start=\"0\">{items}</ol></body></html>",
        encoding="utf-8",
    )
    return index


def build(folder: str | os.PathLike, out: str | os.PathLike, *, pages: bool = True, slides: bool = True) -> Path:
    """Executes every lesson once and writes the rendered course and/or the slide decks.

    Returns:
        The index page written (`out/index.html`).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if slides:
        shutil.copytree(reveal_assets(), out / REVEAL_DIR, dirs_exist_ok=True)
    entries = []
    for path in lessons(folder):
        run = execute(path)
        run.notebook.cells.pop()  # the memory probe the runner appends
        page = f"{path.stem}.html" if pages else None
        deck = f"{path.stem}.slides.html" if slides else None
        if page:
            write_page(run.notebook, out / page)
        if deck:
            write_deck(run.notebook, out / deck)
        entries.append((page or deck, lesson_title(run.notebook), deck if page else None))
        print(f"{path.name}: {run.seconds:.1f} s", flush=True)
    return write_index(entries, out, "Device meshes with Keras 3 on JAX")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", default="_build")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--slides", action="store_true", help="slide decks only")
    group.add_argument("--pages", action="store_true", help="rendered pages only")
    args = parser.parse_args(argv)
    os.environ.setdefault("COURSE_PLATFORM", "cpu")
    index = build(args.notebooks, args.out, pages=not args.slides, slides=not args.pages)
    print(f"Open {index.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
