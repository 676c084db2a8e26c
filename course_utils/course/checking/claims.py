"""What a lesson says it computed, each statement tied to a check that runs with the lesson.

A **claim** is a passage of a lesson's text (its prose, a teacher's note or a deck summary) that
states something the lesson computes: a verdict, a byte count, which device holds a block. It
lives in the metadata of the code cell whose results it describes:

    "claims": [{"says": "340,008 bytes", "check": "dp_step.bytes_over('data') == 340_008 + 8"}]

`says` is copied from the lesson's text (whitespace and `*` emphasis aside); `check` is a Python
expression that must be `True` in the lesson's kernel right after that cell ran: it reads the
lesson's variables, `_` (the cell's displayed result, as in IPython) and `_caught()` (what the
cell's `expect_error` block caught: `.error`, `.message`, `.warnings`). The runner adds a cell after each claimed cell that evaluates
its checks and shows nothing; pages, decks and builds are made from the lesson without it.

Passages that state what a lesson *gives* rather than computes (a budget of 400,000 bytes, a
device of 16 GiB) are listed in the notebook's metadata: `"course": {"given": [...]}`.

`unclaimed(notebook)` lists every figure of the text (a number with thousands separators, decimals
or a unit of bytes or percent; a verdict word; a device name) that no claim or given covers. The
tests require none, so a new sentence with a number in it cannot go unchecked.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from course_utils.course.parsing import parse_source

CLAIMS = "claims"
HARNESS = "course_harness"  # metadata flag of the cells the runner adds
MARK = "COURSE_CLAIMS="

_UNIT = r"(?:\s(?:bytes?|B|kB|KB|MB|GB|KiB|MiB|GiB|parameters)|\s?%)(?![\w/])"
_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:" + _UNIT + r")?")
_VERDICT = re.compile(r"\b(?:NOT equivalent|equivalent|EQUIVALENT|AGREE|DIFFER|fits)\b")
_DEVICE = re.compile(r"\b(?:cpu|gpu|tpu):\d+\b")
_CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_EXERCISE_ID = re.compile(r"(?:0\d|1[0-3])\.\d")  # "05.1": lesson 05, exercise 1; "13.2" (the lessons are 00 to 13)


@dataclass(frozen=True)
class Claim:
    """One passage of the text and the check that makes it true."""

    cell: int  # the code cell whose results it describes
    says: str
    check: str


@dataclass(frozen=True)
class Verdict:
    """What a check found when the lesson ran."""

    cell: int
    says: str
    check: str
    holds: bool
    found: str = ""  # why not, when it does not hold
    seconds: float = 0.0  # how long the check took

    def __str__(self) -> str:
        if self.holds:
            return f"cell {self.cell}: {self.says!r} holds"
        return f"cell {self.cell}: the lesson says {self.says!r}, but `{self.check}` {self.found}"


def normal(text: str) -> str:
    """Text as claims are matched against it: `*` emphasis dropped, runs of whitespace as one space."""
    return " ".join(text.replace("*", "").split())


def lesson_texts(notebook) -> list[str]:
    """Every passage a reader meets: markdown cells (notes included) and deck summaries, normalised."""
    texts = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    texts += [c.metadata["deck_summary"] for c in notebook.cells if "deck_summary" in c.metadata]
    return [normal(t) for t in texts]


def claims_of(notebook) -> list[Claim]:
    """Every claim of a lesson, in cell order; malformed entries raise, naming the cell."""
    found = []
    for i, cell in enumerate(notebook.cells):
        entries = cell.metadata.get(CLAIMS, [])
        if entries and cell.cell_type != "code":
            raise ValueError(f"Cell {i} is {cell.cell_type}; claims belong to the code cell whose results they describe.")
        for entry in entries:
            if not (isinstance(entry, dict) and set(entry) == {"says", "check"}):
                raise ValueError(f"Cell {i}: a claim is {{'says': ..., 'check': ...}}. Received: {entry!r}.")
            try:
                parse_source(entry["check"], mode="eval")
            except SyntaxError as error:
                raise ValueError(f"Cell {i}: the check of {entry['says']!r} is not a Python expression: "
                                 f"{entry['check']!r} ({error.msg}).") from None
            found.append(Claim(i, entry["says"], entry["check"]))
    return found


def givens(notebook) -> list[str]:
    """Passages that state what the lesson gives, not what it computes."""
    return list(notebook.metadata.get("course", {}).get("given", []))


def figures(text: str) -> list[tuple[int, int]]:
    """Spans of the figures in a normalised text: numbers a reader takes as results, verdicts, devices."""
    prose = _CODE_SPAN.sub(lambda m: " " * len(m.group()), text)  # numbers in code are code
    spans = [m.span() for m in _NUMBER.finditer(prose) if _is_result(m.group())]
    spans += [m.span() for m in _VERDICT.finditer(prose)]
    spans += [m.span() for m in _DEVICE.finditer(text)]
    return sorted(spans)


def _is_result(number: str) -> bool:
    """Plain integers are a lesson's givens (8 devices, 128 units); units, separators and decimals are results."""
    if _EXERCISE_ID.fullmatch(number):
        return False
    return not number.isdigit()


