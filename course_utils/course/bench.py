"""Times every lesson: `python -m course_utils.course.bench notebooks`.

Runs each lesson top to bottom in a fresh kernel with 8 simulated CPU
devices and prints wall seconds and the kernel's peak memory, against the
course's targets (20 s a lesson, 3 minutes in all, 800 MB a kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from course_utils.course.runner import execute
from course_utils.course.transforms import lessons

LESSON_SECONDS, SERIES_SECONDS, KERNEL_MB = 20, 180, 800


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="notebooks")
    parser.add_argument("--solutions", action="store_true", help="fill in every exercise first")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    os.environ.setdefault("COURSE_PLATFORM", "cpu")
    runs = [execute(p, solutions=args.solutions) for p in lessons(args.folder)]
    if not runs:
        print(f"No lessons (NN_*.ipynb) in {args.folder}.", file=sys.stderr)
        return 1
    print(f"{'notebook':32} {'wall s':>8} {'peak MB':>9} {'child MB':>9}  within targets")
    for run in runs:
        ok = run.seconds <= LESSON_SECONDS and run.peak_rss_mb <= KERNEL_MB
        child = f"{run.child_peak_rss_mb:9.0f}" if run.child_peak_rss_mb else f"{'-':>9}"
        print(f"{run.path.name:32} {run.seconds:8.1f} {run.peak_rss_mb:9.0f} {child}  {'yes' if ok else 'NO'}")
    total = sum(r.seconds for r in runs)
    print(f"{'whole series':32} {total:8.1f} {max(r.peak_rss_mb for r in runs):9.0f} {'':9}  "
          f"{'yes' if total <= SERIES_SECONDS else 'NO'}")
    print("(peak MB: the lesson's kernel; child MB: the largest process the lesson started, e.g. a worker)")
    print(f"(targets: <= {LESSON_SECONDS} s a lesson, <= {SERIES_SECONDS} s in all, <= {KERNEL_MB} MB a kernel; "
          f"{os.cpu_count()} CPU cores; devices are simulated, so times show this machine, not a cluster)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"notebook": r.path.name, "seconds": r.seconds, "peak_rss_mb": r.peak_rss_mb,
                        "child_peak_rss_mb": r.child_peak_rss_mb} for r in runs], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
