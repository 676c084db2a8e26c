"""Local processes run as one job: output streamed with its process, all stopped together.

`run_processes` starts each command in its own process group, prints every
output line as "[pN] ..." as it comes, and waits until every process has
succeeded, one has failed (judged by its exit status alone), or the time is
up. On every way out (success, failure, timeout, KeyboardInterrupt, a broken
pipe) it stops every process it started and every process those started.
Used by `course_utils.multiprocess.launcher`.

On Linux each command runs under a keeper (`keeper.py`): the subreaper of
everything below it, told by the kernel when the launcher dies, even by
SIGKILL. A process that double-forks, starts its own session or clears its
environment is re-parented to its keeper, which stops it with the rest. Each
run also marks its processes with a token in their environment (`TREE_ENV`),
which every descendant inherits; the clean-up finds the tree by that token and
by parent links in /proc, and kills it again and again until no member is
left. Elsewhere only the process groups are stopped.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

KEEPER = str(Path(__file__).with_name("keeper.py"))
QUIET_NOTICE_S = 30.0  # say so when every process has been silent this long
TREE_ENV = "COURSE_LAUNCH_TREE"


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
                  show: Callable[[str], bool] | None = None) -> Outcome:
    """Runs the commands side by side until all succeed, one fails, or `timeout` passes.

    A process fails when it exits non-zero or is killed; what it prints
    never counts (a traceback it caught and printed is not a failure).

    Args:
        commands: One argument list per process.
        envs: One environment per process.
        timeout: Seconds before every process is stopped.
        show: Which lines to print as they come (None: print none).

    Returns:
        An `Outcome`; every process has exited by then. At a timeout its
        reason names the processes still running and how long each had been silent.
    """
    deadline = time.monotonic() + timeout
    procs, readers = [], []
    output: list[list[str]] = [[] for _ in commands]
    lines: queue.Queue = queue.Queue()
    token = uuid.uuid4().hex
    try:
        for p, (command, env) in enumerate(zip(commands, envs)):
            procs.append(_start(command, {**env, TREE_ENV: token}))
            readers.append(threading.Thread(target=_read, args=(p, procs[-1].stdout, lines), daemon=True))
            readers[-1].start()
        status, failed, reason = _supervise(procs, lines, output, deadline, show)
    finally:
        with _uninterrupted():  # a second Ctrl-C must not cut the clean-up short
            stop(procs, token=token)
        for reader in readers:
            reader.join(timeout=2)
        _drain(lines, output, show)  # a broken pipe may raise here: every process is stopped already
    return Outcome(status, failed, reason, tuple(p.returncode for p in procs), tuple(tuple(o) for o in output))


def _start(command: Sequence[str], env: dict[str, str]) -> subprocess.Popen:
    command = list(command)
    if sys.platform.startswith("linux"):
        command = [sys.executable, "-S", KEEPER, str(os.getpid()), *command]
    return subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace", start_new_session=True, env=env)


def _read(process: int, stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put((process, line.rstrip("\n")))
    lines.put((process, None))


def _supervise(procs, lines, output, deadline, show) -> tuple[str, int | None, str]:
    """Waits until all processes succeed, one fails, or the deadline passes."""
    last_seen = [time.monotonic()] * len(procs)
    noticed = time.monotonic()
    while True:
        for p in _drain(lines, output, show, wait=0.05):
            last_seen[p] = time.monotonic()
        now = time.monotonic()
        if show is not None and now - max(max(last_seen), noticed) > QUIET_NOTICE_S:
            noticed = now
            say(True, f"[launch] no output for {QUIET_NOTICE_S:g} s from any process; still waiting "
                      f"(stopping all at the timeout, in {max(0.0, deadline - now):.0f} s).")
        for p, proc in enumerate(procs):
            code = proc.poll()
            if code not in (None, 0):
                return "failed", p, f"Process {p} {_describe(code)}; stopped the others"
        if all(proc.poll() == 0 for proc in procs):
            return "ok", None, ""
        if now > deadline:
            return "timeout", None, _still_running(procs, output, last_seen, now)


def _still_running(procs, output, last_seen, now) -> str:
    """Which processes a timeout caught, each with how long it had been silent and its last line."""
    parts = []
    for p, proc in enumerate(procs):
        if proc.poll() is None:
            last = next((line for line in reversed(output[p]) if line.strip()), None)
            said = f"since its last line {last[:80]!r}" if last else "having printed nothing"
            parts.append(f"process {p}, silent for {now - last_seen[p]:.0f} s {said}")
    return "Still running at the timeout: " + "; ".join(parts) + "."


@contextlib.contextmanager
def _uninterrupted():
    """Holds off SIGINT and SIGTERM for a moment (only the main thread can set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


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


def stop(procs: list[subprocess.Popen], grace: float = 2.0, *, token: str | None = None) -> None:
    """Stops every process group and the whole tree: SIGTERM, then SIGKILL after `grace` seconds.

    Args:
        procs: The processes started.
        grace: Seconds between SIGTERM and SIGKILL.
        token: The run's `TREE_ENV` value; every live process carrying it (or
            below `procs` by parent links) is killed too, repeatedly until
            none is left.
    """
    # Gather the tree before anything exits: a child's children are found by parent links only while it lives.
    members = tree(procs, token)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in procs:
            try:
                os.killpg(proc.pid, sig)  # start_new_session: group id = pid
            except (ProcessLookupError, PermissionError):
                pass
        _signal_all(members, sig)
        end = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        members = tree(procs, token)
        if not members and all(proc.poll() is not None for proc in procs):
            return
    for _ in range(100):  # whatever the tree still holds, or started meanwhile, until nothing is left
        _signal_all(members, signal.SIGKILL)
        time.sleep(0.02)
        members = tree(procs, token)
        if not members:
            return


def tree(procs: Sequence[subprocess.Popen], token: str | None) -> dict[int, int]:
    """Live processes of a run (pid -> start time): below `procs` by parent links, or carrying `token`.

    Reads /proc (Linux); elsewhere it finds nothing and process groups alone are stopped.
    """
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [p.pid for p in procs if p.poll() is None]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    if token:
        mark = f"{TREE_ENV}={token}".encode()
        found |= {pid for pid in table if pid not in found and mark in _environment_of(pid)}
    found.discard(os.getpid())
    return {pid: table[pid][1] for pid in found if table[pid][2] != "Z"}  # zombies are dead already


def _process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time, state) of every process /proc shows."""
    table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in filter(str.isdigit, entries):
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()  # the name before ")" may hold spaces
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0].decode())
    return table


def _environment_of(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return file.read().split(b"\0")
    except OSError:
        return []


def _signal_all(members: dict[int, int], sig: int) -> None:
    """Signals each member still running with the same start time (never a new process that reused the pid)."""
    table = _process_table()
    for pid, started in members.items():
        if pid in table and table[pid][1] == started:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
