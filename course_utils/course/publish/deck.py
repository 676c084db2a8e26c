"""A lesson's reveal.js deck, for a projector and a clicker (`render --slides` writes it).

The deck reads the lesson's own slide metadata (as RISE does) and a few cell tags:
`deck-hide-code` shows a cell's output without its code (the code that only draws a figure),
`deck-hide-output` shows the code without its output, and a cell's `deck_summary` metadata
(markdown) stands in for its output on the deck: a long table summarised on the slide.
Speaker notes are the cells of slide type "notes"; a `<details>` block in them, collapsed in
the notebook, is open in the speaker view. Nothing the deck loads comes from the network:
reveal.js, its notes plugin, the theme and its fonts are copied beside it (`copy_reveal`).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import nbformat

from course_utils.course.publish.pages import TEMPLATES, link_lessons

REVEAL_DIR = "reveal.js"
THEME = "course"
HIDE_CODE, HIDE_OUTPUT = "deck-hide-code", "deck-hide-output"
SUMMARY = "deck_summary"
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
