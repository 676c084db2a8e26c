"""A lesson's rendered page, its links to the other lessons, and the index of the course (`render` writes them).

The page is the executed notebook as static HTML (nbconvert's `course_page` template); a link to
another lesson (`NN_name.ipynb`) points at that lesson's built file instead.
"""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"
_LESSON_LINK = re.compile(r"(?<![\w/.])(\d\d_\w+)\.ipynb\b")


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


def write_page(notebook, path: Path) -> None:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="course_page", extra_template_basedirs=[str(TEMPLATES)])
    body, _ = exporter.from_notebook_node(link_lessons(notebook, ".html"))
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
