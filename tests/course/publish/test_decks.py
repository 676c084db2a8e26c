"""Every lecture deck, presented as a teacher would: a projector and a clicker.

Each built deck opens in headless Chromium at 1280 × 720 and at 1920 × 1080 and is stepped with
the right arrow alone, as a clicker steps it. At every step the real bounding boxes of what the
current slide shows (elements and lines of text, after reveal.js has scaled the slide) are
measured against the window, and every element that would scroll or cut its content is found.
A slide fails when something visible ends outside the window, needs scrolling or is cut at the
right; the deck fails when a slide is never reached, a slide has no speaker notes, or a request
leaves the build folder (requests are recorded, and the outside ones refused). Lesson 03's
slides are saved as screenshots under test-artifacts/decks/, every fragment shown.

The build is the session's one build (`built_course` in tests/conftest.py), shared with the
render test. The walks, and a load of every page, happen in `from_built_course`: tests/conftest.py
runs it in the background as soon as the course is built, beside the other tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from course_utils.course.lesson_parts import lessons

ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "test-artifacts" / "decks"
SIZES = [(1280, 720), (1920, 1080)]
SCREENSHOT_DECK = "03_the_2x4_example"
MIN_NOTES = 40  # characters of speaker notes a slide must carry
MIN_SHARE = 0.6  # of the free width or height a figure must take
MIN_TEXT_PX = 16  # a figure's smallest text on a 1280 x 720 screen
MAX_STEPS = 600
# Speaker notes name another slide by its number and title, "slide 18 (*Four shapes*)" or "(slide 18, *Four
# shapes*)", never by a distance ("two slides back" pointed at a table seven slides back).
SLIDE_REFERENCE = re.compile(r"\bslides? (\d+)(?: \(|, )\*([^*]+)\*")
ANY_SLIDE_NUMBER = re.compile(r"\bslides? \d+")
RELATIVE = re.compile(r"\b(?:next|previous|following|preceding|last) slides?\b|\bslides? (?:back|ago|before|earlier|"
                      r"later|above|below)\b|\b(?:one|two|three|four|five|six|seven|a few) slides\b|\(next\)|\b(?:table|"
                      r"figure|picture|list|cell) (?:above|below)\b|\bnext cell\b", re.I)

# What the current slide shows, measured in the window. Hidden things (unshown fragments, the
# speaker notes) are left out; lines of text are measured themselves, since text can run out of
# a box that stays inside the window.
MEASURE = """() => {
  const slide = Reveal.getCurrentSlide();
  const W = window.innerWidth, H = window.innerHeight, problems = [];
  const shown = el => {
    for (let e = el; e && e !== slide.parentElement; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (e.tagName === 'ASIDE' || s.display === 'none' || s.visibility === 'hidden') return false;
    }
    return true;
  };
  const outside = r => r.width > 0 && r.height > 0 &&
    (r.right > W + 1 || r.bottom > H + 1 || r.left < -1 || r.top < -1);
  const box = r => `[${Math.round(r.left)}, ${Math.round(r.top)}, ${Math.round(r.right)}, ${Math.round(r.bottom)}]`;
  const name = el => el.tagName.toLowerCase() +
    (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\\s+/)[0] : '');
  for (const el of slide.querySelectorAll('*')) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    if (outside(r)) problems.push(`${name(el)} ends outside the ${W} x ${H} window at ${box(r)}`);
    if (s.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 2)
      problems.push(`${name(el)} cuts its content at the right (${el.scrollWidth} > ${el.clientWidth} px)`);
    if (s.overflowY !== 'visible' && el.scrollHeight > el.clientHeight + 2)
      problems.push(`${name(el)} scrolls its content (${el.scrollHeight} > ${el.clientHeight} px)`);
    if (el.tagName === 'DETAILS') problems.push('a <details> block (a solution?) shows on the slide');
  }
  const texts = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let t = texts.nextNode(); t; t = texts.nextNode()) {
    if (!t.textContent.trim() || !shown(t.parentElement)) continue;
    const range = document.createRange();
    range.selectNodeContents(t);
    const out = Array.from(range.getClientRects()).find(outside);
    if (out) problems.push(`text "${t.textContent.trim().slice(0, 40)}" ends outside the window at ${box(out)}`);
  }
  // A word split across two lines: two letters, digits or underscores with no space between them, the
  // second starting a new line (a break after '-', '/' or '.' is where text may break).
  const splits = [], letter = /[\\p{L}\\p{N}_]/u, range = document.createRange();
  const words = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let t = words.nextNode(); t; t = words.nextNode()) {
    if (!t.textContent.trim() || !shown(t.parentElement)) continue;
    const s = t.textContent;
    let before = null;
    for (let k = 0; k < s.length; k++) {
      if (/\\s/.test(s[k])) { before = null; continue; }
      range.setStart(t, k);
      range.setEnd(t, k + 1);
      const r = range.getBoundingClientRect();
      if (!r.width && !r.height) continue;
      if (before && r.top >= before.bottom - 1 && letter.test(s[k - 1]) && letter.test(s[k]))
        splits.push(s.slice(Math.max(0, k - 20), k).trimStart() + ' / ' + s.slice(k, k + 20).trimEnd());
      before = r;
    }
  }
  const page = document.scrollingElement;
  if (page.scrollHeight > H + 1 || page.scrollWidth > W + 1) problems.push('the page itself scrolls');
  const scale = slide.getBoundingClientRect().width / Reveal.getConfig().width;
  const everyImage = Array.from(document.querySelectorAll('.jp-OutputArea-output img'));
  const images = Array.from(slide.querySelectorAll('.jp-OutputArea-output img')).filter(shown);
  const rest = slide.scrollHeight - images.reduce((sum, img) => sum + img.offsetHeight, 0);
  const figures = images.map(img => {
    const r = img.getBoundingClientRect();
    return {index: everyImage.indexOf(img), width: r.width, height: r.height, natural: img.naturalWidth,
            freeWidth: img.parentElement.clientWidth * scale,
            freeHeight: (Reveal.getConfig().height - rest) * scale};
  });
  const notes = Array.from(slide.querySelectorAll('aside.notes')).map(n => n.textContent).join(' ');
  const title = (slide.querySelector('h1, h2, h3') || {textContent: ''}).textContent;
  return {at: Reveal.getIndices(), problems: [...new Set(problems)].slice(0, 10), figures, splits,
          notes: notes.replace(/\\s+/g, ' ').trim().length, title: title.replace('¶', '').trim(),
          allShown: !Reveal.availableFragments().next, last: Reveal.isLastSlide()};
}"""


@dataclass
class Figure:
    """A figure as a slide shows it, in the window's pixels."""

    width: float
    height: float
    free_width: float  # the width of its cell
    free_height: float  # the slide's height less everything else on it
    smallest_text: float | None  # its smallest text's height as shown (None: the PNG does not say)

    def problems(self) -> list[str]:
        found = []
        if self.width < MIN_SHARE * self.free_width and self.height < MIN_SHARE * self.free_height:
            found.append(f"a figure takes {self.width:.0f} x {self.height:.0f} px of a free "
                         f"{self.free_width:.0f} x {self.free_height:.0f} px (under {MIN_SHARE:.0%} both ways)")
        if self.smallest_text is None:
            found.append("a figure whose PNG does not say its smallest text (drawn outside the course's figures?)")
        elif self.smallest_text < MIN_TEXT_PX:
            found.append(f"a figure's smallest text shows {self.smallest_text:.1f} px high (< {MIN_TEXT_PX} px)")
        return found