def unclaimed(notebook) -> list[str]:
    """Figures of the lesson's text that no claim and no given covers, each with its context."""
    passages = [normal(c.says) for c in claims_of(notebook)] + [normal(g) for g in givens(notebook)]
    missing = []
    for text in lesson_texts(notebook):
        covered = [(m.start(), m.start() + len(p)) for p in passages if p for m in re.finditer(re.escape(p), text)]
        for start, end in figures(text):
            if not any(a <= start and end <= b for a, b in covered):
                missing.append(f"{text[start:end]!r} in “…{text[max(0, start - 50):end + 30]}…”")
    return missing


def unquoted(notebook) -> list[str]:
    """Claims and givens whose passage is not in the lesson's text (the sentence changed or was removed)."""
    text = "\n".join(lesson_texts(notebook))
    bad = [f"cell {c.cell}: {c.says!r}" for c in claims_of(notebook) if normal(c.says) not in text]
    return bad + [f"given: {g!r}" for g in givens(notebook) if normal(g) not in text]


def check_cell_source(claims: list[Claim]) -> str:
    """The code of the cell that checks one cell's claims in the lesson's kernel; it displays nothing."""
    lines = ["from course_utils.course.checking.claims import verify as _course_verify",
             "from course_utils.exercises.mistakes import last_caught as _caught"]
    for claim in claims:
        sides = _comparison_sides(claim.check)
        extra = f", sides=(lambda: ({sides[0]}), lambda: ({sides[1]}))" if sides else ""
        lines.append(f"_course_verify({claim.cell}, {claim.says!r}, {claim.check!r}, "
                     f"lambda: ({claim.check}){extra})")
    return "\n".join(lines)


def _comparison_sides(check: str) -> tuple[str, str] | None:
    node = parse_source(check, mode="eval").body
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return ast.unparse(node.left), ast.unparse(node.comparators[0])
    return None


# In the lesson's kernel: the verdicts of the checks run so far.
_verdicts: list[Verdict] = []


def verify(cell: int, says: str, check: str, evaluate, *, sides=None) -> None:
    """Evaluates one check in the lesson's kernel and records its verdict (never raises)."""
    import time

    import numpy as np

    start = time.perf_counter()
    try:
        value = evaluate()
        verdict = isinstance(value, (bool, np.bool_))
        holds = verdict and bool(value)
        found = "" if holds else (f"is {bool(value)}" if verdict else
                                  f"gives {type(value).__name__} {value!r:.200}, not True or False")
        if not holds and verdict and sides is not None:
            left, right = (_shown(side) for side in sides)
            found = f"is False: the left side is {left}, the right side {right}"
    except Exception as error:  # a check that raises is a claim that does not hold
        holds, found = False, f"raised {type(error).__name__}: {error}"
    _verdicts.append(Verdict(cell, says, check, holds, found, time.perf_counter() - start))


def _shown(side) -> str:
    try:
        return f"{side()!r:.300}"
    except Exception as error:
        return f"({type(error).__name__}: {error})"


def report() -> str:
    """The verdicts recorded in this kernel, as one line the runner reads back."""
    return MARK + json.dumps([[v.cell, v.says, v.check, v.holds, v.found, v.seconds] for v in _verdicts])


def read_report(printed: str) -> list[Verdict]:
    """The verdicts from the line `report()` printed."""
    line = next(line for line in printed.splitlines() if line.startswith(MARK))
    return [Verdict(*entry) for entry in json.loads(line[len(MARK):])]
