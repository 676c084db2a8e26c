"""Starts a multi-process run on this machine: N processes, each with its own simulated CPU devices.

    python -m course_utils.launch --processes 2 --devices-per-process 4 --mesh 2x4 SCRIPT [ARGS...]

Each process runs SCRIPT with the `KERAS_DISTRIBUTION_*` variables that
`keras.distribution.initialize()` reads; process 0 hosts JAX's coordinator on
127.0.0.1 at a free port. Every output line is shown with its process, e.g.
"[p1] ...". When one process fails (exits non-zero or is killed), the others
are stopped at once: JAX's distributed runtime would otherwise keep them
waiting for it. Each script runs under `run_script.py`, which ends a process
that raised at once, with exit status 1, so a failure is judged by exit status
alone. Every process runs under a keeper in its own process group, and the
whole tree is stopped on every way out (see `process_group`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from course_utils.multiprocess.arguments import (  # EXAMPLE and LaunchError belong to the launcher's API
    EXAMPLE, HOST, LaunchError, check_port, check_port_number, validate, whole)
from course_utils.multiprocess.worker import ENV_ADDRESSES, ENV_DEVICES, ENV_PROCESS_ID, ENV_PROCESSES
from course_utils.multiprocess.process_group import run_processes, say

GLOO_PREFIX = "[Gloo] "
_BIND_FAILED = "Failed to add port to server"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
RUN_SCRIPT = str(Path(__file__).with_name("run_script.py"))


class LaunchFailed(RuntimeError):
    """A launched run did not finish well; `.result` holds what happened."""

    def __init__(self, result: LaunchResult):
        super().__init__(result.message())
        self.result = result


@dataclass(frozen=True)
class LaunchResult:
    """What a multi-process run did.

    Attributes:
        status: "ok", "failed" or "timeout".
        returncodes: Exit code of every process (negative: killed by that signal).
        lines: Every output line of every process, without the "[pN]" prefix.
        failed: The process that failed first, or None.
        reason: What happened, in a sentence.
        port: The coordinator's port on 127.0.0.1.
        seconds: Wall time of the run.
    """

    status: str
    returncodes: tuple[int, ...]
    lines: tuple[tuple[str, ...], ...]
    failed: int | None
    reason: str
    port: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def last_lines(self, process: int, n: int = 8) -> tuple[str, ...]:
        """The last `n` output lines of `process`, leaving out gloo's connection notices."""
        return tuple(line for line in self.lines[process] if not line.startswith(GLOO_PREFIX))[-n:]

    def records(self, process: int) -> list[dict]:
        """Output lines of `process` that are JSON objects, parsed."""
        import json

        found = []
        for line in self.lines[process]:
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
        return found

    def message(self) -> str:
        """A readable account: the status and, on failure, the failed process's last lines."""
        text = f"{self.reason} ({self.seconds:.1f} s, exit codes {list(self.returncodes)})"
        if self.failed is not None:
            tail = "\n".join(f"    [p{self.failed}] {line}" for line in self.last_lines(self.failed))
            text += f"\n  Last lines of process {self.failed}:\n{tail}"
        return text

    def __repr__(self) -> str:
        return f"LaunchResult({self.status}: {self.message()})"


