"""Times every lesson, cold and warm: `python -m course_utils.course bench lessons notebooks`.

Runs the series twice, each lesson top to bottom in a fresh kernel with 8 simulated CPU devices:
first with an empty compilation cache (as on a new machine: every program compiled), then again
with the cache the first pass filled (as every later run). Prints wall seconds and each kernel's
peak memory against each lesson's budget and the course's targets, and whether every claim of every lesson held.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from course_utils.course.checking.jupyter_kernels import stopped_like_ctrl_c
from course_utils.course.checking.lesson_runs import CELL_TIMEOUT, Failed, cell_seconds, execute_series
from course_utils.course.lesson_parts import lessons

# Every lesson must stay within its budget, cold (the README's benchmark section); the targets are what the
# course aims at.
BUDGET_SECONDS, BUDGET_MB = 20, 800
COLD_SECONDS, WARM_SECONDS, KERNEL_MB = 12, 6, 600  # a lesson's targets
SERIES_COLD_SECONDS, SERIES_WARM_SECONDS = 60, 30


def run_series(folder, *, solutions: bool, cache: str, timeout: int = 600) -> list:
    """Every lesson of `folder` run once, one at a time, with `cache` as the compilation cache: its run, or
    `Failed`.

    A lesson that fails (a cell raises, or runs over `timeout` seconds) is named and the series goes on.
    Its kernels run from a thread of their own (`execute_series`), so Ctrl-C or SIGTERM reaches this
    command and stops them: in the main thread, nbclient would take the signal to restart the kernel.
    """
    return list(execute_series(lessons(folder), workers=1, keep_going=True, solutions=solutions, timeout=timeout,
                               env={"COURSE_COMPILATION_CACHE": cache}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course bench lessons", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="notebooks")
    parser.add_argument("--solutions", action="store_true", help="fill in every exercise first")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--timeout", type=cell_seconds, default=CELL_TIMEOUT,
                        help=f"seconds a cell may run (default {CELL_TIMEOUT})")
    args = parser.parse_args(argv)
    os.environ.setdefault("COURSE_PLATFORM", "cpu")
    if not lessons(args.folder):
        print(f"No lessons (NN_*.ipynb) in {args.folder}.", file=sys.stderr)
        return 1
    cold, warm = [], []
    try:
        with stopped_like_ctrl_c(), tempfile.TemporaryDirectory(prefix="course-bench-cache-") as cache:
            cold += run_series(args.folder, solutions=args.solutions, cache=cache, timeout=args.timeout)
            warm += run_series(args.folder, solutions=args.solutions, cache=cache, timeout=args.timeout)
    except KeyboardInterrupt:
        print(f"Stopped (Ctrl-C or a kill) during the {'warm' if cold else 'cold'} pass: no figures to compare.",
              file=sys.stderr)
        return 130
    failed = _report(cold, warm)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"notebook": c.path.name, "cold_seconds": c.seconds, "warm_seconds": w.seconds,
                        "peak_rss_mb": max(c.peak_rss_mb, w.peak_rss_mb),
                        "child_peak_rss_mb": max(c.child_peak_rss_mb, w.child_peak_rss_mb)}
                       for c, w in zip(cold, warm) if not isinstance(c, Failed) and not isinstance(w, Failed)], f, indent=2)
    return 1 if failed else 0


def _report(cold: list, warm: list) -> bool:
    """Prints the table; whether a lesson failed or a claim did not hold."""
    print(f"{'notebook':32} {'cold s':>7} {'warm s':>7} {'peak MB':>8} {'child MB':>9}  {'budget':>6}  {'targets':>7}")
    broken = []
    for c, w in zip(cold, warm):
        name = c.path.name
        if isinstance(c, Failed) or isinstance(w, Failed):
            broken.append(f"{name}: the {'cold' if isinstance(c, Failed) else 'warm'} run failed: "
                          f"{(c if isinstance(c, Failed) else w).why}")
            print(f"{name:32} {'FAILED':>7} (below)")
            continue
        peak = max(c.peak_rss_mb, w.peak_rss_mb)
        child = max(c.child_peak_rss_mb, w.child_peak_rss_mb)
        budget = c.seconds <= BUDGET_SECONDS and peak <= BUDGET_MB
        targets = c.seconds <= COLD_SECONDS and w.seconds <= WARM_SECONDS and peak <= KERNEL_MB
        child_mb = f"{child:9.0f}" if child else f"{'-':>9}"
        print(f"{name:32} {c.seconds:7.1f} {w.seconds:7.1f} {peak:8.0f} {child_mb}  "
              f"{_yes(budget):>6}  {_yes(targets):>7}")
    ran = [r for r in cold + warm if not isinstance(r, Failed)]
    if not broken:
        total_cold, total_warm = sum(r.seconds for r in cold), sum(r.seconds for r in warm)
        peak = max(r.peak_rss_mb for r in ran)
        series = total_cold <= SERIES_COLD_SECONDS and total_warm <= SERIES_WARM_SECONDS and peak <= KERNEL_MB
        print(f"{'whole series':32} {total_cold:7.1f} {total_warm:7.1f} {peak:8.0f} {'':9}  {'':6}  {_yes(series):>7}")
    for line in broken:
        print(f"  {line}")
    false = [f"{r.path.name}: {v}" for r in ran for v in r.false_claims]
    print(f"claims: {sum(len(r.claims) for r in cold if not isinstance(r, Failed))} per series"
          + (" (of the lessons that ran)" if broken else "") + ", "
          + ("every one held, cold and warm" if not false else f"{len(false)} did NOT hold:"))
    for line in false:
        print(f"  {line}")
    print("(cold: an empty compilation cache; warm: the cache the cold pass filled. peak MB: the lesson's kernel; "
          "child MB: at most, the largest process the lesson started, e.g. a worker)")
    print(f"(budget, every lesson: <= {BUDGET_SECONDS} s cold and <= {BUDGET_MB} MB. targets: a lesson <= {COLD_SECONDS} s "
          f"cold, <= {WARM_SECONDS} s warm; the series <= {SERIES_COLD_SECONDS} s cold, <= {SERIES_WARM_SECONDS} s warm; "
          f"<= {KERNEL_MB} MB a kernel. {os.cpu_count()} CPU cores; devices are simulated, so times show this machine, "
          f"not a cluster)")
    return bool(broken or false)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"
