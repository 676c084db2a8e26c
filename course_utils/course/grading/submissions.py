"""What each student handed in, made into a notebook nbgrader grades right: `prepare_submissions`.

A notebook is graded as handed in when it is nbgrader's release version; the lesson itself (as
Binder, `notebooks/` or the student build gave it) has each exercise cell's answer carried into
the release version (the notebook handed in is kept, untouched, in `submitted-originals/`). A
notebook holding none of the lesson's exercises, or a folder of several notebooks, is refused
(not graded, with what to hand out). A notebook that cannot be graded at all (not JSON, or an
exercise cell twice) is "broken": graded zero, with the reason, so the others are still graded.
"""

from __future__ import annotations

import ast

import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.lesson_parts import exercise_cell
from course_utils.course.parsing import parse_source

REFUSED, BROKEN = "refused", "broken"


@dataclass(frozen=True)
class Submission:
    """One student's notebook for an assignment, and what `prepare_submissions` made of it."""

    student: str
    handed_in: Path | None
    status: str  # "as released", "carried over" (a lesson's answers into the release), "refused", "broken"
    message: str

    def __str__(self) -> str:
        return f"{self.student}: {self.status}: {self.message}"


def _exercise_answers(notebook) -> dict[str, str]:
    """Exercise id -> the source of the cell that checks it (the tagged exercise cell where there is one)."""
    found: dict[str, tuple[bool, str]] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code" or "check(" not in cell.source:
            continue
        try:
            call = exercise_cell(cell.source)
        except (ValueError, SyntaxError):
            continue
        tagged = "exercise" in cell.metadata.get("tags", [])
        if tagged or not found.get(call.exercise, (False, ""))[0]:
            found[call.exercise] = (tagged, cell.source)
    return {exercise: source for exercise, (_, source) in found.items()}


def _grade_ids(notebook) -> dict[str, str]:
    """Exercise id -> grade id of each released solution cell (`answer_03_2` -> "03.2")."""
    ids = {}
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("answer_") and cell.metadata["nbgrader"].get("solution"):
            ids[grade_id.removeprefix("answer_").replace("_", ".", 1)] = grade_id
    return ids


def _keep_original(root: Path, student: str, assignment: str, path: Path) -> Path:
    """Copies a handed-in notebook to `submitted-originals/` (never over an earlier copy)."""
    folder = root / "submitted-originals" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    target, n = folder / path.name, 1
    while target.exists() and target.read_bytes() != path.read_bytes():
        target, n = folder / f"{path.stem}.{n}{path.suffix}", n + 1
    shutil.copy2(path, target)
    return target


def prepare_submissions(root: str | os.PathLike, assignment: str) -> list[Submission]:
    """Makes every notebook handed in for `assignment` one nbgrader grades right, or refuses it.

    Args:
        root: The nbgrader course directory (`submitted/<student>/<assignment>/` inside).
        assignment: e.g. "lesson03".

    Returns:
        One `Submission` per student folder; a refused one is left as handed in and named.
    """
    root = Path(root)
    releases = sorted((root / "release" / assignment).glob("*.ipynb"))
    if not releases:
        raise ValueError(f"No release of {assignment!r} in {root / 'release'}: build the course directory first "
                         f"(python -m course_utils.course build nbgrader --out {root}).")
    release = nbformat.read(releases[0], as_version=4)
    wanted, name = _grade_ids(release), releases[0].name
    done = []
    for folder in sorted((root / "submitted").glob(f"*/{assignment}")):
        student = folder.parent.name
        notebooks = sorted(folder.glob("*.ipynb"))
        chosen = folder / name if (folder / name).exists() else notebooks[0] if len(notebooks) == 1 else None
        if chosen is None:
            done.append(Submission(student, None, "refused", (
                f"{folder} holds {len(notebooks)} notebooks, none named {name}: leave only the lesson's "
                f"notebook there ({[p.name for p in notebooks]})")))
            continue
        done.append(_prepare_one(root, student, assignment, chosen, release, wanted, name))
    return done


def _prepare_one(root, student, assignment, path, release, wanted, name) -> Submission:
    notebook, why = _read(path)
    if notebook is None:
        return Submission(student, path, BROKEN, why)
    if set(_grade_ids(notebook)) >= set(wanted):
        if path.name != name:
            _keep_original(root, student, assignment, path)
            path.rename(path.with_name(name))
        return Submission(student, path, "as released", f"{path.name}: nbgrader's release version, graded as it is")
    answers = {e: source for e, source in _exercise_answers(notebook).items() if e in wanted}
    if not answers:
        others = sorted(_exercise_answers(notebook))
        held = f" (it holds exercises {', '.join(others)})" if others else ""
        return Submission(student, path, "refused", (
            f"{path} holds none of {assignment}'s exercises {', '.join(sorted(wanted))}{held}. Hand out "
            f"release/{assignment}/{name} (or the lesson {name} from Binder, notebooks/ or the student build) "
            f"and collect that notebook"))
    kept = _keep_original(root, student, assignment, path)
    graded = nbformat.from_dict(json.loads(json.dumps(release)))
    for cell in graded.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        exercise = next((e for e, g in wanted.items() if g == grade_id), None)
        if exercise in answers:
            cell.source = answers[exercise]
    path.unlink()
    nbformat.write(graded, path.with_name(name))
    blank = sorted(e for e, source in answers.items() if untouched(source))
    answered = sorted(set(answers) - set(blank))
    said = (f"its answers to {', '.join(answered)} carried into nbgrader's release version" if answered
            else "no exercise answered")
    if blank:
        said += (f"; {', '.join(blank)} {'is' if len(blank) == 1 else 'are'} still the blank handed out "
                 f"(0 points)")
    return Submission(student, path, "carried over", (
        f"{path.name}: the lesson as students run it; {said} (the notebook handed in is kept as "
        f"{kept.relative_to(root)})"))


def untouched(source: str) -> bool:
    """Whether an exercise cell is still the blank the lesson hands out: its checked name given `...`
    (`answer = ...  # a shape`), then the check call, and nothing else."""
    try:
        call, body = exercise_cell(source), parse_source(source).body
    except (ValueError, SyntaxError):
        return False
    assigns = [node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call))]
    return len(assigns) >= 1 and all(
        isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis
        and [getattr(t, "id", None) for t in node.targets] == [call.name] for node in assigns)




def _read(path: Path):
    """(the notebook, "") or (None, why it cannot be graded, and what the student should do)."""
    try:
        try:
            notebook = nbformat.read(path, as_version=4)
        except Warning:  # a warning raised as an error (-W error): nbformat was only repairing (a doubled cell id)
            notebook = nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except Exception as error:  # noqa: BLE001  (NotJSONError, a bad format, an unreadable file...)
        first = path.read_bytes()[:40] if path.is_file() else b""
        said = " ".join(str(error).split())[:200]
        return None, (f"{path.name} is not a notebook nbformat can read ({type(error).__name__}: {said}; "
                      f"it starts with {first!r}). Hand in the .ipynb file itself, saved from Jupyter "
                      f"(File > Download), not an export or a renamed file")
    copies = [g for g, n in Counter(c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells
                                    if "nbgrader" in c.metadata).items() if g and n > 1]
    if copies:
        return None, (f"{path.name} holds the graded cell(s) {', '.join(sorted(copies))} more than once (a "
                      f"copied exercise cell?), so nbgrader cannot tell which is the answer. Delete the copies, "
                      f"keep one cell with the answer, and hand it in again")
    return notebook, ""
