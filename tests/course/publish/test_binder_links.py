"""Every Binder link of the course is made from one setting, and every document gives the same links."""

import re
from pathlib import Path

import pytest

from course_utils.course.publish import binder_links as links

ROOT = Path(__file__).resolve().parents[3]


def test_the_setting_is_read_from_pyproject_and_checked(tmp_path):
    assert links.binder_repository().startswith("gh/")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.course]\nbinder_repository = "github.com/me/course"\n')
    with pytest.raises(ValueError, match=r"must be in Binder's form, e.g. 'gh/OWNER/REPO'.*'github.com/me/course'"):
        links.binder_repository(pyproject)
    pyproject.write_text('[tool.course]\nbinder_repository = "gh/me/course"\n')
    assert links.binder_repository(pyproject) == "gh/me/course"
    pyproject.write_text('[tool.course]\nbinder_repository = 42\n')
    with pytest.raises(ValueError, match=r"must be in Binder's form.*Received: 42\."):
        links.binder_repository(pyproject)
    pyproject.write_text('[tool.course\nbinder_repository = "gh/me/course"\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(pyproject))} is not valid TOML \(.*line 1.*\), so the Binder"):
        links.binder_repository(pyproject)


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
    moved, left = links.rewrite(text, "gh/someone/course")
    assert links.stale_links(moved, "gh/someone/course") == [] and left == []
    assert links.links("gh/someone/course")["class"] in moved
    assert links.stale_links(moved) != []  # against the old setting, the test above would fail


# Every form the setting accepts, as a learner writes it in pyproject.toml, and as a link names it.
SETTINGS = {"gh/me/course": "gh/me/course",
            "gl/me/course": "gl/me%2Fcourse",
            "gl/group%2Fsub%2Fcourse": "gl/group%2Fsub%2Fcourse",
            "git/https://example.org/me/course.git": "git/https%3A%2F%2Fexample.org%2Fme%2Fcourse.git"}


def _document(repository: str) -> str:
    """A document with the course's links: main, the student branch, a tag, and another lesson."""
    url = lambda ref, lesson=links.FIRST_LESSON: links.binder_url(ref, repository=repository, lesson=lesson)
    return (f"Study: <{url('main')}>\nClass: <{url('student')}>\n"
            f"Tagged: {url('class-2026-12-03', 'notebooks/08_a_real_model.ipynb')}\n"
            f"Mesh: [lesson 1]({url('v1.0', 'notebooks/01_mesh_grids.ipynb')})\n")


def test_each_setting_is_written_in_binder_s_form(tmp_path):
    for setting, written in SETTINGS.items():
        (tmp_path / "pyproject.toml").write_text(f'[tool.course]\nbinder_repository = "{setting}"\n')
        assert links.binder_repository(tmp_path / "pyproject.toml") == written
        assert links.links(written)["class"] == (f"https://mybinder.org/v2/{written}/student"
                                                 f"?urlpath=lab/tree/notebooks/00_start_here.ipynb")
    for refused in ("zenodo/10.5281/zenodo.3242074", "gh/me", "gh/me/course/extra", "git/not-a-url", "gl/course"):
        (tmp_path / "pyproject.toml").write_text(f'[tool.course]\nbinder_repository = "{refused}"\n')
        with pytest.raises(ValueError, match=r"Binder's form.*name a branch.*Received: " + repr(refused)):
            links.binder_repository(tmp_path / "pyproject.toml")


@pytest.mark.parametrize("old", SETTINGS.values())
@pytest.mark.parametrize("new", SETTINGS.values())
def test_rewriting_converts_every_form_to_every_other_keeping_refs_and_lessons(old, new):
    # Writing from gl/ or git/ to gh/ once made .../v2/gh/me/course/tree/notebooks/... and dropped the student branch.
    moved, left = links.rewrite(_document(old), new)
    assert moved == _document(new) and left == []
    assert links.stale_links(moved, new) == []
    if new != old:
        assert len(links.stale_links(moved, old)) == 4 == len(links.stale_links(_document(old), new))


def test_links_an_earlier_setting_wrote_unescaped_are_read_and_reported():
    earlier = ("https://mybinder.org/v2/gl/me/course/student?urlpath=lab/tree/notebooks/00_start_here.ipynb "
               "https://mybinder.org/v2/git/https://example.org/me/course.git/main?urlpath=lab/tree/x.ipynb")
    assert links.stale_links(earlier, "gl/me%2Fcourse") == earlier.split()  # the first: not as Binder reads it
    moved, left = links.rewrite(earlier, "gh/me/course")
    assert left == [] and moved.split() == [
        "https://mybinder.org/v2/gh/me/course/student?urlpath=lab/tree/notebooks/00_start_here.ipynb",
        "https://mybinder.org/v2/gh/me/course/main?urlpath=lab/tree/x.ipynb"]


def test_a_link_no_setting_writes_is_stale_and_left_for_a_person():
    odd = ["https://mybinder.org/v2/zenodo/10.5281/zenodo.3242074", "https://mybinder.org/v2/gh/me/course",
           "https://mybinder.org/v2/gh/me/course/main?urlpath=lab/tree/a.ipynb"]
    assert links.stale_links(" ".join(odd), "gh/me/course") == odd[:2]
    moved, left = links.rewrite(" ".join(odd), "gl/me%2Fcourse")
    assert left == odd[:2] and moved.endswith("v2/gl/me%2Fcourse/main?urlpath=lab/tree/a.ipynb")


def test_write_rewrites_every_document_and_says_what_it_left(tmp_path, monkeypatch, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.course]\nbinder_repository = "gh/me/course"\n')
    (tmp_path / "README.md").write_text(_document("git/https%3A%2F%2Fexample.org%2Fme%2Fcourse.git"))
    (tmp_path / "docs" / "TEACHING.md").write_text(_document("gl/me%2Fcourse") + "https://mybinder.org/v2/gh/x\n")
    monkeypatch.setattr(links, "ROOT", tmp_path)
    assert links.main(["--write"]) == 1
    assert (tmp_path / "README.md").read_text() == _document("gh/me/course")
    teaching = (tmp_path / "docs" / "TEACHING.md").read_text()
    assert teaching == _document("gh/me/course") + "https://mybinder.org/v2/gh/x\n"
    out = capsys.readouterr().out
    assert "README.md: every Binder link names gh/me/course" in out
    assert "docs/TEACHING.md: 1 link(s) left as they were" in out
    assert "mend them by hand: https://mybinder.org/v2/gh/x" in out


def test_the_handout_gives_the_class_link():
    from course_utils.course.publish.handout import handout_html

    parts = {key: "" for key in ("mesh_png", "five_lines", "shard", "mistakes", "lessons")}
    page = handout_html({**parts, "class_link": links.links()["class"]})
    assert links.links()["class"] in page
