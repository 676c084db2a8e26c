"""What a fresh process of the course's environment does: which Keras backend a bare `import keras` picks, and
whether JAX starts its devices.

`make doctor` (`course_utils.course.environment.doctor`) asks both in processes of their own, started side by side
while it checks this one: a kernel started by VS Code, Binder or `jupyter execute` inherits nothing of
this shell, and a bad XLA flag ends the process that starts JAX. `set_keras_backend` writes the
start-up file that makes JAX every process's Keras backend (`make lab` and Binder's postBuild run it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    """One line of the report: what was checked, what was seen, and the fix if it is a problem."""

    check: str
    seen: str
    fix: str | None = None

    def __str__(self) -> str:
        mark = "ok " if self.fix is None else "NO "
        line = f"[{mark}] {self.check}: {self.seen}"
        return line if self.fix is None else f"{line}\n       fix: {self.fix}"


BACKEND_PTH = "course_utils_keras_backend.pth"
# Python runs a .pth line that starts with "import" at every start-up of this environment: every kernel
# (make lab, Binder, VS Code, jupyter execute) and every script gets JAX unless KERAS_BACKEND says otherwise.
_BACKEND_LINE = 'import os; os.environ.setdefault("KERAS_BACKEND", "jax")  # written by course_utils doctor\n'
_SET_BACKEND = "python -m course_utils.course doctor --set-keras-backend"
_BARE_IMPORT = "import keras; print('backend=' + keras.backend.backend())"


def set_keras_backend(site_packages: str | os.PathLike | None = None) -> Path:
    """Makes JAX the Keras backend of every Python process of this environment (a .pth file).

    `make lab`, `make test` and Binder's postBuild run it once. An explicit
    `KERAS_BACKEND` still wins.

    Args:
        site_packages: Where to write; defaults to this interpreter's site-packages.

    Returns:
        The file written.
    """
    folder = Path(site_packages or sysconfig.get_paths()["purelib"])
    path = folder / BACKEND_PTH
    path.write_text(_BACKEND_LINE)
    return path


def check_backend(python: Sequence[str] = (sys.executable,), env: dict[str, str] | None = None, *,
                  probe: subprocess.Popen | None = None) -> Finding:
    """What a bare `import keras` picks in a fresh process of this environment, KERAS_BACKEND unset.

    Kernels started by VS Code, Binder or `jupyter execute` do not inherit
    this shell's variables, so the environment itself must pick JAX.

    Args:
        python: The interpreter's command line.
        env: The environment the fresh process starts from (this one's by default).
        probe: That process, already started by `start_backend_probe` (`run` starts it beside
            the other checks).
    """
    named = another_backend_named()
    if named is not None:
        return named
    run = _finish(probe or start_backend_probe(python, env), 120)
    if run is None:
        picked, why = None, "it did not finish in 120 s"
    else:
        picked = next((line[8:] for line in run.stdout.splitlines() if line.startswith("backend=")), None)
        why = (run.stderr.strip().splitlines() or ["no output"])[-1]
    if picked == "jax":
        return Finding("Keras backend", "jax (a bare `import keras` in a fresh process picks it)")
    seen = (f"a bare `import keras` in a fresh process picks {picked!r}" if picked
            else f"a bare `import keras` in a fresh process fails: {why}")
    return Finding("Keras backend", f"{seen}, not 'jax' (no KERAS_BACKEND set)",
                   f"run `{_SET_BACKEND}` in the course's environment (make lab does it)")


def another_backend_named() -> Finding | None:
    """The problem when this process's KERAS_BACKEND names a backend other than JAX; else None."""
    backend = os.environ.get("KERAS_BACKEND")
    if backend in (None, "jax"):
        return None
    return Finding("Keras backend", f"KERAS_BACKEND={backend!r}", "unset KERAS_BACKEND or set it to 'jax'")


def start_backend_probe(python: Sequence[str] = (sys.executable,),
                        env: dict[str, str] | None = None) -> subprocess.Popen:
    """Starts the fresh process of `check_backend`: a bare `import keras`, KERAS_BACKEND unset."""
    fresh = {k: v for k, v in (os.environ if env is None else env).items() if k != "KERAS_BACKEND"}
    return _start([*python, "-c", _BARE_IMPORT], env=fresh)


_START_JAX = "import jax; print('setup=' + str(len(jax.devices())))"  # starts JAX's backends, as setup_devices will


def check_jax_starts(python: Sequence[str] = (sys.executable,), *,
                     probe: subprocess.Popen | None = None) -> Finding | None:
    """None when JAX starts its devices in a fresh process of this environment; else what stopped it.

    Tried in a separate process first: an unknown flag in XLA_FLAGS ends the
    process that starts JAX (XLA aborts, nothing to catch), and a platform
    named in JAX_PLATFORMS that this machine lacks raises deep inside JAX.
    `probe` is that process, when `start_jax_probe` already started it.
    """
    run = _finish(probe or start_jax_probe(python), 300)
    if run is None:
        return Finding("devices", "starting JAX did not finish in 300 s", "run `make doctor` again; restart the machine")
    if run.returncode == 0 and "setup=" in run.stdout:
        return None
    lines = [line.strip() for line in run.stderr.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if "Error" in line or "flag" in line),
                lines[-1] if lines else f"exit status {run.returncode}")
    if "XLA_FLAGS" in last:
        fix = (f"remove the flag it names from XLA_FLAGS (now {os.environ.get('XLA_FLAGS', '')!r}), "
               f"or unset XLA_FLAGS: the course needs none")
    elif os.environ.get("JAX_PLATFORMS"):
        fix = (f"unset JAX_PLATFORMS (now {os.environ['JAX_PLATFORMS']!r}): the course picks its devices itself; "
               f"COURSE_PLATFORM=cpu forces simulated devices, COURSE_PLATFORM=gpu insists on GPUs")
    else:
        fix = "see the message; COURSE_PLATFORM=cpu always works"
    return Finding("devices", f"JAX cannot start: {last[:300]}", fix)


def start_jax_probe(python: Sequence[str] = (sys.executable,)) -> subprocess.Popen:
    """Starts the fresh process of `check_jax_starts`: JAX starting its devices."""
    return _start([*python, "-c", _START_JAX])


def _start(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(process: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess | None:
    """The process's outputs once it ends; None (and the process killed) when it runs past `timeout`."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop(*processes: subprocess.Popen) -> None:
    """Ends the probes no check read (a report cut short), so none outlives the doctor."""
    for process in processes:
        if process.returncode is None:
            process.kill()
            process.communicate()
