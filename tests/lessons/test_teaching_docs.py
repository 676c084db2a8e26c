"""The commands documented for machines without make are the Makefile's own steps.

docs/TROUBLESHOOTING.md gives PowerShell and bash blocks marked `# = make <target>`; each must
run the same commands, in the same order, as that target's recipe in the Makefile (with the
set-up steps of `.venv` when the block says it sets it up). The handout's lines come from the
same PowerShell block. The teacher's guide's 50-minute plan names real slides of the decks, covers
decks 01 and 02, fits each row's minutes at the guide's own pace, opens with the promise, shows no
slide that reads a name only a skipped slide defines, closes on a question its shown slides answer
and leaves no exercise without a slot in the lab; the lab's break is shorter than Binder's kernel
culling and says what to save. The answers to the demo questions are what the lessons compute, and
every answer of the question bank quotes a claim its lesson checks, which held in the lesson's run.
"""

import re
import shlex
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = {"$(PYTHON)": "python", "$(VENV)": ".venv", "$(BIN)": ".venv/bin"}
DROPPED = {"--quiet", "$(ROOT_FLAG)", "--port=$(PORT)", "--clear"}  # --clear: make a new .venv over an old one


def recipe(target: str) -> list[str]:
    """The command lines of a Makefile target, without echo-less checks (@) and stamp touches."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(target)}\s*:", line))
    commands = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        command = line.strip()
        if not command.startswith("@") and not command.startswith("touch "):
            commands.append(command)
    return commands


def normal(command: str) -> list[str]:
    """A command as words, with make's variables and PowerShell's paths written one way."""
    for name, value in VARIABLES.items():
        command = command.replace(name, value)
    command = command.replace("\\", "/").replace(".venv/Scripts/", ".venv/bin/")
    words = [w for w in shlex.split(command, comments=True) if w not in DROPPED]
    if words[:1] in (["py"], ["python3"]):  # the launcher: `py -3.11`, `python3`
        words = ["python"] + [w for w in words[1:] if not re.fullmatch(r"-3\.\d+", w)]
    return words


def documented_blocks() -> list[tuple[str, str, list[str]]]:
    """(language, marker line, commands) of every `# = make ...` block of TROUBLESHOOTING.md."""
    text = (ROOT / "docs" / "TROUBLESHOOTING.md").read_text()
    blocks = []
    for language, body in re.findall(r"```(powershell|bash)\n(.*?)```", text, re.S):
        lines = [line for line in body.splitlines() if line.strip()]
        if lines and lines[0].startswith("# = make "):
            blocks.append((language, lines[0], lines[1:]))
    return blocks


BLOCKS = documented_blocks()


def test_both_shells_are_documented():
    assert {(lang, marker.split()[3]) for lang, marker, _ in BLOCKS} >= {
        ("powershell", "lab"), ("bash", "lab"), ("powershell", "doctor"), ("bash", "student")}


@pytest.mark.parametrize("language,marker,commands", BLOCKS, ids=[f"{b[0]}-{b[1].split()[3]}" for b in BLOCKS])
def test_documented_commands_are_the_makefiles(language, marker, commands):
    target = marker.split()[3]
    set_up = recipe("$(MADE_WITH)") + recipe("$(BIN)/.installed")
    expected = (set_up if "sets up .venv" in marker else []) + recipe(target)
    assert [normal(c) for c in commands] == [normal(c) for c in expected]


def test_handout_commands_are_the_documented_ones():
    page = (ROOT / "course_utils" / "course" / "publish" / "templates" / "handout" / "handout.html").read_text()
    handout = [normal(line) for block in re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S)
               for line in block.splitlines() if "Scripts" in line or line.startswith("py ")]
    windows = next(c for lang, marker, c in BLOCKS if lang == "powershell" and "make lab" in marker)
    documented = [normal(c) for c in windows]
    assert handout and all(words in documented for words in handout)
    assert handout == [words for words in documented if words in handout]  # same order


def test_normal_makes_powershell_and_make_agree():
    assert normal(r'.venv\Scripts\python -m pip install -r requirements.txt -e ".[course]"') == \
        normal('$(BIN)/python -m pip install --quiet -r requirements.txt -e ".[course]"')
    assert normal("py -3.11 -m venv .venv") == normal("$(PYTHON) -m venv $(VENV)")
    assert normal(r".venv\Scripts\jupyter lab x.ipynb") != normal("$(BIN)/jupyter lab y.ipynb")


GUIDE = ROOT / "docs" / "TEACHING.md"
PACE, EXERCISE_PACE = 2, 3  # minutes a slide, an exercise slide: the guide's own pace (*Timing*)


def _section(start: str, end: str = "\n## ") -> str:
    text = GUIDE.read_text()
    return text[text.index(start):text.index(end, text.index(start) + 1)]


def _rows(section: str) -> list[tuple[int, int, list[str]]]:
    """(first minute, last minute, cells) of each `| a–b | ... |` row of a table."""
    rows = []
    for line in section.splitlines():
        found = re.match(r"\| (?:\*\*)?(\d+)–(\d+)(?:\*\*)? \|", line)
        if found:
            rows.append((int(found[1]), int(found[2]), [cell.strip() for cell in line.strip("|").split("|")][1:]))
    return rows


def _fifty_minute_plan() -> list[tuple[int, int, list[str]]]:
    """(first minute, last minute, [show, skip]) of each row of the 50-minute class's table."""
    return _rows(_section("### The 50-minute class before it", "### The 2-hour lab"))


