"""The slide decks and the rendered course build from the lessons and show in a real browser.

The decks must open offline: every request that leaves the build folder is refused, and the
slides must still render with their figures. The build is the session's one build
(`built_course` in tests/conftest.py); tests/course/publish/test_decks.py steps through every deck.
"""

from pathlib import Path

import nbformat
import pytest

from course_utils.course.publish import deck, pages, render
from course_utils.course.lesson_parts import lessons

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def built(built_course):
    return built_course


def offline_page(browser, folder: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    refused = []

    def only_local(route):
        if route.request.url.startswith(f"file://{folder}"):
            return route.continue_()
        refused.append(route.request.url)
        return route.abort()

    page.route("**/*", only_local)
    return page, refused


def test_every_lesson_has_a_page_and_a_deck(built):
    out, index = built
    names = [p.stem for p in lessons(ROOT / "notebooks")]
    for name in names:
        assert (out / f"{name}.html").stat().st_size > 10_000
        assert (out / f"{name}.slides.html").stat().st_size > 10_000
    text = index.read_text()
    assert [n for n in names if f'href="{n}.html"' in text] == names  # series order, every lesson
    assert text.index("00_start_here") < text.index("01_mesh_grids")
    assert (out / "reveal.js" / "dist" / "reveal.js").exists()


def test_a_deck_renders_offline_with_a_figure(built, browser):
    out, _ = built
    page, refused = offline_page(browser, out)
    page.goto(f"file://{out}/03_the_2x4_example.slides.html")
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    assert page.evaluate("Reveal.getTotalSlides()") > 1
    figure_slide = page.evaluate("""() => {
        const slides = Reveal.getSlides();
        return slides.findIndex(s => s.querySelector('img[src^="data:image/png"]'));
    }""")
    assert figure_slide >= 0
    page.evaluate(f"""() => {{
        const at = Reveal.getIndices(Reveal.getSlides()[{figure_slide}]);
        Reveal.slide(at.h, at.v);
        while (Reveal.nextFragment()) {{}}  // figures come in as fragments: show them all
    }}""")
    page.wait_for_timeout(500)
    assert page.locator("section.present img[src^='data:image/png']").first.is_visible()
    shots = ROOT / "test-artifacts" / "render"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=shots / "deck_03_figure.png")
    print(f"screenshots in {shots}")
    assert [u for u in refused if "reveal" in u] == []  # reveal.js itself never came from the network
    page.close()


def test_the_rendered_course_shows_outputs_and_figures(built, browser):
    out, index = built
    page, _ = offline_page(browser, out)
    page.goto(f"file://{index}")
    assert page.locator("li a").count() >= len(lessons(ROOT / "notebooks"))
    page.click("text=The 2 × 4 example")
    page.wait_for_load_state()
    assert page.url.endswith("03_the_2x4_example.html")
    assert page.locator("img[src^='data:image/png']").count() >= 3
    assert page.get_by_text("DeviceSetup: 8 simulated CPU devices").first.is_visible()
    page.screenshot(path=ROOT / "test-artifacts" / "render" / "course_03.png")
    page.close()


def test_a_deck_is_laid_out_for_a_clicker():
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 09 · A lesson", metadata={"slideshow": {"slide_type": "slide"}}),
        nbformat.v4.new_markdown_cell("More", metadata={"slideshow": {"slide_type": "subslide"}}),
        nbformat.v4.new_markdown_cell("<details><summary>Teacher's notes</summary>\n\nSay it.\n\n</details>",
                                      metadata={"slideshow": {"slide_type": "notes"}}),
        nbformat.v4.new_code_cell("table()", metadata={"deck_summary": "**3 rows**, all split"},
                                  outputs=[nbformat.v4.new_output("stream", text="a\nb\nc\n")]),
        nbformat.v4.new_markdown_cell("**Next:** [10 · More](10_more.ipynb), not [x](x/10_more.ipynb)"),
    ])
    laid_out = deck.deck_cells(notebook)
    assert [deck.slide_type(c) for c in laid_out.cells] == ["slide", "slide", "notes", "-", "-"]
    assert deck.deck_slides(notebook) == 2
    assert "<details open>" in laid_out.cells[2].source
    assert laid_out.cells[3].outputs[0]["data"] == {"text/markdown": "**3 rows**, all split"}
    assert "(10_more.slides.html)" in laid_out.cells[4].source and "(x/10_more.ipynb)" in laid_out.cells[4].source
    assert deck.slide_type(notebook.cells[1]) == "subslide"  # the lesson itself is left as it was
    assert notebook.cells[3].outputs[0]["text"] == "a\nb\nc\n"
    page = pages.link_lessons(notebook, ".html")
    assert "(10_more.html)" in page.cells[4].source


