"""Answer checkers: correct, not yet (with a hint), or not attempted.

A lesson's exercise cell reads `answer = ...`; a learner replaces the `...`
and runs `check("01.1", answer)`. An untouched answer reports "not attempted"
and never raises, so "Run All" always reaches the end of a lesson. A checker
sees the answer as plain values (`answers.plain`: no answer can fool it with
its own `==`, or hang it with an endless iterator) and runs for at most
`CHECK_TIMEOUT_S` seconds.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from course_utils.exercises.answers import TimeUp, Unreadable, plain, shown, time_limit

CHECK_TIMEOUT_S = 60.0  # the slowest checker compiles a training step: a few seconds
CORRECT, NOT_YET, NOT_ATTEMPTED = "correct", "not yet", "not attempted"
_MARKS = {CORRECT: ("✅", "#e6f4ea"), NOT_YET: ("❌", "#fdecea"), NOT_ATTEMPTED: ("⏳", "#f1f3f4")}


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: its id, a one-line prompt, its checker and the answer's form.

    The checker takes the learner's answer and returns `None` when it is
    right (`Correct(note)` when it is right and deserves a remark), or a
    hint saying what is off. `form` says what kind of answer it reads ("a
    mesh shape as a tuple, e.g. (4, 2)"); the hint names it when an answer
    in another form breaks the checker.
    """

    id: str
    prompt: str
    checker: Callable[[object], str | None]
    form: str = ""


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


@dataclass(frozen=True)
class Correct:
    """What a checker returns for a right answer that deserves a remark (why it works, a caveat).

    Example:
        >>> return Correct("Right for this functional model; '.*name/kernel' also fits a Sequential one.")
    """

    note: str


EXERCISES: dict[str, Exercise] = {}
_log: list[Verdict] = []


def exercise(exercise_id: str, prompt: str, *, form: str = ""):
    """Registers a checker function under an exercise id (a decorator).

    Args:
        exercise_id: The id, e.g. `"03.3"`.
        prompt: The question in one line.
        form: What kind of answer the checker reads, e.g. `"a mesh shape as
            a tuple (data size, model size), e.g. (4, 2)"`.

    Example:
        >>> @exercise("03.2", "Predict the shard shape.", form="a tuple of two whole numbers, e.g. (128, 10)")
        ... def shard_shape(answer): ...
    """

    def register(checker):
        if exercise_id in EXERCISES:
            raise ValueError(f"Exercise {exercise_id!r} is registered twice.")
        EXERCISES[exercise_id] = Exercise(exercise_id, prompt, checker, form)
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
        hint = _run_checker(EXERCISES[exercise_id], answer)
        if hint is None or isinstance(hint, Correct):
            note = "" if hint is None else f" {hint.note}"
            verdict = Verdict(exercise_id, CORRECT, f"Well done.{note}")
        else:
            verdict = Verdict(exercise_id, NOT_YET, f"Hint: {shown(hint, limit=2000, as_text=True)}")
    _log.append(verdict)
    return verdict


def _run_checker(entry: Exercise, answer):
    """The checker's hint for the answer read as plain values; a hint too when it cannot read it or runs long."""
    try:
        value = plain(answer)
    except Unreadable as error:
        return _unreadable(entry, answer, str(error))
    try:
        with time_limit(CHECK_TIMEOUT_S):
            return entry.checker(value)
    except TimeUp:
        return (f"The check took over {CHECK_TIMEOUT_S:g} s, so it was stopped. Received: {shown(answer)} "
                f"(type {type(answer).__name__}). This exercise needs {entry.form or 'the form its cell shows'}.")
    except Exception as error:  # an answer in another form breaks the checker's probing
        return _unreadable(entry, answer, f"{type(error).__name__}: {shown(error, as_text=True)}")


def _unreadable(entry: Exercise, answer, why: str) -> str:
    """The hint for an answer the checker could not read: what it got, why, and the form it reads."""
    received = f"Received: {shown(answer)} (type {type(answer).__name__}), which it cannot read ({why})."
    if entry.form:
        return f"This exercise needs {entry.form}. {received}"
    return (f"This answer is not in the form the exercise reads. {received} "
            f"Write it like the example in the exercise cell's comment.")


def results() -> list[Verdict]:
    """Every verdict given in this Python session, in order."""
    return list(_log)
