"""Keeps one launched process and everything it starts, so that none outlives the launcher (Linux).

    python keeper.py LAUNCHER_PID COMMAND...

`process_group` starts each command of a run under a keeper. The keeper asks
the kernel for two things first: SIGTERM when the launcher dies, however it
dies (`PR_SET_PDEATHSIG`), and to become the subreaper of everything below it
(`PR_SET_CHILD_SUBREAPER`), so that a process that double-forks, starts its
own session or clears its environment is re-parented to the keeper when its
parent ends, never to init. It then runs COMMAND as its only child (which the
kernel kills when the keeper dies) and waits, reaping every orphan that ends.
When the command ends, or the keeper is told to stop (SIGTERM, SIGHUP, SIGINT,
the launcher's death), it stops every process still below it (SIGTERM, then
SIGKILL after `GRACE_S`) and exits as the command did. Its signals are
blocked and waited for, never handled, so nothing interrupts that clean-up: a
launcher killed with SIGKILL sends the parent-death signal once for each
thread it had (the kernel sends it again as each dying thread hands its
children to the next), and those that come after the first stay pending.

What no keeper can catch: a process started outside the tree on the tree's
behalf (by a service such as systemd-run or at), and the descendants of a
keeper that is itself killed with SIGKILL (by hand or by the kernel's
out-of-memory killer) before it could stop them; the launcher's own search
by environment token still finds those that kept their environment.

Only the standard library is imported: a keeper costs a few MB and a few ms.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
GRACE_S = 1.0  # shorter than the launcher's, which SIGKILLs the keeper after its own grace
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
WAKE_SIGNALS = {signal.SIGCHLD, *STOP_SIGNALS}


def main(argv: list[str]) -> int:
    launcher, command = int(argv[1]), argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    for sig in WAKE_SIGNALS:  # the defaults (a parent may have ignored SIGINT), for the command to start with
        signal.signal(sig, signal.SIG_DFL)
    # Blocked and taken with sigwaitinfo, never handled: a stop that comes again during the clean-up (a launcher
    # killed with SIGKILL sends the parent-death signal once for each of its threads) stays pending, unheard.
    inherited = signal.pthread_sigmask(signal.SIG_BLOCK, WAKE_SIGNALS)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != launcher:  # the launcher died before the request took effect
        return 1
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)

    def as_a_command() -> None:  # in the command's process, before it starts
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.pthread_sigmask(signal.SIG_SETMASK, inherited)

    try:
        child = subprocess.Popen(command, preexec_fn=as_a_command)
    except OSError as error:
        print(f"keeper: cannot start {command[0]!r}: {error}", file=sys.stderr, flush=True)
        return _exit_as(stop_below(os.getpid(), None, 127))
    code = _wait_for(child.pid)
    return _exit_as(stop_below(os.getpid(), child.pid if code is None else None, code))


def _wait_for(child: int) -> int | None:
    """Reaps every orphan that ends until the command ends (its exit code) or a stop signal comes (None)."""
    while True:
        try:
            while (found := os.waitpid(-1, os.WNOHANG))[0]:  # the command, or an orphan re-parented here
                if found[0] == child:
                    return os.waitstatus_to_exitcode(found[1])
        except ChildProcessError:  # no child at all (cannot happen before the command is reaped): stop
            return None
        if signal.sigwaitinfo(WAKE_SIGNALS).si_signo != signal.SIGCHLD:
            return None


def stop_below(keeper: int, child: int | None, code: int | None) -> int:
    """Stops every descendant, reaping them all; returns the command's exit code."""
    _signal_descendants(keeper, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while True:
        try:
            while (found := os.waitpid(-1, os.WNOHANG))[0]:
                if found[0] == child:
                    code = os.waitstatus_to_exitcode(found[1])
        except ChildProcessError:  # nothing left below: every orphan was re-parented here and reaped
            return -signal.SIGTERM if code is None else code
        if time.monotonic() > deadline:
            _signal_descendants(keeper, signal.SIGKILL)
        time.sleep(0.02)


def _signal_descendants(root: int, sig: int) -> None:
    parents: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            parents.setdefault(int(fields[1]), []).append(int(entry))
    todo = list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        todo += parents.get(pid, [])
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _exit_as(code: int) -> int:
    """Ends this process the way the command ended: the same exit code, or killed by the same signal."""
    sys.stdout.flush()
    if code < 0:
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})  # a stop signal is blocked: it ends this process here
        time.sleep(1)  # the signal arrives meanwhile
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
