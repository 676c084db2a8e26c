"""The handout builds from the course's own code and prints on one A4 and one Letter page."""

from pathlib import Path

import pytest

from course_utils.course.publish.pdf import pdf_pages
from course_utils.course.publish.handout import build_handout, five_lines, handout_parts, mistakes
from course_utils.models import mlp

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    return out, build_handout(out, notebooks=ROOT / "notebooks")


def test_the_handout_prints_on_one_page_of_a4_and_of_letter(built):
    out, written = built
    assert [p.name for p in written] == ["handout.html", "handout.pdf", "handout-letter.pdf"]
    assert pdf_pages(out / "handout.pdf") == 1
    assert pdf_pages(out / "handout-letter.pdf") == 1


def test_the_handout_shows_the_mesh_the_five_lines_and_three_mistakes(built):
    out, _ = built
    page = (out / "handout.html").read_text()
    assert page.count("data:image/png;base64,") == 1
    for name in ("DeviceMesh((2, 4)", "LayoutMap(mesh)", "ModelParallel(", "strategy.scope()"):
        assert name in page
    assert page.count('class="mistake"') == 3
    assert "00 Start here · 01 Mesh grids" in page and "03 The 2 × 4 example" in page  # the lessons' own titles
    assert "$" not in page.replace("$env", "")  # every placeholder filled


def test_the_five_lines_really_shard_the_kernel_of_lesson_03s_mlp():
    import re

    import nbformat

    from course_utils import placement
    from course_utils.course.publish.handout import lesson_mlp

    kernel = placement(five_lines(lesson_mlp).get_layer("d1").kernel)
    assert kernel.shard_shape == (64, 128 // 4)
    assert len(kernel.devices) == 8
    lesson = nbformat.read(Path(__file__).resolve().parents[3] / "notebooks" / "03_the_2x4_example.ipynb", as_version=4)
    build = next(c.source for c in lesson.cells if "def build_mlp" in c.source)
    assert re.search(r"Input\(shape=\(64,\)\).*Dense\(128,.*Dense\(10,", build, re.S)  # the same model


def test_the_mistakes_carry_the_real_messages():
    from course_utils import make_mesh

    found = mistakes(make_mesh((2, 4), ("data", "model")), mlp)
    assert "(3, 3)" in found[0]["result"]  # Keras's own ValueError repeats the shape
    assert "d1/kernel" in found[1]["result"] and "whole path" in found[1]["result"]
    assert "on 1 device" in found[2]["result"]


def test_a_placeholder_binder_link_is_never_printed_and_the_build_warns(monkeypatch):
    import warnings

    from course_utils.course.publish import binder_links
    from course_utils.course.publish.handout import NO_LINK, HandoutWarning, class_link

    monkeypatch.setattr(binder_links, "binder_repository", lambda pyproject=None: binder_links.PLACEHOLDER)
    with pytest.warns(HandoutWarning, match=r"no Binder link: binder_repository .* is still the placeholder "
                                            r"'gh/OWNER/REPO'.* Set it to your repository"):
        assert class_link() == NO_LINK
    monkeypatch.setattr(binder_links, "binder_repository", lambda pyproject=None: "gh/me/course")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert class_link() == "https://mybinder.org/v2/gh/me/course/student?urlpath=lab/tree/notebooks/00_start_here.ipynb"


def test_the_built_handout_shows_the_link_only_once_it_is_set(built):
    from course_utils.course.publish.binder_links import PLACEHOLDER, binder_repository
    from course_utils.course.publish.handout import NO_LINK

    page = (built[0] / "handout.html").read_text()
    assert ("mybinder.org/v2/gh/OWNER/REPO" not in page and NO_LINK in page) if binder_repository() == PLACEHOLDER \
        else f"mybinder.org/v2/{binder_repository()}/student" in page
