"""The commands documented for machines without make are the Makefile's own steps.

docs/TROUBLESHOOTING.md gives PowerShell and bash blocks marked `# = make <target>`; each must
run the same commands, in the same order, as that target's recipe in the Makefile (with the
set-up steps of `.venv` when the block says it sets it up). The handout's lines come from the
same PowerShell block.
"""

import re
import shlex
from pathlib import Path

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
