"""A learner's results: a table at the end of each lesson, a small file for the teacher.

The checkers' verdicts live only in the learner's kernel. `progress("03")`
turns them into one row per exercise of lesson 03 (best status so far, number
of attempts); `.save()` merges those rows into `progress.json` (or a `.csv`)
that the teacher collects; `room` reads the collected files (`python -m course_utils.course
progress FILE...`).

A save never loses what was saved before. It merges per exercise, keeping the
best result ever saved (correct beats not yet beats not attempted) whatever the
kernel's history: a kernel restarted since, that checked only some exercises or
got one wrong, lowers nothing. Tries add up: each save adds the answers this
kernel checked since its last save to that file. `Progress.reset(path)` is the
one, explicit way to replace saved rows with this kernel's. It holds a lock
beside the file while it reads, merges and writes (several students, or several
notebooks, saving to one file at once), and writes a new file beside the old one
before renaming it over (a full disk or a killed kernel leaves the old file whole).
A file that cannot be read is kept aside under a new name, with a message,
and saving starts afresh. Reading and writing the file: `progress_file`.
"""

from __future__ import annotations

import getpass
import html
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from course_utils.exercises import EXERCISES, results
from course_utils.exercises.core import _MARKS, CORRECT, NOT_ATTEMPTED, NOT_YET
from course_utils.exercises.progress_file import (FIELDS, ProgressFileError, Row, read, set_aside,
                                                         student_name, write)

_RANK = {NOT_ATTEMPTED: 0, NOT_YET: 1, CORRECT: 2}
# The answers this kernel has added to each file, per (file, student, exercise): the next save adds only the rest.
_ADDED: dict[tuple[str, str, str], int] = {}
LOCK_TIMEOUT_S = 30.0
STUCK_ATTEMPTS = 3  # answers checked, none correct yet: the hints have not helped, go and see
__all__ = ["FIELDS", "LOCK_TIMEOUT_S", "STUCK_ATTEMPTS", "Progress", "ProgressFileError", "ProgressWarning", "Row",
           "progress", "read", "student_name"]


class ProgressWarning(UserWarning):
    """A damaged progress file was kept aside and a new one started."""
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
        """Merges these rows into a JSON or CSV file (other lessons' and students' rows are kept).

        Per exercise, the file keeps the best result ever saved, and the answers this kernel checked since its
        last save to this file are added to the tries: a save never lowers a result (`reset` does, when asked).
        Safe with several writers at once and against a failed write: see the module's notes.
        A file that cannot be read is renamed `NAME.damaged-TIME.json` (a warning says so) and
        a new file is started with these rows; hand in both.

        Args:
            path: A `.json` or `.csv` file; created if missing. `~` is expanded; a symbolic
                link is followed (the file it points to is updated, the link kept).

        Returns:
            The file written.
        """
        return self._write(path, start_over=False)

    def reset(self, path: str | Path = "progress.json") -> Path:
        """Replaces what `path` holds for these exercises of this learner with these rows, on purpose: the one
        way to lower a saved result or clear its tries (other exercises, lessons and students are kept).

        Example:
            >>> progress("03", student="Ada").reset()   # start lesson 03 over in progress.json
        """
        return self._write(path, start_over=True)

    def _write(self, path, *, start_over: bool) -> Path:
        from filelock import FileLock, Timeout

        path = Path(os.path.realpath(Path(path).expanduser()))
        if path.suffix not in (".json", ".csv"):
            raise ValueError(f"Received path={str(path)!r}. Save to a .json or a .csv file.")
        if path.is_dir():
            raise ValueError(f"{str(path)!r} is a folder. Give a file in it, e.g. {str(path / 'progress.json')!r}.")
        try:
            with FileLock(path.with_name(f".{path.name}.lock"), timeout=LOCK_TIMEOUT_S):
                merged = _best_rows(_saved_rows(path))
                added = {}
                for row in self.rows:
                    key = (row.student, row.exercise)
                    merged[key], added[key] = _merged(merged.get(key), row, str(path), start_over)
                write(path, sorted(merged.values(), key=lambda r: (r.student, r.exercise)))
        except Timeout:
            raise TimeoutError(f"Another save to {str(path)!r} has held its lock for {LOCK_TIMEOUT_S:g} s. "
                               f"Run this cell again in a moment; nothing was written.") from None
        except OSError as error:
            if isinstance(error, TimeoutError):
                raise
            raise OSError(error.errno, f"Could not save to {str(path)!r} ({error.strerror or error}). "
                                       f"Whatever the file held before is unchanged. Free some disk space or "
                                       f"save somewhere you may write, e.g. save('progress.json') in your "
                                       f"home folder.") from error
        _ADDED.update({(str(path), *key): attempts for key, attempts in added.items()})
        return path