@dataclass
class Slide:
    number: int  # 1-based, in the deck's order
    title: str
    notes: int  # characters of speaker notes
    problems: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    splits: list[str] = field(default_factory=list)  # words split across two lines: "Va / lid"


@dataclass
class Walk:
    deck: str
    size: tuple[int, int]
    total: int
    slides: dict[int, Slide]
    outside: list[str]  # requests that left the build folder
    requests: int

    def unreached(self) -> list[int]:
        return [n for n in range(1, self.total + 1) if n not in self.slides]

    def failing(self) -> dict[int, list[str]]:
        return {n: s.problems for n, s in self.slides.items() if s.problems}

    def split_words(self) -> dict[int, list[str]]:
        return {n: s.splits for n, s in self.slides.items() if s.splits}

    def unreadable_figures(self) -> dict[int, list[str]]:
        return {n: problems for n, s in self.slides.items()
                if (problems := [p for f in s.figures for p in f.problems()])}


def record_requests(page, folder: Path) -> tuple[list[str], list[str]]:
    """Records every request of `page`; those outside `folder` are refused (and recorded)."""
    seen, outside = [], []

    def route(request_route):
        url = request_route.request.url
        seen.append(url)
        if url.startswith(folder.resolve().as_uri() + "/"):
            return request_route.continue_()
        outside.append(url)
        return request_route.abort()

    page.route("**/*", route)
    return seen, outside


