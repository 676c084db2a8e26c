"""Student and teacher builds from the same lessons: `python -m course_utils.course.builds`.

    python -m course_utils.course.builds student      # _build/student: lessons without solutions
    python -m course_utils.course.builds answer-key   # _build/answer-key: every exercise, solved and checked
    python -m course_utils.course.builds handout      # _build/handout: the one-page handout
    python -m course_utils.course.builds nbgrader     # _build/nbgrader: an nbgrader course directory

The command line only: the builds themselves live in `transforms` (student),
`answer_key`, `handout` and `grading` (nbgrader).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", choices=("student", "answer-key", "handout", "nbgrader"))
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", help="output folder (default: _build/<build>)")
    parser.add_argument("--no-pdf", action="store_true", help="HTML only (no Chromium needed)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path("_build") / args.build)
    if args.build == "student":
        from course_utils.course.transforms import build_student

        for path in build_student(args.notebooks, out):
            print(path)
    elif args.build == "answer-key":
        from course_utils.course.answer_key import build_answer_key

        entries = build_answer_key(args.notebooks, out, pdf=not args.no_pdf)
        print(f"{out / 'answer_key.html'}: {len(entries)} exercises, "
              f"{sum(e.status == 'correct' for e in entries)} checked correct")
    elif args.build == "handout":
        from course_utils.course.handout import build_handout

        for path in build_handout(out, notebooks=args.notebooks, pdf=not args.no_pdf):
            print(path)
    else:
        from course_utils.course.grading import build_course

        print(build_course(args.notebooks, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