def _lab_rows() -> list[tuple[int, int, list[str]]]:
    return _rows(_section("### The 2-hour lab", "### One day"))


def _slides(text: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, str]]]:
    """Slide ranges `**01 #9–#14**` and single slides (with their cited title) `**01 #7** (*title*)` of a cell."""
    ranges = [(deck, int(a), int(b)) for deck, a, b in re.findall(r"\*\*(\d\d) #(\d+)–#(\d+)\*\*", text)]
    singles = [(deck, int(n), title) for deck, n, title in re.findall(r"\*\*(\d\d) #(\d+)\*\*(?: \(\*(.+?)\*)?", text)]
    return ranges, singles


def _named(text: str) -> dict[str, set[int]]:
    """The slides a cell of the plan names, by deck."""
    ranges, singles = _slides(text)
    named: dict[str, set[int]] = {}
    for deck, first, last in ranges:
        named.setdefault(deck, set()).update(range(first, last + 1))
    for deck, number, _ in singles:
        named.setdefault(deck, set()).add(number)
    return named


def _lesson(deck: str) -> nbformat.NotebookNode:
    return nbformat.read(next((ROOT / "notebooks").glob(f"{deck}_*.ipynb")), as_version=4)


def _by_slide(notebook) -> list[list]:
    """The cells of each slide of a lesson's deck, slide 1 first (as `deck.deck_outline` counts them)."""
    from course_utils.course.publish.deck import slide_type

    slides: list[list] = []
    for i, cell in enumerate(notebook.cells):
        if i == 0 or slide_type(cell) in ("slide", "subslide"):
            slides.append([])
        slides[-1].append(cell)
    return slides


def _exercises(notebook) -> dict[str, int]:
    """Each exercise of a lesson and the slide that asks it."""
    from course_utils.course.lesson_parts import EXERCISE_TAG, exercise_cell

    return {exercise_cell(c.source).exercise: number for number, cells in enumerate(_by_slide(notebook), 1)
            for c in cells if c.cell_type == "code" and EXERCISE_TAG in c.metadata.get("tags", [])}


def _minutes(deck: str, number: int) -> int:
    """Minutes a slide takes at the guide's pace."""
    return EXERCISE_PACE if number in _exercises(_lesson(deck)).values() else PACE


def _expand(text: str) -> set[str]:
    """The exercise ids a text names: `01.1`, and ranges `01.1–01.3`."""
    found = {f"{a}.{b}" for a, b in re.findall(r"\b(\d\d)\.(\d)\b", text)}
    for lesson, first, last in re.findall(r"\b(\d\d)\.(\d)–\1\.(\d)\b", text):
        found |= {f"{lesson}.{k}" for k in range(int(first), int(last) + 1)}
    return found


