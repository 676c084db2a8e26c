"""Local processes run as one job: output streamed with its process, all stopped together.

`run_processes` starts each command in its own process group, prints every
output line as "[pN] ..." as it comes, and waits until every process has
succeeded, one has failed, or the time is up. On every way out (success,
failure, timeout, KeyboardInterrupt) it kills every process group, so nothing
is left behind; on Linux a child also dies if the launcher itself is killed.
Used by `course_utils.multiprocess.launcher`.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

HANG_GRACE_S = 5.0


@dataclass(frozen=True)
class Outcome:
    """How a group of processes ended.

    Attributes:
        status: "ok", "failed" or "timeout".
        failed: The process that failed first, or None.
        reason: What happened, in a sentence ("" when ok or timed out).
        returncodes: Exit code of every process (negative: killed by that signal).
        lines: Every output line of every process.
    """

    status: str
    failed: int | None
    reason: str
    returncodes: tuple[int, ...]
    lines: tuple[tuple[str, ...], ...]


def run_processes(commands: Sequence[Sequence[str]], envs: Sequence[dict[str, str]], *, timeout: float,
                  show: Callable[[str], bool] | None = None, hang_grace: float | None = None) -> Outcome:
    """Runs the commands side by side until all succeed, one fails, or `timeout` passes.

    A process fails when it exits non-zero, is killed, or printed a Python
    traceback and then stayed silent for `hang_grace` seconds without exiting
    (JAX's distributed runtime keeps a process that raised waiting at exit
    for the others).

    Args:
        commands: One argument list per process.
        envs: One environment per process.
        timeout: Seconds before every process is stopped.
        show: Which lines to print as they come (None: print none).
        hang_grace: Seconds of silence after a traceback (default `HANG_GRACE_S`).

    Returns:
        An `Outcome`; every process has exited by then.
    """
    grace = HANG_GRACE_S if hang_grace is None else hang_grace
    deadline = time.monotonic() + timeout
    procs, readers = [], []
    output: list[list[str]] = [[] for _ in commands]
    lines: queue.Queue = queue.Queue()
    try:
        for p, (command, env) in enumerate(zip(commands, envs)):
            procs.append(_start(command, env))
            readers.append(threading.Thread(target=_read, args=(p, procs[-1].stdout, lines), daemon=True))
            readers[-1].start()
        status, failed, reason = _supervise(procs, lines, output, deadline, show, grace)
    finally:
        stop(procs)
        for reader in readers:
            reader.join(timeout=2)
        _drain(lines, output, show)
    return Outcome(status, failed, reason, tuple(p.returncode for p in procs), tuple(tuple(o) for o in output))


# On Linux each command first asks the kernel for SIGKILL when the launcher
# dies (PR_SET_PDEATHSIG), then execs: nothing survives even a killed launcher.
# (A preexec_fn would do the same, but forking a multithreaded JAX process that
# way is unsafe and JAX warns about it.)
_DIE_WITH_PARENT = (
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9); "
    "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execv(sys.argv[2], sys.argv[2:])"
)


def _start(command: Sequence[str], env: dict[str, str]) -> subprocess.Popen:
    command = list(command)
    if sys.platform.startswith("linux"):
        command = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
    return subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace", start_new_session=True, env=env)


def _read(process: int, stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put((process, line.rstrip("\n")))
    lines.put((process, None))


def _supervise(procs, lines, output, deadline, show, grace) -> tuple[str, int | None, str]:
    """Waits until all processes succeed, one fails, or the deadline passes."""
    last_seen = [time.monotonic()] * len(procs)
    while True:
        for p in _drain(lines, output, show, wait=0.05):
            last_seen[p] = time.monotonic()
        for p, proc in enumerate(procs):
            code = proc.poll()
            if code not in (None, 0):
                return "failed", p, f"Process {p} {_describe(code)}; stopped the others"
            if code is None and _raised(output[p]) and time.monotonic() - last_seen[p] > grace:
                return "failed", p, (f"Process {p} raised an error but did not exit (JAX's distributed "
                                     f"runtime waits at exit for the other processes); stopped them all")
        if all(proc.poll() == 0 for proc in procs):
            return "ok", None, ""
        if time.monotonic() > deadline:
            return "timeout", None, ""


def _raised(output: list[str]) -> bool:
    return any(line.startswith("Traceback (most recent call last)") for line in output[-200:])


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _drain(lines: queue.Queue, output, show, wait: float = 0.0) -> set[int]:
    """Moves waiting lines into `output` (and prints them); returns the processes heard from."""
    heard = set()
    try:
        item = lines.get(timeout=wait) if wait else lines.get_nowait()
        while True:
            p, line = item
            if line is not None:
                output[p].append(line)
                heard.add(p)
                say(show is not None and show(line), f"[p{p}] {line}")
            item = lines.get_nowait()
    except queue.Empty:
        return heard


def say(echo: bool, text: str) -> None:
    if echo:
        print(text, flush=True)


def stop(procs: list[subprocess.Popen], grace: float = 2.0) -> None:
    """Stops every process group: SIGTERM, then SIGKILL after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in procs:
            try:
                os.killpg(proc.pid, sig)  # start_new_session: group id = pid
            except (ProcessLookupError, PermissionError):
                pass
        end = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if all(proc.poll() is not None for proc in procs):
            break
