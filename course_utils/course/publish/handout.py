"""The one-page handout: the 2 x 4 mesh, the API in five lines, three classic mistakes.

`build_handout(out)` runs everything it shows: the picture is `draw_mesh` of a
real 2 x 4 mesh, the five lines are the source of `five_lines` (which the build
calls, printing the shard it produced), and each mistake's message is what
Keras or the course's checks say when the mistake is made. It writes
`handout.html` and, printed by headless Chromium, `handout.pdf` (A4) and
`handout-letter.pdf` (US Letter). While `binder_repository` is still the placeholder
`gh/OWNER/REPO`, the handout says the link is not set instead of printing one that leads nowhere,
and the build warns (`HandoutWarning`).
"""

from __future__ import annotations

import base64
import html
import inspect
import os
import textwrap
import warnings
from pathlib import Path
from string import Template

from course_utils.course.publish.pdf import print_pdf

TEMPLATE = Path(__file__).parent / "templates" / "handout" / "handout.html"
PAPERS = {"handout.pdf": "A4", "handout-letter.pdf": "letter"}
NO_LINK = "not set yet: ask your teacher for the class link"


class HandoutWarning(UserWarning):
    """The handout was built, but something on it is not what students should get (a placeholder link)."""


def class_link() -> str:
    """The class's Binder link for the handout, or `NO_LINK` with a `HandoutWarning` while it is a placeholder."""
    from course_utils.course.publish.binder_links import links, placeholder_warning

    problem = placeholder_warning()
    if problem:
        warnings.warn(f"The handout carries no Binder link: {problem}", HandoutWarning, stacklevel=2)
        return NO_LINK
    return links()["class"]


def five_lines(build_model):
    """DeviceMesh, LayoutMap and ModelParallel: the course's 2 x 4 set-up (shown on the handout)."""
    from keras import distribution  # the handout shows the body only
    mesh = distribution.DeviceMesh((2, 4), ("data", "model"), distribution.list_devices())
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")                  # split d1's columns over "model"
    strategy = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with strategy.scope(): model = build_model()                # variables are created sharded
    return model


def _body(function) -> str:
    lines = inspect.getsource(function).splitlines()
    body = [line for line in lines[2:] if "# the handout shows the body only" not in line
            and not line.strip().startswith("return")]
    return textwrap.dedent("\n".join(body))


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0]


def mistakes(mesh, build_model) -> list[dict[str, str]]:
    """The three classic mistakes, each made for real: what you write, what you get, the fix."""
    from keras import distribution

    from course_utils import check_layout_map, placement

    try:
        distribution.DeviceMesh((3, 3), ("data", "model"), distribution.list_devices())
        shape_message = "no error"
    except ValueError as error:
        shape_message = _first_line(error)
    bare = distribution.LayoutMap(mesh)
    bare["d1/kernel"] = (None, "model")
    model = build_model()
    problems = check_layout_map(bare, model)
    outside = build_model()  # outside any distribution's scope
    holders = len(placement(outside.get_layer("d1").kernel).devices)
    return [
        {"title": "A mesh shape that does not fit 8 devices",
         "wrong": 'DeviceMesh((3, 3), ("data", "model"), devices)',
         "result": shape_message,
         "fix": "The sizes multiply to the number of devices: mesh_shapes(8) lists (1, 8), (2, 4), (4, 2), (8, 1)."},
        {"title": "A LayoutMap key that is not the whole path",
         "wrong": 'layout_map["d1/kernel"] = (None, "model")',
         "result": "No error: the kernel is silently replicated. check_layout_map says: "
                   + (str(problems[0]) if problems else "no problem"),
         "fix": 'Keys must match the whole variable path (re.fullmatch): write ".*d1/kernel".'},
        {"title": "Building the model outside the distribution's scope",
         "wrong": "model = build_model()\nwith strategy.scope(): model.fit(...)",
         "result": f"d1/kernel sits whole on {holders} device; the layout map never applied.",
         "fix": "Create the model inside: with strategy.scope(): model = build_model()."},
    ]


def _mistake_html(item: dict[str, str]) -> str:
    return (f'<div class="mistake"><h3>{html.escape(item["title"])}</h3>'
            f'<pre class="wrong">{html.escape(item["wrong"])}</pre>'
            f'<p class="result">{html.escape(item["result"])}</p>'
            f'<p class="fix"><b>Fix:</b> {html.escape(item["fix"])}</p></div>')


def lessons_line(folder: str | os.PathLike) -> str:
    """The lessons' short titles in series order: "00 Start here · 01 Mesh grids · ..."."""
    import nbformat

    from course_utils.course.lesson_parts import lessons
    from course_utils.course.publish.pages import lesson_title

    titles = [lesson_title(nbformat.read(path, as_version=4)).split(":")[0].replace(" · ", " ", 1)
              for path in lessons(folder)]
    return " · ".join(titles)


def lesson_mlp():
    """Lesson 03's MLP, the one the handout's code builds: 64 inputs -> Dense(128) "d1" -> Dense(10) "d2"."""
    from course_utils.models import mlp

    return mlp(inputs=64, hidden=128, classes=10)


def handout_parts(folder: str | os.PathLike = "notebooks") -> dict[str, str]:
    """The handout's figure, code, shard, mistakes and lesson list, each made from the course itself."""
    from course_utils import make_mesh, placement, setup_devices
    from course_utils.viz import draw_mesh
    from course_utils.viz.figures import figure_png

    setup_devices(8)
    mesh = make_mesh((2, 4), ("data", "model"))
    figure = draw_mesh(mesh, title="The 2 × 4 mesh")
    figure.set_size_inches(5.2, 3.0)  # half a page wide: the lesson's own text sizes stay readable
    png = figure_png(figure, dpi=150)
    kernel = placement(five_lines(lesson_mlp).get_layer("d1").kernel)
    return {
        "mesh_png": base64.b64encode(png).decode("ascii"),
        "five_lines": html.escape(_body(five_lines)),
        "shard": html.escape(f"d1/kernel {tuple(kernel.shape)} → a {tuple(kernel.shard_shape)} shard on "
                             f"each of {len(kernel.devices)} devices"),
        "mistakes": "".join(_mistake_html(m) for m in mistakes(mesh, lesson_mlp)),
        "lessons": html.escape(lessons_line(folder)),
        "class_link": html.escape(class_link()),
    }


def handout_html(parts: dict[str, str], *, paper: str = "A4") -> str:
    """The handout page for one paper size (`"A4"` or `"letter"`)."""
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(parts, paper=paper)


def build_handout(out: str | os.PathLike, *, notebooks: str | os.PathLike = "notebooks",
                  pdf: bool = True) -> list[Path]:
    """Writes `handout.html` and, unless `pdf=False`, the A4 and Letter PDFs into `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts = handout_parts(notebooks)
    written = [out / "handout.html"]
    written[0].write_text(handout_html(parts), encoding="utf-8")
    for name, paper in PAPERS.items() if pdf else ():
        page = out / f".{name}.html"
        page.write_text(handout_html(parts, paper=paper), encoding="utf-8")
        written.append(print_pdf(page, out / name))
        page.unlink()
    return written