def _merged(saved: Row | None, mine: Row, path: str, start_over: bool) -> tuple[Row, int]:
    """The row to write for one exercise, and the answers of this kernel it now counts.

    The better of the saved status and this kernel's; the saved tries plus those this kernel checked since it
    last saved to `path` (a restarted kernel starts counting again from its own first answer)."""
    if start_over or saved is None:
        return mine, mine.attempts
    new = max(0, mine.attempts - _ADDED.get((path, mine.student, mine.exercise), 0))
    status = max(saved.status, mine.status, key=_RANK.get)
    return Row(mine.student, mine.exercise, status, saved.attempts + new), mine.attempts


def _best_rows(rows) -> dict[tuple[str, str], Row]:
    """One row per student and exercise, the best (a file an earlier save wrote may hold " Ana" and "Ana")."""
    best: dict[tuple[str, str], Row] = {}
    for row in rows:
        key, old = (row.student, row.exercise), best.get((row.student, row.exercise))
        if old is None or (_RANK[row.status], row.attempts) > (_RANK[old.status], old.attempts):
            best[key] = row
    return best


def _saved_rows(path: Path) -> list[Row]:
    """The rows already at `path`; a damaged file is kept aside, with a warning, and none returned."""
    if not path.exists():
        return []
    try:
        return read(path)
    except ProgressFileError as error:
        aside = set_aside(path)
        warnings.warn(f"{error} It was kept as {aside.name!r}, untouched, and a new {path.name!r} was started "
                      f"with these rows. Hand in both files.", ProgressWarning, stacklevel=4)
        return []


def progress(lesson: str | None = None, *, student: str | None = None, verdicts=None) -> Progress:
    """The learner's results in this kernel: one row per exercise.

    Args:
        lesson: A lesson number such as `"03"`; `None` gives every exercise.
        student: The name written into saved files; defaults to `$COURSE_STUDENT`, else
            the login name (on Binder every login is "jovyan": give a name). Written in one
            spelling (`student_name`): spaces at the ends dropped, every run of spaces, tabs or
            line breaks one space, so "Ana", " Ana" and "Ana\\n" are one student.
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
    student = _student(student)
    verdicts = results() if verdicts is None else list(verdicts)
    rows = []
    for exercise_id in ids:
        given = [v for v in verdicts if v.exercise == exercise_id and v.status != NOT_ATTEMPTED]
        best = max((v.status for v in given), key=_RANK.get, default=NOT_ATTEMPTED)
        rows.append(Row(student, exercise_id, best, len(given)))
    return Progress(tuple(rows))


def _student(given: str | None) -> str:
    """The name to save, in one spelling, from `student=`, else $COURSE_STUDENT, else the login name."""
    if given is not None and not isinstance(given, str):
        raise TypeError(f"Received student={given!r} ({type(given).__name__}). Give the name as text, "
                        f'e.g. progress("03", student="Ada Lovelace").')
    source, raw = ("student", given) if given is not None else (
        ("COURSE_STUDENT", os.environ["COURSE_STUDENT"]) if os.environ.get("COURSE_STUDENT")
        else ("the login name", getpass.getuser()))
    received = f"Received {source}={raw!r}" if source != "the login name" else f"The login name is {raw!r}"
    half = next((c for c in raw if 0xD800 <= ord(c) <= 0xDFFF), None)
    if half is not None:
        raise ValueError(f"{received}: it holds {half!r}, half of a character (often an emoji cut in two by a "
                         f"copy and paste), which no file can hold. Type the name again, "
                         f'e.g. progress("03", student="Ada Lovelace").')
    name = student_name(raw)
    if not name:
        raise ValueError(f"{received}, which is empty once spaces and line breaks are dropped. Give your name, "
                         f'e.g. progress("03", student="Ada Lovelace").')
    return name