def test_the_fifty_minute_plan_names_real_slides_and_covers_decks_01_and_02():
    from course_utils.course.publish.deck import deck_outline

    outlines = {deck: deck_outline(_lesson(deck)) for deck in ("00", "01", "02", "03")}
    shown: dict[str, set[int]] = {"01": set(), "02": set()}
    skipped: dict[str, set[int]] = {"01": set(), "02": set()}
    for _, _, (show, skip) in _fifty_minute_plan():
        for column, into in ((show, shown), (skip, skipped)):
            ranges, singles = _slides(column)
            for deck, first, last in ranges:
                assert 1 <= first < last <= len(outlines[deck]), (deck, first, last)
            for deck, number, title in singles:
                assert 1 <= number <= len(outlines[deck]), (deck, number)
                cited = re.sub(r"[*`]", "", title or "").split(":")[0].rstrip("?").strip()
                assert outlines[deck][number - 1].startswith(cited), (deck, number, title, outlines[deck][number - 1])
            for deck, numbers in _named(column).items():
                into.setdefault(deck, set()).update(numbers)
    for deck in ("01", "02"):
        every = set(range(1, len(outlines[deck]) + 1))
        assert shown[deck] & skipped[deck] == set(), deck
        assert shown[deck] | skipped[deck] == every, (deck, sorted(every - shown[deck] - skipped[deck]))
    text = GUIDE.read_text()
    total = sum(len(outlines[deck]) for deck in ("01", "02"))
    minutes = sum(_minutes(deck, n) for deck in ("01", "02") for n in range(1, len(outlines[deck]) + 1))
    assert f"Decks 01 and 02 hold {total} slides, about {minutes} minutes at this guide's pace" in text
    assert f"show the {sum(len(s) for s in shown.values())} slides" in " ".join(text.split())


def test_the_fifty_minute_plan_fits_its_minutes_at_the_guides_pace_and_opens_with_the_promise():
    """Each row's slides, at 2 minutes a slide and 3 an exercise (the pace *Timing* states), fit the row's
    minutes; the rows run from 0 to 50 without a gap; the first 5 minutes show a slide that makes the promise
    (a model or a batch too big for one device)."""
    timing = " ".join(_section("## Timing", "## A lab plan").split())
    assert f"at about {PACE} minutes a slide" in timing and f"an exercise slide {EXERCISE_PACE} minutes" in timing
    rows = _fifty_minute_plan()
    assert [(a, b) for a, b, _ in rows] == list(zip([0] + [b for _, b, _ in rows[:-1]], [b for _, b, _ in rows]))
    assert rows[0][:2] == (0, 5) and rows[-1][1] == 50
    spent = {}
    for first, last, (show, _) in rows:
        spent[first, last] = sum(_minutes(deck, n) for deck, numbers in _named(show).items() for n in numbers)
        assert spent[first, last] <= last - first, (first, last, spent[first, last])
    promise = _named(rows[0][2][0])
    assert promise, "the first 5 minutes show no slide"
    assert any("too big for one" in " ".join(_by_slide(_lesson(deck))[n - 1][0].source.split())
               for deck, numbers in promise.items() for n in numbers)
    assert sum(spent.values()) >= 40  # the plan uses its time


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell defines, names it reads) of a code cell; IPython's `%` and `!` lines left out."""
    import ast

    from course_utils.course.parsing import parse_source

    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    defined, used = set(), set()
    for node in ast.walk(parse_source(code)):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return defined, used


def test_no_slide_the_plan_shows_runs_a_name_only_a_skipped_slide_defines():
    """A slide shown in class may read only what the slides shown before it, or the lesson's set-up, defined:
    02 #16 once read `grad_fn` and `x_mesh` from two skipped slides."""
    from course_utils.course.publish.deck import HIDE_CODE, slide_type

    shown = {}
    for _, _, (show, _) in _fifty_minute_plan():
        for deck, numbers in _named(show).items():
            shown.setdefault(deck, set()).update(numbers)
    problems = []
    for deck in ("01", "02"):
        known = set()  # defined by a shown slide, or by a cell no slide shows (the set-up's imports)
        later = set()  # defined by a skipped slide
        for number, cells in enumerate(_by_slide(_lesson(deck)), 1):
            for cell in (c for c in cells if c.cell_type == "code"):
                defined, used = _names(cell.source)
                visible = slide_type(cell) != "skip" and HIDE_CODE not in cell.metadata.get("tags", [])
                if number in shown[deck] and visible:
                    problems += [f"{deck} #{number} reads {name}, defined only on a skipped slide"
                                 for name in sorted((used - defined) & (later - known))]
                if number in shown[deck] or slide_type(cell) == "skip":
                    known |= defined
                else:
                    later |= defined
    assert problems == [], problems


