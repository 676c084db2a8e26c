"""Answer checkers: correct, not yet (with a hint), or not attempted.

A lesson's exercise cell reads `answer = ...`; a learner replaces the `...`
and runs `check("01.1", answer)`. An untouched answer reports "not attempted"
and never raises, so "Run All" always reaches the end of a lesson.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

CORRECT, NOT_YET, NOT_ATTEMPTED = "correct", "not yet", "not attempted"
_MARKS = {CORRECT: ("✅", "#e6f4ea"), NOT_YET: ("❌", "#fdecea"), NOT_ATTEMPTED: ("⏳", "#f1f3f4")}


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: its id, a one-line prompt and its checker.

    The checker takes the learner's answer and returns `None` when it is
    right, or a hint saying what is off.
    """

    id: str
    prompt: str
    checker: Callable[[object], str | None]


@dataclass(frozen=True)
class Verdict:
    """What a checker said about one answer."""

    exercise: str
    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        mark, _ = _MARKS[self.status]
        return f"{mark} Exercise {self.exercise}: {self.status}. {self.message}"

    def _repr_html_(self) -> str:
        mark, colour = _MARKS[self.status]
        return (f'<div style="background:{colour};padding:6px 10px;border-radius:4px">'
                f"{mark} <b>Exercise {html.escape(self.exercise)}: {self.status}.</b> "
                f"{html.escape(self.message)}</div>")


EXERCISES: dict[str, Exercise] = {}
_log: list[Verdict] = []


def exercise(exercise_id: str, prompt: str):
    """Registers a checker function under an exercise id (a decorator)."""

    def register(checker):
        if exercise_id in EXERCISES:
            raise ValueError(f"Exercise {exercise_id!r} is registered twice.")
        EXERCISES[exercise_id] = Exercise(exercise_id, prompt, checker)
        return checker

    return register


def check(exercise_id: str, answer=...) -> Verdict:
    """Checks a learner's answer and says correct, not yet, or not attempted.

    Args:
        exercise_id: The id printed above the exercise, e.g. `"01.1"`.
        answer: The learner's answer; `...` (left untouched) means not attempted.

    Returns:
        A `Verdict`, shown as a coloured line in a notebook.
    """
    if exercise_id not in EXERCISES:
        raise KeyError(f"No exercise {exercise_id!r}. Known: {sorted(EXERCISES)}.")
    if answer is ...:
        verdict = Verdict(exercise_id, NOT_ATTEMPTED,
                          "Replace the ... with your answer, then run this cell again.")
    else:
        try:
            hint = EXERCISES[exercise_id].checker(answer)
        except Exception as error:  # a wrong answer may break the checker's probing
            hint = f"Checking your answer raised {type(error).__name__}: {error}"
        verdict = (Verdict(exercise_id, CORRECT, "Well done.") if hint is None
                   else Verdict(exercise_id, NOT_YET, f"Hint: {hint}"))
    _log.append(verdict)
    return verdict


def results() -> list[Verdict]:
    """Every verdict given in this Python session, in order."""
    return list(_log)