def launch(script: str | os.PathLike, args: Sequence[str] = (), *, processes: int, devices_per_process: int,
           mesh: Sequence[int] | None = None, timeout: float = 600.0, port: int | None = None,
           echo: bool = True, hide: tuple[str, ...] = (GLOO_PREFIX,), check: bool = False,
           retries: int = 2) -> LaunchResult:
    """Runs `script` as `processes` local processes forming one multi-process JAX run.

    Args:
        script: The Python file each process runs.
        args: Command-line arguments for the script.
        processes: How many processes (>= 1).
        devices_per_process: Simulated CPU devices of each process.
        mesh: The mesh shape the script needs, e.g. `(2, 4)`; checked
            against processes x devices_per_process.
        timeout: Seconds before every process is stopped.
        port: The coordinator's port; None picks a free one (and picks again
            if the coordinator cannot bind it).
        echo: Print every output line as it comes, prefixed "[pN]".
        hide: Lines starting with these are kept in the result but not
            printed (gloo announces every connection it opens).
        check: Raise `LaunchFailed` unless the run succeeded.
        retries: New ports to try when an auto-picked port cannot be bound.

    Returns:
        A `LaunchResult`.

    Raises:
        LaunchError: Bad arguments; nothing was started.
        LaunchFailed: With `check=True`, a process failed or the run timed out.

    Example:
        >>> result = launch(EXAMPLE, processes=2, devices_per_process=4, mesh=(2, 4))
        >>> result.records(0)[-1]["global_devices"]
        8
    """
    processes, devices_per_process = whole(processes), whole(devices_per_process)
    mesh = mesh if mesh is None or isinstance(mesh, (str, int)) else tuple(whole(n) for n in mesh)
    port, retries = (None if port is None else whole(port)), whole(retries)
    script = validate(script, processes, devices_per_process, mesh, timeout)
    if port is not None:
        check_port_number(port)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise LaunchError(f"retries must be a whole number >= 0. Received: retries={retries!r}.")
    for attempt in range(retries + 1):
        chosen = check_port(port) if port is not None else free_port()
        result = _run(script, tuple(str(a) for a in args), processes, devices_per_process, chosen,
                      timeout, _shown_lines(echo, hide))
        bind_failed = result.failed == 0 and any(_BIND_FAILED in line for line in result.lines[0])
        if not bind_failed:
            break
        if port is not None or attempt == retries:
            result = replace(result, reason=f"The coordinator could not listen on {HOST}:{chosen} "
                                     f"(port in use?). Omit the port to let the launcher pick a free one.")
            break
        say(echo, f"[launch] {HOST}:{chosen} could not be bound; trying another port.")
    if check and not result.ok:
        raise LaunchFailed(result)
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _environment(process: int, processes: int, devices: int, port: int) -> dict[str, str]:
    env = dict(os.environ)
    address = f"{HOST}:{port}"
    env.update({
        ENV_ADDRESSES: address, ENV_PROCESSES: str(processes), ENV_PROCESS_ID: str(process),
        "JAX_COORDINATOR_BIND_ADDRESS": address,  # JAX would listen on every interface
        ENV_DEVICES: str(devices), "JAX_NUM_CPU_DEVICES": str(devices),
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo", "JAX_PLATFORMS": "cpu", "COURSE_PLATFORM": "cpu",
        "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p),
    })
    return env


def _shown_lines(echo: bool, hide: tuple[str, ...]) -> Callable[[str], bool] | None:
    """Which output lines to print as they come (None: none)."""
    return (lambda line: not line.startswith(hide)) if echo else None


def _run(script: Path, args: tuple[str, ...], processes: int, devices: int, port: int, timeout: float,
         show: Callable[[str], bool] | None) -> LaunchResult:
    start = time.monotonic()
    command = [sys.executable, "-u", RUN_SCRIPT, str(script), *args]
    outcome = run_processes([command] * processes,
                            [_environment(p, processes, devices, port) for p in range(processes)],
                            timeout=timeout, show=show)
    reason = {"ok": f"All {processes} process{'es' * (processes > 1)} finished",
              "timeout": f"Timed out after {timeout:g} s; stopped all {processes} processes. {outcome.reason}"}.get(
                  outcome.status, outcome.reason)
    return LaunchResult(outcome.status, outcome.returncodes, outcome.lines, outcome.failed, reason, port,
                        time.monotonic() - start)


def _parse_mesh(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(n) for n in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected a mesh shape like 2x4. Received: {text!r}")
    return shape


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code (0 ok, 1 failed, 2 bad arguments, 124 timeout, 130 stopped,
    141 its output was closed, e.g. by `| head`)."""
    parser = argparse.ArgumentParser(prog="python -m course_utils.launch", description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--devices-per-process", type=int, required=True)
    parser.add_argument("--mesh", type=_parse_mesh, help="mesh shape the script needs, e.g. 2x4")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--port", type=int, help="coordinator port on 127.0.0.1 (default: a free one)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    # Handled however the launcher was started: a script's `launch ... &` inherits SIGINT as ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stop_signal in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop_signal, _interrupt)
    try:
        result = launch(opts.script, opts.args, processes=opts.processes, mesh=opts.mesh, port=opts.port,
                        devices_per_process=opts.devices_per_process, timeout=opts.timeout)
    except LaunchError as error:
        print(f"launch: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("launch: interrupted; stopped every process.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): every process is stopped; end quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 128 + signal.SIGPIPE
    print(f"launch: {result.message()}", file=sys.stderr)
    return {"ok": 0, "timeout": 124}.get(result.status, 1)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