def test_every_exercise_the_plan_leaves_for_the_lab_has_a_slot_in_the_lab():
    """The exercises of decks 01 and 02 are asked in class (their slide shown) or named in a row of the 2-hour
    lab that gives the room time for them."""
    shown = {}
    for _, _, (show, _) in _fifty_minute_plan():
        for deck, numbers in _named(show).items():
            shown.setdefault(deck, set()).update(numbers)
    lab = set().union(*(_expand(cells[0]) for _, _, cells in _lab_rows()))
    left = {exercise for deck in ("01", "02") for exercise, slide in _exercises(_lesson(deck)).items()
            if slide not in shown[deck]}
    assert left and left <= lab, sorted(left - lab)
    skipped = set().union(*(_expand(skip) for _, _, (_, skip) in _fifty_minute_plan()))
    assert left <= skipped  # and the plan says which it leaves


def test_the_closing_question_is_answered_by_slides_the_class_saw():
    from keras import distribution

    from course_utils import make_mesh
    from course_utils.placements import planned_placement

    rows = _fifty_minute_plan()
    last_show = rows[-1][2][0]
    assert "closing question" in last_show
    shown = {}
    for _, _, (show, _) in rows:
        for deck, numbers in _named(show).items():
            shown.setdefault(deck, set()).update(numbers)
    text = GUIDE.read_text()
    question = text[text.index("(the class's closing question)"):]
    question = question[:question.index("\n- ")]
    for deck, numbers in _named(question).items():
        assert numbers <= shown[deck], (deck, sorted(numbers - shown[deck]))
    mp = distribution.ModelParallel(layout_map=distribution.LayoutMap(make_mesh((2, 4), ("data", "model"))),
                                    batch_dim_name="data")
    batch = planned_placement((16, 10), mp.get_data_layout((16, 10)))
    devices = sorted((d for d, ranges in batch.device_index if ranges[0] == (8, 16)), key=lambda d: int(d[4:]))
    assert len(devices) == 4 and f"`{devices[0]}`–`{devices[-1]}`" in question
    assert f"summed over `{mp.batch_dim_name}`" in " ".join(question.split())


def test_the_labs_break_loses_no_work_to_binders_idle_deletion_or_the_kernel_culling():
    """Binder deletes a session idle for about 10 minutes (an open tab counts as activity); the course stops a
    kernel idle for `lab_settings.BINDER_CULL` seconds. The break is shorter than the culling, and its row says
    what to save, download and keep open; after it, how a stopped kernel or a lost session catches up."""
    from course_utils.course.environment.lab_settings import BINDER_CULL

    cull = BINDER_CULL["cull_idle_timeout"] // 60
    breaks = [(a, b, " ".join(" ".join(cells).split())) for a, b, cells in _lab_rows() if cells[0].startswith("break")]
    assert len(breaks) == 1
    first, last, row = breaks[0]
    assert last - first < cull
    for said in ("progress(", ".save()", "File › Save Notebook", "File › Download", "tab open", "about 10 minutes",
                 f"idle for {cull} minutes"):
        assert said in row, said
    after = " ".join(_section("**Back from the break.**", "### One day").split())
    for said in (f"A kernel idle for {cull} minutes", "Run All Above Selected Cell", "upload", "launch the class link"):
        assert said in after, said


def test_the_demo_questions_answers_are_what_the_lesson_computes():
    from course_utils.exercises import lesson03
    from keras.distribution import TensorLayout

    from course_utils.placements import planned_placement

    text = GUIDE.read_text()
    mesh = lesson03._mesh((2, 4))
    batch = planned_placement((16, 64), TensorLayout(("data", None), mesh))
    kernel = lesson03._planned("d1/kernel", mesh)
    rows = {d for d, ranges in batch.device_index if ranges[0] == (8, 16)}
    columns = {d for d, ranges in kernel.device_index if ranges[1] == (0, 32)}
    (device,) = rows & columns
    answer = text[text.index('*"Which device holds rows 8:16 and columns 0:32?"*'):text.index('*"Why not (1, 8)?"*')]
    assert answer.split("—")[1].strip().startswith(f"`{device}`.")
    assert f"(`{min(rows)}`–`{max(rows)}`)" in answer and " and ".join(f"`{d}`" for d in sorted(columns)) in answer
    weights = {shape: sum(max(lesson03._planned(p, lesson03._mesh(shape)).bytes_per_device.values())
                          for p in lesson03.LAYOUT) for shape in lesson03.SHAPES}
    best = min((s for s in weights if s[0] >= 2), key=weights.get)
    why = text[text.index('*"Why not (1, 8)?"*'):]
    why = why[:why.index("\n\n")]
    assert min(weights, key=weights.get) == (1, 8)
    assert f"{weights[(1, 8)]:,} against {weights[best]:,} on {best}" in " ".join(why.split())


