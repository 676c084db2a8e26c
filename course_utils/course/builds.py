"""Student and teacher builds from the same lessons: `python -m course_utils.course.builds`.

    python -m course_utils.course.builds student      # _build/student: lessons without solutions
    python -m course_utils.course.builds answer-key   # _build/answer-key: every exercise, solved and checked
    python -m course_utils.course.builds handout      # _build/handout: the one-page handout
    python -m course_utils.course.builds nbgrader     # _build/nbgrader: an nbgrader course directory
    python -m course_utils.course.builds student-branch   # the git branch `student`, for Binder
    python -m course_utils.course.builds grade lesson03   # grade what students handed in (nbgrader)

The command line only: the builds themselves live in `transforms` (student),
`student_branch`, `answer_key`, `handout` and `grading` (nbgrader).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from course_utils.course.kernels import stopped_like_ctrl_c

    try:
        with stopped_like_ctrl_c():
            return _main(argv)
    except KeyboardInterrupt:
        print("Stopped (Ctrl-C or a kill): every kernel and grading process was stopped, and their temporary "
              "files removed. What a student handed in is never changed; run the same command again.",
              file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", choices=("student", "student-branch", "answer-key", "handout", "nbgrader", "grade"))
    parser.add_argument("assignment", nargs="?", help="with grade: the assignment, e.g. lesson03")
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", help="output folder (default: _build/<build>; grade reads _build/nbgrader)")
    parser.add_argument("--no-pdf", action="store_true", help="HTML only (no Chromium needed)")
    parser.add_argument("--timeout", type=_seconds, help="with grade and answer-key: seconds each cell may run "
                        "(default 600; for grade, nbgrader_config.py's c.Execute.timeout)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path("_build") / ("nbgrader" if args.build == "grade" else args.build))
    if args.build == "student":
        from course_utils.course.transforms import build_student

        for path in build_student(args.notebooks, out):
            print(path)
    elif args.build == "student-branch":
        from course_utils.course.links import binder_url
        from course_utils.course.student_branch import write_student_branch

        written = write_student_branch(".")
        print(written)
        print(f"Publish it with `git push origin {written.branch}`; students then launch\n  {binder_url(written.branch)}")
    elif args.build == "answer-key":
        from course_utils.course.answer_key import build_answer_key

        from course_utils.course.runner import IncompleteBuild

        try:
            entries = build_answer_key(args.notebooks, out, pdf=not args.no_pdf, timeout=args.timeout or 600)
        except IncompleteBuild as incomplete:
            print(incomplete, file=sys.stderr)
            return 1
        print(f"{out / 'answer_key.html'}: {len(entries)} exercises, "
              f"{sum(e.status == 'correct' for e in entries)} checked correct"
              + ("" if args.no_pdf else f"; printed for A4 ({out / 'answer_key.pdf'}) and US Letter "
                                        f"({out / 'answer_key-letter.pdf'})"))
    elif args.build == "handout":
        from course_utils.course.handout import build_handout

        for path in build_handout(out, notebooks=args.notebooks, pdf=not args.no_pdf):
            print(path)
    elif args.build == "grade":
        return _grade(out, args.assignment, args.timeout, parser)
    else:
        from course_utils.course.grade_isolated import GradingBusy
        from course_utils.course.grading import build_course

        try:
            print(build_course(args.notebooks, out))
        except GradingBusy as busy:
            print(busy, file=sys.stderr)
            return 1
    return 0


def _seconds(text: str) -> int:
    from course_utils.course.grade_run import check_timeout

    try:
        return check_timeout(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"Received: --timeout {text}. Give the seconds each cell may run, "
                                         f"a whole number from 1 to 86400, e.g. --timeout 120.") from None


def _grade(root: Path, assignment: str | None, timeout: int | None, parser) -> int:
    from course_utils.course.grade_isolated import GradingBusy
    from course_utils.course.grade_run import read_notes
    from course_utils.course.grading import grade

    if not assignment:
        parser.error("grade needs the assignment, e.g. `grade lesson03 --out _build/nbgrader`")
    try:
        submissions, grades, left_out = grade(root, assignment, timeout=timeout)
    except GradingBusy as busy:
        print(busy, file=sys.stderr)
        return 1
    notes = read_notes(root).get(assignment, {})
    for submission in submissions:
        note = notes.get(submission.student)
        print(submission, *([f"  note: {note}"] if note and note != submission.message else []), sep="\n")
    refused = [s for s in submissions if s.status == "refused"]
    broken = [s for s in submissions if s.status == "broken"]
    nobody = f"; no submissions (left out): {', '.join(left_out)}" if left_out else ""
    print(f"{grades}: {len(submissions) - len(refused)} graded ({len(broken)} broken, graded 0: see its note "
          f"column), {len(refused)} refused{nobody}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
