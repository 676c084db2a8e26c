"""The course's one command line: `python -m course_utils.course <job> [options]`.

Each job is reached this way only; `make` targets call it (see the Makefile). `<job> --help` shows
a job's options.
"""

from __future__ import annotations

import importlib
import sys

# job: (the module whose main(argv) runs it, what it does)
JOBS = {
    "doctor": ("course_utils.course.environment.doctor", "is this machine ready for the course? (--set-keras-backend: make JAX Keras's "
                                     "backend in this environment)"),
    "lab-settings": ("course_utils.course.environment.lab_settings", "write the course's JupyterLab settings into this environment"),
    "render": ("course_utils.course.publish.render", "the rendered course and the slide decks (--slides, --pages, --lesson NN)"),
    "build": ("course_utils.course.publish.builds", "student | student-branch | answer-key | handout | nbgrader"),
    "links": ("course_utils.course.publish.binder_links", "the Binder links, from pyproject.toml's binder_repository (--write)"),
    "grade": ("course_utils.course.grading.assignment", "grade what students handed in: grade lesson03 [--out _build/nbgrader]"),
    "recheck": ("course_utils.course.grading.recheck", "(the grader's own) check answers read from standard input, in a fresh process"),
    "progress": ("course_utils.exercises.room", "the room's results from collected progress files: progress FILE..."),
    "bench": ("course_utils.course.bench", "time the course: bench lessons | advisor | published-rows | real-models | "
                       "sharding-costs | widget-redraw"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in JOBS:
        received = f"Received: {argv[0]!r}. " if argv else ""
        lines = "\n".join(f"  {name:13} {text}" for name, (_, text) in JOBS.items())
        print(f"{received}Usage: python -m course_utils.course <job> [options]\n{lines}", file=sys.stderr)
        return 2
    module, _ = JOBS[argv[0]]
    return importlib.import_module(module).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