def test_the_timing_table_gives_each_decks_slide_count():
    from course_utils.course.publish.deck import deck_slides

    text = (ROOT / "docs" / "TEACHING.md").read_text()
    table = dict(re.findall(r"^\| `(\d\d_\w+)` \| [^|]+\| (\d+) \|", text, re.M))
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {p.stem: int(table[p.stem]) for p in lessons} == {
        p.stem: deck_slides(nbformat.read(p, as_version=4)) for p in lessons}


def _question_bank() -> dict[str, list[tuple[str, str]]]:
    """{lesson: [(question, answer)]} of the guide's question bank."""
    bank = {}
    for lesson, body in re.findall(r"^### (\d\d) · .*?\n(.*?)(?=^### |\Z)", _section("## A question bank for quizzes"),
                                   re.S | re.M):
        bank[lesson] = re.findall(r"^- \*\*Q:\*\* (.*?)\n\s+\*\*A:\*\* (.*?)(?=\n- \*\*Q:\*\*|\n\n|\Z)", body, re.S | re.M)
    return bank


def _quoted_claims(lesson: str) -> list:
    """The claims of a lesson the question bank's answers quote (a claim's passage, or what follows its "Answer:")."""
    from course_utils.course.checking.claims import claims_of, figures, givens, normal

    notebook = _lesson(lesson)
    passages = {}
    for claim in claims_of(notebook):
        says = normal(claim.says)
        for passage in {says, says.rsplit("Answer: ", 1)[-1]}:
            passages.setdefault(passage, claim)
    quoted, problems = [], []
    for question, answer in _question_bank()[lesson]:
        text, answered = normal(f"{question} Answer: {answer}"), normal(answer)
        used = [claim for passage, claim in passages.items() if passage in answered]
        if not used:
            problems.append(f"{lesson}: the answer to {question!r} quotes no claim of the lesson")
        quoted += used
        spans = [(m.start(), m.start() + len(p)) for p in [*passages, *map(normal, givens(notebook))]
                 for m in re.finditer(re.escape(p), text)]
        problems += [f"{lesson}: {text[a:b]!r} in {text!r} is no claim's or given's" for a, b in figures(text)
                     if not any(x <= a and b <= y for x, y in spans)]
    assert problems == [], problems
    return quoted


