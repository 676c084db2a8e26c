"""How the room is doing, from the progress files learners saved: `python -m course_utils.course progress FILE...`.

Each exercise's counts (`room`), then each learner: how many are correct, the exercise they are on, and where they
are stuck (`learners`). A file that cannot be read is named with the reason and left out; the others are summed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from course_utils.exercises import EXERCISES
from course_utils.exercises.core import CORRECT, NOT_ATTEMPTED, NOT_YET
from course_utils.exercises.progress import _RANK, STUCK_ATTEMPTS, _best_rows
from course_utils.exercises.progress_file import ProgressFileError, read


def room(paths) -> dict[str, dict[str, int]]:
    """How many learners reached each status, per exercise, over collected files.

    Args:
        paths: Files written by `Progress.save`, one or more per learner.

    Returns:
        `{exercise: {status: count}}`, with every status present.
    """
    best: dict[tuple[str, str], str] = {}
    for path in paths:
        for row in read(path):
            key = (row.student, row.exercise)
            best[key] = max(best.get(key, NOT_ATTEMPTED), row.status, key=_RANK.get)
    counts = {e: {s: 0 for s in _RANK} for e in sorted({e for _, e in best})}
    for (_, exercise_id), status in best.items():
        counts[exercise_id][status] += 1
    return counts


@dataclass(frozen=True)
class Learner:
    """Where one learner stands, over the lessons the collected files hold."""

    student: str
    correct: int
    exercises: int  # of the lessons any collected file holds
    on: str | None  # the exercise they are on: the last one tried and not yet correct, else the next one
    stuck: tuple[tuple[str, int], ...]  # (exercise, answers tried) not yet correct after STUCK_ATTEMPTS

    def __str__(self) -> str:
        stuck = ", ".join(f"{e} ({n} tries)" for e, n in self.stuck) or "-"
        return f"{self.student:<24} {self.correct:>3} of {self.exercises:<3}  on {self.on or 'done':<6} stuck: {stuck}"


def learners(paths) -> list[Learner]:
    """Each learner of the collected files: correct count, the exercise they are on, where they are stuck.

    The exercises counted are every registered exercise of the lessons that any file holds, in
    series order. A learner is *on* the last exercise they tried and have not got right; when every
    one they tried is right, on the first one after it they have not got right (None: all done).
    *Stuck* are the exercises tried `STUCK_ATTEMPTS` times or more and not yet correct.

    Args:
        paths: Files written by `Progress.save`, one or more per learner.

    Returns:
        One `Learner` per student, the stuck ones first, then by name.
    """
    rows = [row for path in paths for row in read(path)]
    best = _best_rows(rows)
    lessons = {row.exercise[:2] for row in rows}
    order = sorted(e for e in EXERCISES if e[:2] in lessons and EXERCISES[e].checker.__module__.startswith(
        "course_utils.exercises.lesson")) or sorted({row.exercise for row in rows})
    found = []
    for student in sorted({row.student for row in rows}):
        mine = {e: best[(student, e)] for e in order if (student, e) in best}
        correct = [e for e in order if e in mine and mine[e].status == CORRECT]
        open_tries = [e for e in order if e in mine and mine[e].status == NOT_YET]
        if open_tries:
            on = open_tries[-1]
        else:
            last = max((order.index(e) for e in correct), default=-1)
            on = next((e for e in order[last + 1:] if e not in correct), None)
            on = on or next((e for e in order if e not in correct), None)
        stuck = tuple((e, mine[e].attempts) for e in open_tries if mine[e].attempts >= STUCK_ATTEMPTS)
        found.append(Learner(student, len(correct), len(order), on, stuck))
    return sorted(found, key=lambda learner: (not learner.stuck, learner.student.casefold()))


def main(argv=None) -> int:
    """`python -m course_utils.course progress FILE...`: the room's results per exercise.

    A file that cannot be read is named with the reason and left out; the others are summed.
    Exit status: 0, 1 when a file was left out, 2 without files.
    """
    paths = (sys.argv[1:] if argv is None else argv)
    if not paths:
        print("Usage: python -m course_utils.course progress progress1.json progress2.csv ...")
        return 2
    readable = []
    for path in paths:
        try:
            read(path)
            readable.append(path)
        except (OSError, ProgressFileError) as error:
            print(f"left out: {error}", file=sys.stderr)
    if not readable:
        print("No readable progress file among those given.", file=sys.stderr)
        return 1
    print(f"{'exercise':<9}" + "".join(f"{s:>15}" for s in reversed(_RANK)))
    for exercise_id, counts in room(readable).items():
        print(f"{exercise_id:<9}" + "".join(f"{counts[s]:>15}" for s in reversed(_RANK)))
    every = learners(readable)
    stuck = sum(1 for learner in every if learner.stuck)
    print(f"\n{len(every)} learner{'s' if len(every) != 1 else ''}, {stuck} stuck (an exercise tried "
          f"{STUCK_ATTEMPTS}+ times, not yet correct); the stuck first:")
    for learner in every:
        print(f"  {learner}")
    if len(readable) < len(paths):
        print(f"{len(paths) - len(readable)} of {len(paths)} files left out (see above).", file=sys.stderr)
    return 0 if len(readable) == len(paths) else 1