def test_the_outline_names_each_slide_as_a_speaker_cites_it():
    slide = {"slideshow": {"slide_type": "slide"}}
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 06 · A lesson"),
        nbformat.v4.new_markdown_cell("The script:\n\n```bash\n#!/bin/bash\n# not a heading\n```", metadata=slide),
        nbformat.v4.new_code_cell("draw_mesh(mesh)  # the figure\nmore()", metadata=slide),
        nbformat.v4.new_code_cell("hidden()", metadata={**slide, "tags": ["deck-hide-code"]}),
        nbformat.v4.new_markdown_cell("Notes only", metadata={"slideshow": {"slide_type": "notes"}}),
    ])
    assert deck.deck_outline(notebook) == ["06 · A lesson", "The script:", "draw_mesh(mesh)  # the figure",
                                              "(code and output)"]


def test_every_build_that_runs_lessons_takes_a_time_limit_per_cell(tmp_path, monkeypatch, capsys):
    import pytest

    from course_utils.course.publish import render
    from course_utils.course.checking import lesson_runs as runner

    asked = {}

    def series(paths, **kwargs):
        asked.update(kwargs)
        return iter(())

    monkeypatch.setattr(runner, "execute_series", series)
    render.build(tmp_path, tmp_path / "out", slides=False, timeout=45)
    assert asked == {"timeout": 45, "keep_going": True}
    with pytest.raises(SystemExit):
        render.main(["--timeout", "-3"])
    assert "a whole number of seconds of at least 1, e.g. --timeout 120. Received: '-3'" in capsys.readouterr().err


def _tiny_lesson(folder, name, cells):
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / name)
    return folder / name


def test_one_lesson_never_stops_the_build_the_others_are_written_and_it_is_marked(tmp_path, capsys):
    from course_utils.course.publish import render
    from course_utils.course.checking.lesson_runs import IncompleteBuild

    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    _tiny_lesson(lessons, "00_fine.ipynb", [new_md("# Fine"), new_code("print(2 + 2)")])
    _tiny_lesson(lessons, "01_broken.ipynb", [new_md("# Broken"), new_code("raise ValueError('a lesson that broke')")])
    _tiny_lesson(lessons, "02_wrong.ipynb", [new_md("# Wrong\n\nThe sum is 5."), new_code(
        "total = 2 + 2", metadata={"claims": [{"says": "The sum is 5", "check": "total == 5"}]})])
    _tiny_lesson(lessons, "03_after.ipynb", [new_md("# After"), new_code("print('still built')")])
    out = tmp_path / "out"
    with pytest.raises(IncompleteBuild) as incomplete:
        render.build(lessons, out, slides=False, timeout=60)
    assert incomplete.value.written == out / "index.html"
    problems = "\n".join(incomplete.value.problems)
    assert "01_broken.ipynb did not run to its end: ValueError: a lesson that broke" in problems
    assert "02_wrong.ipynb: cell 1: the lesson says 'The sum is 5', but `total == 5`" in problems
    assert sorted(p.name for p in out.glob("*.html")) == ["00_fine.html", "02_wrong.html", "03_after.html", "index.html"]
    index = (out / "index.html").read_text()
    assert "2 lessons are marked below" in index and "not built: ValueError: a lesson that broke" in index
    assert "marked: 1 passage its run did not compute" in index
    wrong = (out / "02_wrong.html").read_text()
    assert "Marked by the build: this lesson" in wrong and "The sum is 5" in wrong
    assert "Marked by the build" not in (out / "03_after.html").read_text()
    assert render.main(["--notebooks", str(lessons), "--out", str(tmp_path / "again"), "--pages",
                        "--timeout", "60"]) == 1  # the command exits non-zero, after writing the rest
    err = capsys.readouterr().err
    assert "2 lessons did not build as written; the others were" in err
    assert (tmp_path / "again" / "03_after.html").exists()


def test_one_lessons_deck_is_built_alone_and_an_unknown_number_is_refused(tmp_path, capsys):
    from course_utils.course.publish import render

    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    _tiny_lesson(lessons, "07_before.ipynb", [new_md("# Before"), new_code("print('not this one')")])
    _tiny_lesson(lessons, "08_chosen.ipynb", [new_md("# Chosen"), new_code("print('built alone')")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.html").write_text("the whole course's index")
    assert render.main(["--notebooks", str(lessons), "--out", str(out), "--slides", "--lesson", "8",
                        "--timeout", "60"]) == 0
    assert sorted(p.name for p in out.glob("*.html")) == ["08_chosen.slides.html", "index.html"]
    assert "built alone" in (out / "08_chosen.slides.html").read_text()
    assert (out / "index.html").read_text() == "the whole course's index"  # the index is left as it was
    assert f"Open {(out / '08_chosen.slides.html').resolve()}" in capsys.readouterr().out
    assert render.build(lessons, out, slides=False, lesson="08", timeout=60) == out / "08_chosen.html"
    assert not (out / "07_before.html").exists()
    with pytest.raises(SystemExit) as refused:
        render.main(["--notebooks", str(lessons), "--out", str(out), "--slides", "--lesson", "42"])
    assert refused.value.code == 2
    assert "Received: --lesson 42. There is no lesson numbered '42'" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"the lessons there are numbered 07, 08\). Give one of them, e.g. --lesson 08"):
        render.numbered_lesson(lessons, "8b")