def test_every_quiz_answer_quotes_what_its_lesson_checks():
    """Three or more questions a lesson; each answer quotes a claim of its lesson, and every number, verdict and
    device name of a question or answer lies in a passage a claim (or a given) of the lesson covers."""
    bank = _question_bank()
    assert sorted(bank) == [p.stem[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    assert all(len(items) >= 3 for items in bank.values()), {k: len(v) for k, v in bank.items()}
    for lesson in bank:
        assert _quoted_claims(lesson)


@pytest.mark.lesson_runs("learner")
@pytest.mark.parametrize("lesson", [p.stem[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))])
def test_the_quiz_answers_hold_in_the_lessons_run(lesson, lesson_runs):
    """The claims the question bank quotes held when the lesson ran, as a learner runs it."""
    run = lesson_runs.learner(next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")))
    verdicts = {(v.cell, v.says): v for v in run.claims}
    quoted = _quoted_claims(lesson)
    assert [str(verdicts[c.cell, c.says]) for c in quoted if not verdicts[c.cell, c.says].holds] == []


# The plans of lessons 08 to 13: a 50-minute class and a 90-minute lab each, held to the rules of the first one.
PLANNED = ("08", "09", "10", "11", "12", "13")
LAB_MINUTES = 90


def _subsection(heading: str) -> str:
    """A `### ` subsection of the guide, up to the next heading of any level."""
    text = GUIDE.read_text()
    start = text.index(heading)
    ends = [i for i in (text.find("\n### ", start + 1), text.find("\n## ", start + 1)) if i != -1]
    return text[start:min(ends)]


def _class(lesson: str) -> tuple[str, list[tuple[int, int, list[str]]]]:
    section = _subsection(f"### Lesson {lesson}: the 50-minute class")
    return section, _rows(section)


def _shown(rows) -> dict[str, set[int]]:
    shown: dict[str, set[int]] = {}
    for _, _, (show, _) in rows:
        for deck, numbers in _named(show).items():
            shown.setdefault(deck, set()).update(numbers)
    return shown


def _name_problems(deck: str, shown: set[int]) -> list[str]:
    """Names a shown slide of `deck` reads that only a skipped slide defines."""
    from course_utils.course.publish.deck import HIDE_CODE, slide_type

    known, later, problems = set(), set(), []
    for number, cells in enumerate(_by_slide(_lesson(deck)), 1):
        for cell in (c for c in cells if c.cell_type == "code"):
            defined, used = _names(cell.source)
            visible = slide_type(cell) != "skip" and HIDE_CODE not in cell.metadata.get("tags", [])
            if number in shown and visible:
                problems += [f"{deck} #{number} reads {name}, defined only on a skipped slide"
                             for name in sorted((used - defined) & (later - known))]
            if number in shown or slide_type(cell) == "skip":
                known |= defined
            else:
                later |= defined
    return problems


def test_every_slide_the_guide_names_is_a_slide_of_its_deck_with_that_title():
    """Anywhere in the guide, `**NN #n** (*title*)` names a slide of deck NN whose title starts so, and a range
    `**NN #a–#b**` lies in the deck (the outline test of tests/course/publish/test_decks.py holds `deck_outline`
    to the built decks)."""
    from course_utils.course.publish.deck import deck_outline

    ranges, singles = _slides(GUIDE.read_text())
    outlines = {deck: deck_outline(_lesson(deck)) for deck in {d for d, *_ in ranges + singles}}
    problems = [f"{deck} #{a}–#{b}: the deck has {len(outlines[deck])}" for deck, a, b in ranges
                if not 1 <= a < b <= len(outlines[deck])]
    for deck, number, title in singles:
        if not 1 <= number <= len(outlines[deck]):
            problems.append(f"{deck} #{number}: the deck has {len(outlines[deck])}")
            continue
        cited = re.sub(r"[*`]", "", title or "").split(":")[0].rstrip("?").strip()
        if not outlines[deck][number - 1].startswith(cited):
            problems.append(f"{deck} #{number} cited as {title!r}; it is {outlines[deck][number - 1]!r}")
    assert problems == [] and len(singles) >= 100, problems


@pytest.mark.parametrize("lesson", PLANNED)
def test_each_lessons_class_covers_its_deck_at_the_guides_pace(lesson):
    """Every slide of the deck is shown or skipped, once; the rows run from 0 to 50 without a gap and each
    row's slides fit its minutes at 2 minutes a slide and 3 an exercise; the first row shows the promise, the
    last one closes on a question its shown slides answer; the counts the plan states are the deck's."""
    from course_utils.course.publish.deck import deck_outline

    section, rows = _class(lesson)
    outline = deck_outline(_lesson(lesson))
    every = set(range(1, len(outline) + 1))
    shown = _shown(rows)
    skipped: dict[str, set[int]] = {}
    for _, _, (_, skip) in rows:
        for deck, numbers in _named(skip).items():
            skipped.setdefault(deck, set()).update(numbers)
    assert set(shown) | set(skipped) <= {lesson}, (set(shown), set(skipped))
    shown_here, skipped_here = shown.get(lesson, set()), skipped.get(lesson, set())
    assert shown_here & skipped_here == set()
    assert shown_here | skipped_here == every, sorted(every - shown_here - skipped_here)
    assert [(a, b) for a, b, _ in rows] == list(zip([0] + [b for _, b, _ in rows[:-1]], [b for _, b, _ in rows]))
    assert rows[-1][1] == 50
    spent = [sum(_minutes(d, n) for d, numbers in _named(show).items() for n in numbers) for _, _, (show, _) in rows]
    assert all(s <= b - a for s, (a, b, _) in zip(spent, rows)), list(zip(spent, [(a, b) for a, b, _ in rows]))
    assert sum(spent) >= 30
    assert 1 in _named(rows[0][2][0]).get(lesson, set()) and "the promise" in rows[0][2][0]
    closing = rows[-1][2][0]
    assert "closing question" in closing
    answered = {int(n) for n in re.findall(rf"\b{lesson} #(\d+)", closing[closing.index("closing question"):])}
    assert answered and answered <= shown_here, sorted(answered - shown_here)
    total = sum(_minutes(lesson, n) for n in every)
    said = " ".join(section.split())
    assert f"Deck {lesson} holds {len(outline)} slides, about {total} minutes at this guide's pace" in said
    assert (f"show the {len(shown_here)} slides" in said) or (shown_here == every and "show them all" in said)


@pytest.mark.parametrize("lesson", PLANNED)
def test_no_slide_a_lessons_class_shows_runs_a_name_only_a_skipped_slide_defines(lesson):
    assert _name_problems(lesson, _shown(_class(lesson)[1]).get(lesson, set())) == []


@pytest.mark.parametrize("lesson", PLANNED)
def test_each_lessons_lab_takes_the_exercises_its_class_left_and_breaks_safely(lesson):
    """The lab's rows run from 0 to 90; each exercise the class did not ask out loud is named in the skip column
    and in a row of the lab; one break, shorter than the kernel culling, says what to save and keep open."""
    from course_utils.course.environment.lab_settings import BINDER_CULL

    _, rows = _class(lesson)
    lab = _rows(_subsection(f"### Lesson {lesson}: the {LAB_MINUTES}-minute lab"))
    assert [(a, b) for a, b, _ in lab] == list(zip([0] + [b for _, b, _ in lab[:-1]], [b for _, b, _ in lab]))
    assert lab[-1][1] == LAB_MINUTES
    shown = _shown(rows).get(lesson, set())
    exercises = _exercises(_lesson(lesson))
    left = {e for e, slide in exercises.items() if slide not in shown}
    assert left <= set().union(*(_expand(cells[0]) for _, _, cells in lab)), sorted(left)
    assert left <= set().union(*(_expand(skip) for _, _, (_, skip) in rows))
    cull = BINDER_CULL["cull_idle_timeout"] // 60
    breaks = [(a, b, " ".join(" ".join(cells).split())) for a, b, cells in lab if cells[0].startswith("break")]
    assert len(breaks) == 1 and breaks[0][1] - breaks[0][0] < cull
    for said in (f'progress("{lesson}"', ".save()", "File › Save Notebook", "File › Download", "tab open",
                 "about 10 minutes", f"idle for {cull} minutes"):
        assert said in breaks[0][2], said


def test_the_days_reach_the_last_lesson_and_every_exercise_has_a_lesson_row():
    lessons = [p.stem[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    days = _subsection("### Days 3 to 5")
    assert all(f"lesson {n}: the class" in days and f"lesson {n}: the lab" in days for n in PLANNED)
    assert PLANNED[-1] == lessons[-1]
    table = _section("## Exercises and solutions", "## A question bank")
    listed = set(re.findall(r"\b(\d\d\.\d)\b", table))
    every = {e for n in lessons[1:] for e in _exercises(_lesson(n))}
    assert every <= listed, sorted(every - listed)


def test_every_command_the_guide_gives_is_one_the_set_up_provides():
    """Each `make X` the guide gives is a Makefile target, each `python -m course_utils.course X` a job of the
    course's command line, each `nbgrader X` (code, in backquotes or a block) a command of the nbgrader that
    `make nbgrader` installs; the guide's table of what installs what names each of those tools."""
    from course_utils.course.__main__ import JOBS

    text = GUIDE.read_text()
    code = "\n".join(re.findall(r"`([^`\n]+)`", text) + re.findall(r"```bash\n(.*?)```", text, re.S))
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.search(r"^\.PHONY:(.*)$", makefile, re.M)[1].split())
    made = set(re.findall(r"\bmake ([a-z][a-z-]*)", code))
    assert made and made <= targets, sorted(made - targets)
    jobs = set(re.findall(r"python -m course_utils\.course ([a-z-]+)", code))
    assert jobs and jobs <= set(JOBS), sorted(jobs - set(JOBS))
    installs = text[text.index("| you run |"):]
    installs = installs[:installs.index("\n\n")]
    for tool in ("`make slides`", "`make nbgrader`", "Chromium", "bubblewrap", "`make tpu-targets`"):
        assert tool in installs, tool
    nbgrader = pytest.importorskip("nbgrader.apps.nbgraderapp")
    used = set(re.findall(r"\bnbgrader ([a-z_]+)", code))
    assert used and used <= set(nbgrader.NbGraderApp.subcommands), sorted(used - set(nbgrader.NbGraderApp.subcommands))
    assert "generate_feedback" in used
