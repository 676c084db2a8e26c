"""The commands documented for machines without make are the Makefile's own steps.

docs/TROUBLESHOOTING.md gives PowerShell and bash blocks marked `# = make <target>`; each must
run the same commands, in the same order, as that target's recipe in the Makefile (with the
set-up steps of `.venv` when the block says it sets it up). The handout's lines come from the
same PowerShell block. The teacher's guide's 50-minute plan names real slides of the decks and
covers decks 01 and 02, and its answers to the demo questions are what lesson 03 computes.
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
    page = (ROOT / "course_utils" / "course" / "templates" / "handout" / "handout.html").read_text()
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


def _fifty_minute_plan() -> list[tuple[str, str, str]]:
    """(min, show, skip) rows of the 50-minute class's table in docs/TEACHING.md."""
    text = (ROOT / "docs" / "TEACHING.md").read_text()
    section = text[text.index("### The 50-minute class before it"):text.index("### The 2-hour lab")]
    return [tuple(cell.strip() for cell in line.strip("|").split("|"))
            for line in section.splitlines() if re.match(r"\| \d+–\d+ \|", line)]


def _slides(text: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, str]]]:
    """Slide ranges `**01 #9–#14**` and single slides (with their cited title) `**01 #7** (*title*)` of a cell."""
    ranges = [(deck, int(a), int(b)) for deck, a, b in re.findall(r"\*\*(\d\d) #(\d+)–#(\d+)\*\*", text)]
    singles = [(deck, int(n), title) for deck, n, title in re.findall(r"\*\*(\d\d) #(\d+)\*\*(?: \(\*(.+?)\*)?", text)]
    return ranges, singles


def test_the_fifty_minute_plan_names_real_slides_and_covers_decks_01_and_02():
    from course_utils.course.render import deck_outline

    outlines = {p.stem[:2]: deck_outline(nbformat.read(p, as_version=4)) for p in sorted((ROOT / "notebooks").glob("0[0-3]_*.ipynb"))}
    shown: dict[str, set[int]] = {"01": set(), "02": set()}
    skipped: dict[str, set[int]] = {"01": set(), "02": set()}
    for _, show, skip in _fifty_minute_plan():
        for column, into in ((show, shown), (skip, skipped)):
            ranges, singles = _slides(column)
            for deck, first, last in ranges:
                assert 1 <= first < last <= len(outlines[deck]), (deck, first, last)
                into.setdefault(deck, set()).update(range(first, last + 1))
            for deck, number, title in singles:
                assert 1 <= number <= len(outlines[deck]), (deck, number)
                cited = re.sub(r"[*`]", "", title or "").split(":")[0].rstrip("?").strip()
                assert outlines[deck][number - 1].startswith(cited), (deck, number, title, outlines[deck][number - 1])
                into.setdefault(deck, set()).add(number)
    for deck in ("01", "02"):
        every = set(range(1, len(outlines[deck]) + 1))
        assert shown[deck] & skipped[deck] == set(), deck
        assert shown[deck] | skipped[deck] == every, (deck, sorted(every - shown[deck] - skipped[deck]))
    assert sum(len(s) for s in shown.values()) <= 35  # about 45 minutes: 1.5 minutes a slide, a figure alone less
    text = (ROOT / "docs" / "TEACHING.md").read_text()
    total = sum(len(outlines[deck]) for deck in ("01", "02"))
    assert f"Decks 01 and 02 hold {total} slides" in text
    assert f"show the {sum(len(s) for s in shown.values())} slides below" in text


def test_the_demo_questions_answers_are_what_the_lesson_computes():
    from course_utils.course.exercises import lesson03
    from keras.distribution import TensorLayout

    from course_utils.placements import planned_placement

    text = (ROOT / "docs" / "TEACHING.md").read_text()
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
    from course_utils.course.render import deck_slides

    text = (ROOT / "docs" / "TEACHING.md").read_text()
    table = dict(re.findall(r"^\| `(\d\d_\w+)` \| [^|]+\| (\d+) \|", text, re.M))
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {p.stem: int(table[p.stem]) for p in lessons} == {
        p.stem: deck_slides(nbformat.read(p, as_version=4)) for p in lessons}