def walk(browser, deck: Path, size: tuple[int, int], shots: Path | None = None) -> Walk:
    """Presses the right arrow from the first slide to the last, measuring every step."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    seen, outside = record_requests(page, deck.parent)
    page.goto(deck.resolve().as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    page.wait_for_load_state("load")
    order = [json.dumps([i["h"], i["v"]]) for i in
             page.evaluate("() => Reveal.getSlides().map(s => Reveal.getIndices(s))")]
    pngs = [_png(src) for src in page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-OutputArea-output img')).map(i => i.src)")]
    slides: dict[int, Slide] = {}
    for _ in range(MAX_STEPS):
        page.wait_for_function("Reveal.getCurrentSlide().dataset.fitted === '1'")
        state = page.evaluate(MEASURE)
        number = order.index(json.dumps([state["at"]["h"], state["at"]["v"]])) + 1
        slide = slides.setdefault(number, Slide(number, state["title"], state["notes"]))
        slide.problems += [p for p in state["problems"] if p not in slide.problems]
        slide.splits += [w for w in state["splits"] if w not in slide.splits]
        if state["allShown"]:
            slide.figures = [_figure(f, pngs[f["index"]]) for f in state["figures"]]
        if shots is not None and state["allShown"]:
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=shots / f"{deck.name.split('.')[0]}_{size[0]}x{size[1]}_{number:02d}.png")
        if state["last"] and state["allShown"]:
            break
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(40)
    page.close()
    return Walk(deck.name, size, len(order), slides, outside, len(seen))


def _png(src: str) -> bytes | None:
    import base64

    return base64.b64decode(src.split(",", 1)[1]) if src.startswith("data:image/png;base64,") else None


def _figure(measured: dict, png: bytes | None) -> Figure:
    """A measured figure, its smallest text scaled from the PNG's own pixels to the window's."""
    from course_utils.viz.figures import smallest_text_px

    text = smallest_text_px(png) if png else None
    shown = None if text is None or not measured["natural"] else text * measured["width"] / measured["natural"]
    return Figure(measured["width"], measured["height"], measured["freeWidth"], measured["freeHeight"], shown)


def from_built_course(built_course, browser) -> dict:
    """Every deck walked at both sizes, and every page loaded, recording the requests that leave the
    build folder. Run once, in the background (tests/conftest.py), with a Chromium of its own.

    Returns:
        {"walks": {(deck, size): Walk}, "pages": {page file name: [requests outside]}}.
    """
    out, index = built_course
    names = [p.stem for p in lessons(ROOT / "notebooks")]
    result = {}
    for name in names:
        for size in SIZES:
            shots = SHOTS if name == SCREENSHOT_DECK and size == SIZES[0] else None
            result[name, size] = walk(browser, out / f"{name}.slides.html", size, shots)
    lines = [f"{'deck':28} {'slides':>6} " + " ".join(f"{f'fit {w}x{h}':>14}" for w, h in SIZES)]
    for name in names:
        fits = [result[name, s].total - len(result[name, s].failing()) for s in SIZES]
        lines.append(f"{name:28} {result[name, SIZES[0]].total:>6} " + " ".join(f"{f:>14}" for f in fits))
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "summary.txt").write_text("\n".join(lines) + "\n")
    pages = {}
    for page_file in [index, *sorted(out.glob("[0-9][0-9]_*[a-z].html"))]:
        page = browser.new_page()
        _, pages[page_file.name] = record_requests(page, out)
        page.goto(page_file.resolve().as_uri())
        page.wait_for_load_state("load")
        page.close()
    return {"walks": result, "pages": pages, "summary": lines}


@pytest.fixture(scope="module")
def walks(from_built_course):
    print("\n".join(from_built_course["summary"]))
    return from_built_course["walks"]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_slide_fits_the_screen_with_every_fragment_shown(walks, size):
    failing = {w.deck: w.failing() for (_, s), w in walks.items() if s == size and w.failing()}
    assert failing == {}, json.dumps(failing, indent=1)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_no_word_is_split_across_two_lines(walks, size):
    """Text, code and outputs wrap at spaces (or after '-', '/', '.'): a line never ends inside a word, as
    "Va / lid 2-D shapes" or "90.5 G / iB" did when outputs could break anywhere."""
    split = {w.deck: w.split_words() for (_, s), w in walks.items() if s == size and w.split_words()}
    assert split == {}, json.dumps(split, indent=1)


def test_every_figure_is_sized_for_its_slide_and_reads_from_the_back_row(walks):
    """At 1280 x 720: each figure fills at least 60 % of its slide's free width or height, and its
    smallest text (the figure's own smallest font, scaled by the size the slide shows it at) is 16 px or more."""
    unreadable = {w.deck: w.unreadable_figures() for (_, size), w in walks.items()
                  if size == SIZES[0] and w.unreadable_figures()}
    assert unreadable == {}, json.dumps(unreadable, indent=1)
    assert sum(len(s.figures) for (_, size), w in walks.items() if size == SIZES[0] for s in w.slides.values()) >= 30


def test_the_outline_the_guide_cites_is_the_decks(walks):
    """`deck_outline` (the slide numbers and titles docs/TEACHING.md names) matches each built deck."""
    import nbformat

    from course_utils.course.publish.deck import deck_outline

    for name in lessons(ROOT / "notebooks"):
        outline = deck_outline(nbformat.read(name, as_version=4))
        walked = walks[name.stem, SIZES[0]]
        assert len(outline) == walked.total, name.stem
        titled = {n: s.title for n, s in walked.slides.items() if s.title}
        assert {n: outline[n - 1] for n in titled} == titled, name.stem


def notes_by_slide(notebook) -> list[tuple[int, str]]:
    """(slide number, source) of every speaker-notes cell of a lesson, in deck order."""
    from course_utils.course.publish.deck import slide_type

    notes, number = [], 0
    for i, cell in enumerate(notebook.cells):
        number += i == 0 or slide_type(cell) in ("slide", "subslide")
        if slide_type(cell) == "notes":
            notes.append((number, cell.source))
    return notes


def test_notes_name_the_slides_they_send_you_to_by_number_and_title(walks):
    """A note that sends the speaker to another slide names it as the deck's counter shows it, with its title:
    the number must be a slide of the built deck and the title that slide's (`deck_outline`, which the outline
    test holds to the built deck). "Next slide", "two slides back", "the table above" are refused: they go
    wrong silently when a slide is added, as 03's "two slides back" did for a table seven slides back."""
    import nbformat

    from course_utils.course.publish.deck import deck_outline

    problems, named = {}, 0
    for path in lessons(ROOT / "notebooks"):
        notebook = nbformat.read(path, as_version=4)
        outline, walked = deck_outline(notebook), walks[path.stem, SIZES[0]]
        found = []
        for at, source in notes_by_slide(notebook):
            text = " ".join(source.split())
            found += [f"slide {at} says {phrase!r}: name the slide by number and title" for phrase in RELATIVE.findall(text)]
            references = SLIDE_REFERENCE.findall(text)
            if len(references) < len(ANY_SLIDE_NUMBER.findall(text)):
                found.append(f"slide {at} names a slide by number without its title: {text[:120]!r}")
            for number, cited in references:
                named += 1
                number, cited = int(number), cited.replace("`", "")
                if not 1 <= number <= walked.total:
                    found.append(f"slide {at} names slide {number}; the built deck has {walked.total}")
                elif not outline[number - 1].startswith(cited):
                    found.append(f"slide {at} names slide {number} {cited!r}; it is {outline[number - 1]!r}")
        if found:
            problems[path.stem] = found
    assert problems == {}, json.dumps(problems, indent=1)
    assert named >= 10  # the notes do send the speaker to other slides, by number


def test_the_right_arrow_reaches_every_slide(walks):
    assert {w.deck: w.unreached() for w in walks.values() if w.unreached()} == {}
    assert all(w.total >= 8 for w in walks.values())


def test_every_slide_has_speaker_notes(walks):
    bare = {w.deck: [(n, s.title) for n, s in w.slides.items() if s.notes < MIN_NOTES]
            for (_, size), w in walks.items() if size == SIZES[0]}
    assert {deck: slides for deck, slides in bare.items() if slides} == {}


def test_no_request_leaves_the_build_folder(walks, from_built_course, built_course):
    out, index = built_course
    assert {w.deck: w.outside for w in walks.values() if w.outside} == {}
    assert all(w.requests >= 3 for w in walks.values())  # reveal.js, its notes plugin, the theme
    pages = from_built_course["pages"]
    assert {index.name, *(f"{p.stem}.html" for p in lessons(ROOT / "notebooks"))} <= set(pages)
    assert {name: outside for name, outside in pages.items() if outside} == {}


def test_links_between_lessons_point_at_built_files(built_course):
    out, _ = built_course
    for built in sorted(out.glob("[0-9][0-9]_*.html")):
        hrefs = re.findall(r'href="([^"#:]+)"', built.read_text(encoding="utf-8"))
        assert [h for h in hrefs if h.endswith(".ipynb")] == [], built.name
        assert [h for h in hrefs if not (out / h).exists()] == [], built.name
    deck = (out / "02_axis_roles.slides.html").read_text(encoding="utf-8")
    assert 'href="03_the_2x4_example.slides.html"' in deck  # a deck's next lesson is the next deck


def test_a_clickers_next_keys_step_forward(built_course, browser):
    out, _ = built_course
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto((out / f"{SCREENSHOT_DECK}.slides.html").resolve().as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    assert page.evaluate("Reveal.getConfig().navigationMode") == "linear"
    steps = []
    for key in ("PageDown", "n", "Space", "ArrowRight", "PageDown"):
        before = page.evaluate("[Reveal.getProgress(), Reveal.getIndices()]")
        page.keyboard.press(key)
        after = page.evaluate("[Reveal.getProgress(), Reveal.getIndices()]")
        steps.append((key, before[1] != after[1] and after[0] >= before[0]))
    page.close()
    assert all(moved for _, moved in steps), steps


def test_the_speaker_view_opens_offline_with_the_notes(built_course, browser):
    out, _ = built_course
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    outside = []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        out.resolve().as_uri() + "/") or route.request.url.startswith(("about:", "data:"))
        else (outside.append(route.request.url), route.abort())[1])
    page = context.new_page()
    page.goto((out / f"{SCREENSHOT_DECK}.slides.html").resolve().as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady() && Reveal.hasPlugin('notes')")
    with context.expect_page() as opened:
        page.keyboard.press("s")
    speaker = opened.value
    speaker.wait_for_selector(".speaker-controls-notes .value", state="attached")
    speaker.wait_for_function(
        "document.querySelector('.speaker-controls-notes .value').textContent.includes('Ask')")
    notes = speaker.inner_text(".speaker-controls-notes .value")
    assert "Say:" in notes and "Answer:" in notes
    SHOTS.mkdir(parents=True, exist_ok=True)
    speaker.screenshot(path=SHOTS / "speaker_view_03.png")
    context.close()
    assert outside == []


def test_lesson_03_screenshots_show_every_slide(walks):
    deck = walks[SCREENSHOT_DECK, SIZES[0]]
    saved = sorted(SHOTS.glob(f"{SCREENSHOT_DECK}_{SIZES[0][0]}x{SIZES[0][1]}_*.png"))
    assert len(saved) >= deck.total
    print(f"lesson 03: {deck.total} slides, screenshots in {SHOTS}")
