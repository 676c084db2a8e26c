"""Student and teacher builds from the same lessons: `python -m course_utils.course build`.

    python -m course_utils.course build student      # _build/student: lessons without solutions
    python -m course_utils.course build answer-key   # _build/answer-key: every exercise, solved and checked
    python -m course_utils.course build handout      # _build/handout: the one-page handout
    python -m course_utils.course build nbgrader     # _build/nbgrader: an nbgrader course directory
    python -m course_utils.course build student-branch   # the git branch `student`, for Binder

The command line only: the builds themselves live in `lesson_parts` (student), `student_branch`,
`answer_key`, `handout` and `grading.nbgrader_course` (nbgrader). Grading is its own job
(`python -m course_utils.course grade lesson03`, `grading.assignment`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from course_utils.course.checking.jupyter_kernels import stopped_like_ctrl_c

    try:
        with stopped_like_ctrl_c():
            return _main(argv)
    except KeyboardInterrupt:
        print("Stopped (Ctrl-C or a kill): every kernel and grading process was stopped, and their temporary "
              "files removed. What a student handed in is never changed; run the same command again.",
              file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    from course_utils.course.checking.lesson_runs import cell_seconds

    parser = argparse.ArgumentParser(prog="python -m course_utils.course build", description=__doc__.splitlines()[0])
    parser.add_argument("build", choices=tuple(_BUILDS))
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", help="output folder (default: _build/<build>)")
    parser.add_argument("--no-pdf", action="store_true", help="HTML only (no Chromium needed)")
    parser.add_argument("--timeout", type=cell_seconds, help="with answer-key: seconds each cell may run (default 600)")
    args = parser.parse_args(argv)
    return _BUILDS[args.build](args, Path(args.out or Path("_build") / args.build))


def _student(args, out: Path) -> int:
    from course_utils.course.lesson_parts import build_student

    for path in build_student(args.notebooks, out):
        print(path)
    return 0


def _student_branch(args, out: Path) -> int:
    from course_utils.course.publish.binder_links import binder_url, placeholder_warning
    from course_utils.course.publish.student_branch import write_student_branch

    written = write_student_branch(".")
    print(written)
    print(f"Publish it with `git push origin {written.branch}`; students then launch\n  {binder_url(written.branch)}")
    if placeholder_warning():
        print(f"Warning: {placeholder_warning()}", file=sys.stderr)
    return 0


def _answer_key(args, out: Path) -> int:
    from course_utils.course.checking.lesson_runs import IncompleteBuild
    from course_utils.course.publish.answer_key import build_answer_key

    try:
        entries = build_answer_key(args.notebooks, out, pdf=not args.no_pdf, timeout=args.timeout or 600)
    except IncompleteBuild as incomplete:
        print(incomplete, file=sys.stderr)
        return 1
    print(f"{out / 'answer_key.html'}: {len(entries)} exercises, "
          f"{sum(e.status == 'correct' for e in entries)} checked correct"
          + ("" if args.no_pdf else f"; printed for A4 ({out / 'answer_key.pdf'}) and US Letter "
                                    f"({out / 'answer_key-letter.pdf'})"))
    return 0


def _handout(args, out: Path) -> int:
    from course_utils.course.publish.handout import build_handout

    for path in build_handout(out, notebooks=args.notebooks, pdf=not args.no_pdf):
        print(path)
    return 0


def _nbgrader(args, out: Path) -> int:
    from course_utils.course.grading.isolation import GradingBusy
    from course_utils.course.grading.nbgrader_course import build_course

    try:
        print(build_course(args.notebooks, out))
    except GradingBusy as busy:
        print(busy, file=sys.stderr)
        return 1
    return 0


# Each build the command makes, in the order `--help` lists them, and the function that makes it.
_BUILDS = {"student": _student, "student-branch": _student_branch, "answer-key": _answer_key,
           "handout": _handout, "nbgrader": _nbgrader}
