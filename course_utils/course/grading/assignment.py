"""One grading run of an assignment: every hand-in graded apart, the course's gradebook written after.

`grade_assignment(root, "lesson03")` holds the course directory's lock (`grading.lock`: a
second run at once is refused, with the file's name), checks and backs up the gradebook
(`safekeeping`: a damaged one is restored from its newest healthy backup), prepares what was
handed in (`submissions`), grades each hand-in in a temporary course directory of its own
(`isolation`: the student's code never runs in the course directory; `sandbox`: in bubblewrap
where the machine has it, every process it started stopped at its end), checks after each
hand-in that the course directory is as it was (putting back what changed), and only then
writes each student's points into the course's `gradebook.db` (backed up again after), copies
the executed notebook to `autograded/`, and exports `grades.csv` with a `note` column: why a
hand-in got zero (not a notebook, an exercise cell twice, nbgrader failed, a time-out), what was
carried over from the lesson and what was left blank, and anything the teacher should look at.
One broken hand-in never stops the others. A hand-in unchanged since its last grade is not run again
(`regrade`: its points are kept; `regrade_all=True`, `grade --all`, runs every hand-in).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from course_utils.course.grading.isolation import GradingBusy, Graded, code_cells, grade_one, grading_lock, make_template, nbgrader_command
from course_utils.course.grading.regrade import GradingRecord, fingerprint
from course_utils.course.grading.safekeeping import CourseCopy, GradebookUnsafe, back_up, gradebook_ready
from course_utils.course.grading.sandbox import NONE, choose_sandbox
from course_utils.course.grading.submissions import BROKEN, REFUSED, Submission, prepare_submissions

NOTES = "grading-notes.json"
MAX_TIMEOUT = 24 * 3600


def check_timeout(timeout) -> int | None:
    """The per-cell time limit, validated: None (the config's) or a whole number of seconds, 1 to a day."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= MAX_TIMEOUT:
        raise ValueError(f"Received: timeout={timeout!r}. Give the seconds each cell may run, a whole number "
                         f"from 1 to {MAX_TIMEOUT}, e.g. --timeout 120 (nbgrader_config.py's "
                         f"c.Execute.timeout is used without it).")
    return timeout


def grade_assignment(root: str | os.PathLike, assignment: str, *, timeout: int | None = None, regrade_all: bool = False,
                     say: Callable[[str], object] = print) -> tuple[list[Submission], Path, list[str]]:
    """Prepares, grades (each hand-in apart) and exports `assignment`; see the module's notes.

    Args:
        root: The nbgrader course directory.
        assignment: e.g. "lesson03".
        timeout: Seconds each cell may run; None keeps `nbgrader_config.py`'s `c.Execute.timeout`.
        regrade_all: Run every hand-in again, even one unchanged since its last grade (`regrade`).
        say: Where the run tells the teacher how hand-ins run and what it restored (a line each).

    Returns:
        (one `Submission` per student folder, grades.csv, the assignments nobody handed anything in for).
        A refused submission has no row in grades.csv; a broken one has a zero and its reason.

    Raises:
        GradingBusy: another grading run holds the course directory.
        GradebookUnsafe: the gradebook cannot be read and no backup of it can, or it cannot be backed up
            (nothing is graded or changed then).
    """
    root, timeout = Path(root), check_timeout(timeout)
    with grading_lock(root):
        restored = gradebook_ready(root)
        if restored:
            say(restored)
        submissions = prepare_submissions(root, assignment)
        memory = GradingRecord.read(root)
        if memory.said:
            say(memory.said)
        graded = _grade_each(root, assignment, submissions, timeout, say, memory, regrade_all)
        record(root, assignment, graded)
        memory.write()  # after the gradebook: a run stopped before this grades those hand-ins again
        try:
            back_up(root)
        except GradebookUnsafe as unsafe:  # the scores are written: say so, and still export them
            say(f"{unsafe} (the scores of this run are in the gradebook, not yet in a backup)")
        grades, left_out = export_grades(root)
    return submissions, grades, left_out


def _grade_each(root: Path, assignment: str, submissions: list[Submission], timeout: int | None,
                say: Callable[[str], object], memory: GradingRecord, regrade_all: bool) -> list[Graded]:
    per_cell = timeout or _config_timeout(root)
    graded = [Graded(s.student, {}, (s.message,)) for s in submissions if s.status == BROKEN]
    for broken in graded:
        memory.forget(assignment, broken.student)
    grader = fingerprint(root, assignment, per_cell)
    todo = _to_run(root, assignment, submissions, grader, memory, regrade_all, graded, say)
    if not todo:
        return graded
    with tempfile.TemporaryDirectory(prefix=f"grading-{assignment}-") as scratch:
        template = make_template(root, assignment, Path(scratch), timeout=per_cell)
        sandbox = choose_sandbox(hide=[root, Path(scratch)])
        say(sandbox.describe())
        course = CourseCopy(root) if sandbox.mode == NONE else None  # in the sandbox, no hand-in sees it
        for submission in todo:
            notebook = _prepared(root, assignment, submission)
            one = grade_one(template, assignment, submission.student, notebook, timeout=per_cell,
                            cells=code_cells(notebook), sandbox=sandbox)
            graded.append(_kept_and_remembered(root, assignment, submission, notebook, one, course, grader,
                                               memory, say))
    return graded


def _to_run(root: Path, assignment: str, submissions: list[Submission], grader: str, memory: GradingRecord,
            regrade_all: bool, graded: list[Graded], say: Callable[[str], object]) -> list[Submission]:
    """The hand-ins to run; each one unchanged since its last grade by the same grader goes into `graded` as kept."""
    todo, unchanged = [], 0
    for submission in (s for s in submissions if s.status not in (BROKEN, REFUSED)):
        notebook = _prepared(root, assignment, submission)
        kept = None if regrade_all else memory.kept(assignment, grader, submission.student, notebook,
                                                        _executed(root, assignment, submission.student, notebook))
        if kept is None:
            todo.append(submission)
        else:
            graded.append(kept)
            unchanged += 1
    if unchanged:
        say(f"{unchanged} hand-in(s) unchanged since their last grade: their points kept, not run again; grading "
            f"{len(todo)} (grade --all runs every hand-in again)")
    elif regrade_all:
        say(f"--all: every hand-in runs again ({len(todo)})")
    return todo


def _kept_and_remembered(root: Path, assignment: str, submission: Submission, notebook: Path, one: Graded,
                         course: CourseCopy | None, grader: str, memory: GradingRecord,
                         say: Callable[[str], object]) -> Graded:
    """A hand-in's grade once run: the course directory put back if it reached it, its executed notebook kept
    where nbgrader keeps it, and the record told whether the next run may keep these points."""
    reached = course.put_back(submission.student) if course else ""
    carried = (submission.message,) if submission.status == "carried over" else ()
    one = replace(one, notes=carried + one.notes + ((reached,) if reached else ()))
    if reached:
        say(f"{submission.student}: {reached}")
    kept = _executed(root, assignment, submission.student, notebook)
    if one.autograded is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(one.autograded, kept)
        if course:
            course.keep(kept)
    if one.scores and not reached:  # graded in full, by the course's check: no need to run it again
        memory.remember(assignment, grader, one, notebook, kept)
    elif not one.scores:  # the run failed: the same notebook's earlier points, if any, are kept
        one = memory.kept_after_failure(assignment, grader, one, notebook) or one
    else:
        memory.forget(assignment, submission.student)  # it reached the course directory: run it next time
    return one


def _executed(root: Path, assignment: str, student: str, notebook: Path) -> Path:
    """Where the grade keeps a hand-in's executed notebook (nbgrader's `autograded/` folder)."""
    return root / "autograded" / student / assignment / notebook.name


def _prepared(root: Path, assignment: str, submission: Submission) -> Path:
    """The notebook `prepare_submissions` left for nbgrader (the release's name, in the student's folder)."""
    folder = root / "submitted" / submission.student / assignment
    release = sorted((root / "release" / assignment).glob("*.ipynb"))[0]
    return folder / release.name


def _config_timeout(root: Path) -> int:
    """`c.Execute.timeout` as the course's config sets it (the last such line), else nbgrader's 600 of the course."""
    import re

    found = re.findall(r"^c\.Execute\.timeout\s*=\s*(\d+)", (root / "nbgrader_config.py").read_text(), re.M)
    return int(found[-1]) if found else 600


def record(root: Path, assignment: str, graded: list[Graded]) -> None:
    """Writes each hand-in's points into the course's gradebook (0 for a test cell not scored) and its note."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    with Gradebook(f"sqlite:///{root.resolve() / 'gradebook.db'}") as gradebook, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission warns of its own autoflush
        for one in graded:
            gradebook.update_or_create_student(one.student)
            submission = gradebook.update_or_create_submission(assignment, one.student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score = one.scores.get(grade.name, 0.0)
            gradebook.db.commit()
    notes = read_notes(root)
    notes[assignment] = {one.student: one.note for one in graded}
    (root / NOTES).write_text(json.dumps(notes, indent=1, sort_keys=True))


def read_notes(root: Path) -> dict[str, dict[str, str]]:
    """{assignment: {student: note}} from the grading runs so far."""
    path = Path(root) / NOTES
    return json.loads(path.read_text()) if path.exists() else {}


def export_grades(root: str | os.PathLike, out: str | os.PathLike | None = None) -> tuple[Path, list[str]]:
    """nbgrader's grades, as `grades.csv` with a `note` column, for the assignments something was handed in for.

    Returns:
        (the file written, the assignments left out because nobody handed anything in).
    """
    from nbgrader.api import Gradebook

    root = Path(root)
    out = Path(out or root / "grades.csv")
    with Gradebook(f"sqlite:///{root.resolve() / 'gradebook.db'}") as gradebook:
        handed_in = {a.name for a in gradebook.assignments if a.submissions}
        left_out = sorted(a.name for a in gradebook.assignments if not a.submissions)
    with tempfile.TemporaryDirectory() as scratch:
        every = Path(scratch) / "grades.csv"
        nbgrader_command(root, "export", f"--to={every}")
        with every.open(newline="") as file:
            rows = list(csv.DictReader(file))
            columns = [*(list(rows[0]) if rows else ["assignment"]), "note"]
    notes = read_notes(root)
    with out.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows({**row, "note": notes.get(row["assignment"], {}).get(row["student_id"], "")}
                         for row in rows if row["assignment"] in handed_in)
    return out, left_out


def timeout_argument(text: str) -> int:
    """`--timeout`'s value: whole seconds from 1 to a day (an argparse type)."""
    try:
        return check_timeout(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"Received: --timeout {text}. Give the seconds each cell may run, "
                                         f"a whole number from 1 to {MAX_TIMEOUT}, e.g. --timeout 120.") from None


def main(argv: list[str] | None = None) -> int:
    """`python -m course_utils.course grade lesson03 [--out _build/nbgrader] [--timeout 120] [--all]`."""
    import sys

    from course_utils.course.checking.jupyter_kernels import stopped_like_ctrl_c

    parser = argparse.ArgumentParser(prog="python -m course_utils.course grade",
                                     description="Grade what students handed in, each hand-in apart: grades.csv.")
    parser.add_argument("assignment", help="the assignment, e.g. lesson03")
    parser.add_argument("--out", default="_build/nbgrader", help="the nbgrader course directory (make nbgrader)")
    parser.add_argument("--timeout", type=timeout_argument, help="seconds each cell may run "
                        "(default: nbgrader_config.py's c.Execute.timeout)")
    parser.add_argument("--all", action="store_true", help="grade every hand-in again, even those unchanged since "
                        "their last grade (by default their points are kept)")
    args = parser.parse_args(argv)
    try:
        with stopped_like_ctrl_c():
            return _grade(Path(args.out), args.assignment, args.timeout, args.all)
    except KeyboardInterrupt:
        print("Stopped (Ctrl-C or a kill): every kernel and grading process was stopped, and their temporary files removed. "
              "What a student handed in is never changed; run the same command again.", file=sys.stderr)
        return 130


def _grade(root: Path, assignment: str, timeout: int | None, regrade_all: bool = False) -> int:
    import sys

    try:
        submissions, grades, left_out = grade_assignment(root, assignment, timeout=timeout, regrade_all=regrade_all)
    except (GradingBusy, GradebookUnsafe) as stopped:
        print(stopped, file=sys.stderr)
        return 1
    notes = read_notes(root).get(assignment, {})
    for submission in submissions:
        note = (notes.get(submission.student) or "").removeprefix(submission.message).removeprefix("; ")
        print(submission, *([f"  note: {note}"] if note else []), sep="\n")
    refused = [s for s in submissions if s.status == "refused"]
    broken = [s for s in submissions if s.status == "broken"]
    nobody = f"; no submissions (left out): {', '.join(left_out)}" if left_out else ""
    print(f"{grades}: {len(submissions) - len(refused)} graded ({len(broken)} broken, graded 0: see its note "
          f"column), {len(refused)} refused{nobody}")
    return 1 if refused else 0
