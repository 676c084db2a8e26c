"""A learner's results: a table at the end of each lesson, a small file for the teacher.

The checkers' verdicts live only in the learner's kernel. `progress("03")`
turns them into one row per exercise of lesson 03 (best status so far, number
of attempts); `.save()` merges those rows into `progress.json` (or a `.csv`)
that the teacher collects. `python -m course_utils.course.exercises.progress
FILE...` reads the collected files and prints how the room is doing.
"""

from __future__ import annotations

import csv
import getpass
import html
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from course_utils.course.exercises import EXERCISES, results
from course_utils.course.exercises.core import _MARKS, CORRECT, NOT_ATTEMPTED, NOT_YET

_RANK = {NOT_ATTEMPTED: 0, NOT_YET: 1, CORRECT: 2}
FIELDS = ("student", "exercise", "status", "attempts")


@dataclass(frozen=True)
class Row:
    """One exercise of one learner: the best status reached and how many answers were checked."""

    student: str
    exercise: str
    status: str
    attempts: int


@dataclass(frozen=True)
class Progress:
    """A learner's rows, one per exercise, in exercise order."""

    rows: tuple[Row, ...]

    @property
    def correct(self) -> int:
        return sum(row.status == CORRECT for row in self.rows)

    def __repr__(self) -> str:
        lines = [f"{_MARKS[r.status][0]} {r.exercise}  {r.status:<13} attempts: {r.attempts}  "
                 f"{EXERCISES[r.exercise].prompt}" for r in self.rows]
        return "\n".join([f"{self.correct} of {len(self.rows)} exercises correct", *lines])

    def _repr_html_(self) -> str:
        cells = "".join(
            f'<tr style="background:{_MARKS[r.status][1]}"><td>{_MARKS[r.status][0]} {r.exercise}</td>'
            f"<td>{r.status}</td><td>{r.attempts}</td><td>{html.escape(EXERCISES[r.exercise].prompt)}</td></tr>"
            for r in self.rows)
        return (f"<b>{self.correct} of {len(self.rows)} exercises correct</b>"
                "<table><tr><th>exercise</th><th>status</th><th>attempts</th><th>task</th></tr>"
                f"{cells}</table>")

    def save(self, path: str | Path = "progress.json") -> Path:
        """Merges these rows into a JSON or CSV file (other lessons' rows are kept).

        Args:
            path: A `.json` or `.csv` file; created if missing.

        Returns:
            The file written.
        """
        path = Path(path)
        if path.suffix not in (".json", ".csv"):
            raise ValueError(f"Received path={str(path)!r}. Save to a .json or a .csv file.")
        merged = {(r.student, r.exercise): r for r in (read(path) if path.exists() else ())}
        merged.update({(r.student, r.exercise): r for r in self.rows})
        rows = sorted(merged.values(), key=lambda r: (r.student, r.exercise))
        if path.suffix == ".json":
            path.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        else:
            with path.open("w", newline="") as out:
                writer = csv.DictWriter(out, FIELDS)
                writer.writeheader()
                writer.writerows(asdict(r) for r in rows)
        return path


def progress(lesson: str | None = None, *, student: str | None = None, verdicts=None) -> Progress:
    """The learner's results in this kernel: one row per exercise.

    Args:
        lesson: A lesson number such as `"03"`; `None` gives every exercise.
        student: The name written into saved files; defaults to `$COURSE_STUDENT`, else
            the login name (on Binder every login is "jovyan": give a name).
        verdicts: The verdicts to summarise; by default every one given in this kernel.

    Returns:
        A `Progress`, shown as a table in a notebook.

    Example:
        >>> progress("03").save()   # progress.json, for the teacher
    """
    ids = sorted(i for i in EXERCISES if lesson is None or i.split(".")[0] == lesson)
    if not ids:
        lessons = sorted({i.split(".")[0] for i in EXERCISES})
        raise ValueError(f"Received lesson={lesson!r}, which has no exercises. Lessons: {lessons}.")
    student = student or os.environ.get("COURSE_STUDENT") or getpass.getuser()
    verdicts = results() if verdicts is None else list(verdicts)
    rows = []
    for exercise_id in ids:
        given = [v for v in verdicts if v.exercise == exercise_id and v.status != NOT_ATTEMPTED]
        best = max((v.status for v in given), key=_RANK.get, default=NOT_ATTEMPTED)
        rows.append(Row(student, exercise_id, best, len(given)))
    return Progress(tuple(rows))


def read(path: str | Path) -> list[Row]:
    """The rows of a file written by `Progress.save`."""
    path = Path(path)
    if path.suffix == ".json":
        records = json.loads(path.read_text())
    else:
        with path.open(newline="") as source:
            records = list(csv.DictReader(source))
    return [Row(r["student"], r["exercise"], r["status"], int(r["attempts"])) for r in records]


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


def main(argv=None) -> int:
    """`python -m course_utils.course.exercises.progress FILE...`: the room's results per exercise."""
    paths = (sys.argv[1:] if argv is None else argv)
    if not paths:
        print("Usage: python -m course_utils.course.exercises.progress progress1.json progress2.csv ...")
        return 2
    print(f"{'exercise':<9}" + "".join(f"{s:>15}" for s in reversed(_RANK)))
    for exercise_id, counts in room(paths).items():
        print(f"{exercise_id:<9}" + "".join(f"{counts[s]:>15}" for s in reversed(_RANK)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
