"""The grader's own check of handed-in answers, in a fresh Python process: `recheck(answers)`.

    echo '{"01.1": {"str": "cpu:5"}}' | python -m course_utils.course recheck

The process reads `{exercise: wire}` (`wire.to_wire`'s data, taken from an autograded
notebook's outputs) on its standard input, sets up the course's 8 devices, rebuilds each
answer from data (`wire.from_wire`) and runs the course's `check` on it; it prints
`{exercise: {"status", "message"}}`. No student code runs in it: what a student's notebook
did to `check`, `Verdict` or the checkers' modules in its own kernel is not here, and it compiles
without the compilation cache, so no program a hand-in could have put there runs in it either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

NOT_CARRIED = "not yet"


def recheck(answers: dict[str, dict], *, timeout: float = 600) -> dict[str, dict]:
    """`{exercise: {"status", "message"}}` for `{exercise: wire}`, checked in a fresh process.

    Raises:
        RuntimeError: the checking process failed or ran past `timeout` seconds.
    """
    if not answers:
        return {}
    from course_utils.xla_settings import CACHE_ENV

    # the course's modules, never a file beside the caller; programs compiled here, never read from a cache
    env = {**os.environ, "PYTHONSAFEPATH": "1", CACHE_ENV: "off"}
    try:
        done = subprocess.run([sys.executable, "-m", "course_utils.course", "recheck"], input=json.dumps(answers),
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the course's check of {sorted(answers)} ran past {timeout:g} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"the course's check of {sorted(answers)} failed (exit {done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _verdicts(answers: dict[str, dict]) -> dict[str, dict]:
    from course_utils.exercises import EXERCISES, check
    from course_utils.course.grading.wire import from_wire

    verdicts = {}
    for exercise, wire in answers.items():
        if exercise not in EXERCISES:
            verdicts[exercise] = {"status": NOT_CARRIED, "message": f"no exercise {exercise!r} in the course"}
            continue
        try:
            answer = from_wire(wire)
        except Exception as error:  # noqa: BLE001  (data from a student's output: anything can be wrong)
            form = EXERCISES[exercise].form or "the form its cell shows"
            kind = wire.get("object") if isinstance(wire, dict) else None
            why = f"a {kind}" if kind else (wire.get("unreadable") if isinstance(wire, dict) else None) or error
            verdicts[exercise] = {"status": NOT_CARRIED, "message": (
                f"the answer ({why}) could not be carried out of the notebook to be checked; "
                f"the exercise reads {form}")}
            continue
        verdict = check(exercise, answer)
        verdicts[exercise] = {"status": verdict.status, "message": verdict.message}
    return verdicts


def main(argv: list[str] | None = None) -> int:
    """`python -m course_utils.course recheck`: answers as JSON on standard input, verdicts as JSON out."""
    answers = json.loads(sys.stdin.read())
    from course_utils.devices import setup_devices

    setup_devices(8)  # the lessons' own first cell
    print(json.dumps(_verdicts(answers)))
    return 0
