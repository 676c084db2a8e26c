"""Grading again only the hand-ins that changed: `GradingRecord`, kept beside the gradebook.

`grading-record.json` holds, for each assignment, a fingerprint of what decides a grade (the release and
source notebooks, `nbgrader_config.py`, the time limit per cell, and the course's checkers and grading
code) and, for each student, the SHA-256 of the notebook that was graded, the SHA-256 of its executed copy
in `autograded/`, and the points and note it got. A hand-in runs again when its notebook changed, its
executed copy changed or is gone, the fingerprint changed (a new release, a fixed checker: then every
hand-in does), or the run is forced (`grade --all`). Otherwise its stored points are written into the
gradebook again, so a gradebook put back from an older backup gets them back.

Grades live in the gradebook; the record only says which hand-ins need no new run, so losing it costs
time, never a grade: the record is written after the gradebook, in one rename (a run killed in between
grades those hand-ins again next time), and a record that cannot be read is set aside as
`grading-record.damaged-<time>.json`, the run saying so and grading every hand-in again. A hand-in whose
new run failed (nbgrader or the course's check did not finish) keeps the points it got for the same
notebook under the same fingerprint, and its note says so; it is never recorded as graded.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.course.grading.isolation import Graded

RECORD = "grading-record.json"
VERSION = 1


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fingerprint(root: Path, assignment: str, timeout: int) -> str:
    """What decides a hand-in's grade besides the hand-in: the assignment's release and source notebooks, the
    course's nbgrader config, the time limit per cell, and the code of the checkers and of grading."""
    import course_utils.course.grading as grading
    import course_utils.exercises as exercises

    files = [*sorted((root / "release" / assignment).glob("*.ipynb")), *sorted((root / "source" / assignment).glob("*.ipynb")),
             root / "nbgrader_config.py", *sorted(Path(exercises.__file__).parent.glob("*.py")),
             *sorted(Path(grading.__file__).parent.glob("*.py"))]
    summed = hashlib.sha256(f"timeout {int(timeout)}".encode())
    for path in files:
        summed.update(f"\n{path.name}\n".encode())
        summed.update(path.read_bytes())
    return summed.hexdigest()


def _valid(data) -> bool:
    """Whether `data` is a record this module wrote (version, assignments, students, their fields)."""
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("assignments"), dict)):
        return False
    for entry in data["assignments"].values():
        if not (isinstance(entry, dict) and isinstance(entry.get("grader"), str)
                and isinstance(entry.get("students"), dict)):
            return False
        for kept in entry["students"].values():
            if not (isinstance(kept, dict) and all(isinstance(kept.get(k), str) for k in ("hand_in", "autograded", "graded"))
                    and isinstance(kept.get("scores"), dict) and isinstance(kept.get("notes"), list)
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in kept["scores"].values())
                    and all(isinstance(n, str) for n in kept["notes"])):
                return False
    return True


@dataclass
class GradingRecord:
    """The record of `root`'s last grades, read once a run, changed in memory, written after the gradebook."""

    path: Path
    assignments: dict = field(default_factory=dict)
    said: str = ""  # what reading it did (a damaged record set aside), for the teacher

    @classmethod
    def read(cls, root: Path) -> GradingRecord:
        """The record beside `root`'s gradebook: empty when there is none; set aside (and empty) when damaged."""
        path = Path(root) / RECORD
        if not path.exists():
            return cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            data, why = None, f"{type(error).__name__}: {error}"
        else:
            why = "it is not a record this course wrote"
        if data is not None and _valid(data):
            return cls(path, data["assignments"])
        aside = path.with_name(f"grading-record.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**9:09d}.json")
        os.replace(path, aside)
        return cls(path, {}, (f"{path} could not be read ({str(why)[:200]}): it was set aside as {aside.name}, and "
                              f"every hand-in is graded again. No grade is lost: grades are kept in the gradebook."))

    def kept(self, assignment: str, grader: str, student: str, notebook: Path, executed: Path) -> Graded | None:
        """The stored grade of `student`'s `notebook` when nothing that decides it changed, else None."""
        stored = self._stored(assignment, grader, student, notebook)
        if stored is None or not executed.is_file() or digest(executed) != stored["autograded"]:
            return None
        note = (f"unchanged since it was graded on {stored['graded']}: its points kept, not run again "
                f"(grade --all runs it again)")
        return Graded(student, dict(stored["scores"]), (*stored["notes"], note), executed)

    def kept_after_failure(self, assignment: str, grader: str, failed: Graded, notebook: Path) -> Graded | None:
        """The stored grade of the same notebook, for a run of it that failed (a forced run), else None."""
        stored = self._stored(assignment, grader, failed.student, notebook)
        if stored is None:
            return None
        note = (f"graded again, and that run failed ({failed.note}): the points of its grading on "
                f"{stored['graded']}, for the same notebook, are kept")
        return Graded(failed.student, dict(stored["scores"]), (*stored["notes"], note), failed.autograded)

    def _stored(self, assignment: str, grader: str, student: str, notebook: Path) -> dict | None:
        entry = self.assignments.get(assignment)
        if not entry or entry["grader"] != grader:
            return None
        stored = entry["students"].get(student)
        return stored if stored and notebook.is_file() and digest(notebook) == stored["hand_in"] else None

    def remember(self, assignment: str, grader: str, graded: Graded, notebook: Path, executed: Path) -> None:
        """Records a hand-in graded in this run (its notebook, its executed copy, its points and note)."""
        entry = self.assignments.get(assignment)
        if not entry or entry["grader"] != grader:
            entry = self.assignments[assignment] = {"grader": grader, "students": {}}
        entry["students"][graded.student] = {
            "hand_in": digest(notebook), "autograded": digest(executed), "scores": dict(graded.scores),
            "notes": list(graded.notes), "graded": time.strftime("%Y-%m-%d %H:%M:%S")}

    def forget(self, assignment: str, student: str) -> None:
        """Drops a student's entry (a hand-in graded 0 as broken, or one that reached the course directory)."""
        self.assignments.get(assignment, {}).get("students", {}).pop(student, None)

    def write(self) -> None:
        """Writes the record in one rename: a run killed midway leaves the old record, never half a file."""
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"version": VERSION, "assignments": self.assignments}, indent=1, sort_keys=True))
        os.replace(partial, self.path)
