"""Every Binder link of the course is made from one setting, and every document gives the same links."""

from pathlib import Path

import pytest

from course_utils.course import links

ROOT = Path(__file__).resolve().parents[2]


def test_the_setting_is_read_from_pyproject_and_checked(tmp_path):
    assert links.binder_repository().startswith("gh/")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.course]\nbinder_repository = "github.com/me/course"\n')
    with pytest.raises(ValueError, match=r"must be in Binder's form, e.g. 'gh/OWNER/REPO'.*'github.com/me/course'"):
        links.binder_repository(pyproject)
    pyproject.write_text('[tool.course]\nbinder_repository = "gh/me/course"\n')
    assert links.binder_repository(pyproject) == "gh/me/course"


def test_the_two_links():
    repository = links.binder_repository()
    assert links.links() == {
        "self-study": f"https://mybinder.org/v2/{repository}/main?urlpath=lab/tree/notebooks/00_start_here.ipynb",
        "class": f"https://mybinder.org/v2/{repository}/student?urlpath=lab/tree/notebooks/00_start_here.ipynb"}


@pytest.mark.parametrize("document", links.DOCUMENTS)
def test_every_document_names_the_repository_as_set_and_gives_the_class_link(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    assert links.stale_links(text) == []
    assert links.links()["class"] in text and links.links()["self-study"] in text


def test_rewriting_moves_every_link_to_a_new_setting():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    moved = links.rewrite(text, links.binder_repository(), "gh/someone/course")
    assert links.stale_links(moved, "gh/someone/course") == []
    assert links.links("gh/someone/course")["class"] in moved
    assert links.stale_links(moved) != []  # against the old setting, the test above would fail


def test_the_handout_gives_the_class_link():
    from course_utils.course.handout import handout_html

    parts = {key: "" for key in ("mesh_png", "five_lines", "shard", "mistakes", "lessons")}
    page = handout_html({**parts, "class_link": links.links()["class"]})
    assert links.links()["class"] in page
