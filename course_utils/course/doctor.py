"""Is this machine ready for the course? `python -m course_utils doctor`.

Checks, in a few seconds: the versions of Python and the course's packages,
which devices the course will use (real or simulated) and why, a tiny real
computation on a 2 x 4 mesh, and free memory. Every problem comes with a fix;
the command exits non-zero when there is one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

MIN_PYTHON = (3, 11)
MIN_FREE_MB = 1500
PACKAGES = ("keras", "jax", "jaxlib", "jupyterlab", "ipywidgets", "matplotlib", "numpy")


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


def check_python() -> Finding:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Finding("Python", version)
    return Finding("Python", version, "install Python 3.11 or newer and run `make lab PYTHON=python3.11`")


def check_packages(pins: dict[str, str]) -> list[Finding]:
    findings = []
    for name in PACKAGES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            findings.append(Finding(name, "not installed", "run `make lab` (or pip install -r requirements.txt)"))
            continue
        wanted = pins.get(name)
        if wanted and version != wanted and not (name == "jaxlib" and version.startswith(wanted)):
            findings.append(Finding(name, f"{version}, but requirements.txt pins {wanted}",
                                    "run `pip install -r requirements.txt` in the course's environment"))
        else:
            findings.append(Finding(name, version))
    return findings


BACKEND_PTH = "course_utils_keras_backend.pth"
# Python runs a .pth line that starts with "import" at every start-up of this environment: every kernel
# (make lab, Binder, VS Code, jupyter execute) and every script gets JAX unless KERAS_BACKEND says otherwise.
_BACKEND_LINE = 'import os; os.environ.setdefault("KERAS_BACKEND", "jax")  # written by course_utils doctor\n'
_SET_BACKEND = "python -m course_utils.course.doctor --set-keras-backend"
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
    named = _another_backend_named()
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


def _another_backend_named() -> Finding | None:
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
               f"or unset XLA_FLAGS: the course sets the flags it needs itself")
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


def check_devices(n: int = 8, *, jax_probe: subprocess.Popen | None = None) -> tuple[Finding, object]:
    """Which devices the course will use, and why; also the set-up, or None when JAX cannot start.

    `jax_probe`: the fresh process of `check_jax_starts`, when `start_jax_probe` already started it.
    """
    from course_utils.devices import DeviceSetupError, setup_devices

    stopped = check_jax_starts(probe=jax_probe)
    if stopped is not None:
        return stopped, None
    try:
        setup = setup_devices(n)
    except (DeviceSetupError, ValueError, RuntimeError) as error:
        return Finding("devices", str(error), "see the message above; COURSE_PLATFORM=cpu always works"), None
    import jax

    accelerators = [d for d in jax.devices() if d.platform != "cpu"]
    why = (f"{len(accelerators)} accelerator(s) found, fewer than {n}" if setup.simulated
           else f"{len(accelerators)} accelerators found")
    forced = os.environ.get("COURSE_PLATFORM")
    if forced:
        why += f"; COURSE_PLATFORM={forced}"
    return Finding("devices", f"{setup!r} ({why})"), setup


def check_compilation_cache(setup) -> Finding:
    """Where compiled programs are kept between runs, and how much is there."""
    from course_utils.compiling import CACHE_ENV, CACHE_LIMIT_BYTES

    if setup.compilation_cache is None:
        return Finding("compilation cache", f"off ({CACHE_ENV}=off): every run compiles again")
    folder = Path(setup.compilation_cache)
    kept = [p for p in folder.glob("*-cache")]
    size = sum(p.stat().st_size for p in kept) / 2**20
    return Finding("compilation cache", f"{folder}: {len(kept)} compiled programs, {size:,.0f} MB "
                                        f"(at most {CACHE_LIMIT_BYTES / 2**30:g} GiB; delete the folder to start afresh)")


def check_mesh_computation() -> Finding:
    import jax
    import numpy as np
    from keras import distribution

    from course_utils.mesh import make_mesh

    mesh = make_mesh((2, 4), ("data", "model"))
    x = np.arange(8 * 16, dtype="float32").reshape(8, 16) / 100
    w = np.linspace(-1, 1, 16 * 32, dtype="float32").reshape(16, 32)
    start = time.perf_counter()
    xs = jax.device_put(x, distribution.TensorLayout(("data", None), mesh).backend_layout)
    ws = jax.device_put(w, distribution.TensorLayout((None, "model"), mesh).backend_layout)
    y = jax.jit(lambda a, b: a @ b)(xs, ws).block_until_ready()
    ms = (time.perf_counter() - start) * 1e3
    if np.allclose(np.asarray(y), x @ w, rtol=1e-5, atol=1e-5) and len(y.sharding.device_set) == 8:
        return Finding("2 x 4 mesh", f"a sharded matmul on 8 devices equals NumPy ({ms:.0f} ms with compilation)")
    return Finding("2 x 4 mesh", "a sharded matmul gave a wrong result",
                   "reinstall jax and jaxlib at the pinned versions; report the versions above if it persists")


def check_keras_internals() -> Finding:
    from course_utils import keras_internals

    gone = keras_internals.missing()
    if not gone:
        return Finding("Keras internals", f"all {len(keras_internals.ATTRIBUTES)} attributes present, "
                                          f"{len(keras_internals.BEHAVIOURS)} behaviours as expected")
    return Finding("Keras internals", f"this Keras lacks {'; '.join(gone)}",
                   f"install keras=={keras_internals.CHECKED_WITH}, the version the course was checked with")


def check_jax_internals() -> Finding:
    from course_utils import jax_internals

    gone = jax_internals.missing()
    if not gone:
        return Finding("JAX internals", f"all {len(jax_internals.READS)} parts the course reads as expected")
    return Finding("JAX internals", f"this JAX no longer gives {'; '.join(gone)}",
                   f"install jax and jaxlib=={jax_internals.CHECKED_WITH}, the version the course was checked with")


def check_memory() -> Finding:
    free_mb = _available_mb()
    if free_mb is None:
        return Finding("free memory", "unknown on this system")
    if free_mb >= MIN_FREE_MB:
        return Finding("free memory", f"{free_mb:,} MB available")
    return Finding("free memory", f"{free_mb:,} MB available; a lesson's kernel needs up to about 1,200 MB",
                   "close other notebooks or programs (each open lesson keeps a kernel running)")


def _available_mb() -> int | None:
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (ValueError, OSError, AttributeError):
        return None


def requirement_pins(path: Path) -> dict[str, str]:
    """Exact pins (`name==version`) read from a requirements file, if it exists."""
    if not path.exists():
        return {}
    pins = {}
    for line in path.read_text().splitlines():
        name, _, version = line.split("#", 1)[0].strip().partition("==")
        if version:
            pins[name.lower().replace("_", "-")] = version
    return pins


def run(out=sys.stdout) -> int:
    """Runs every check, prints the report, returns the exit status (0: ready)."""
    pins = requirement_pins(Path(__file__).resolve().parents[2] / "requirements.txt")
    # The two fresh processes (a bare `import keras`; JAX starting its devices) run side by side,
    # while the devices are checked here.
    backend_probe, jax_probe = start_backend_probe(), start_jax_probe()
    try:
        findings = [check_python(), *check_packages(pins)]
        # Keras in this process is on JAX unless KERAS_BACKEND says otherwise (a fresh one: check_backend)
        devices = _device_findings(jax_probe) if _another_backend_named() is None else []
        findings.append(check_backend(probe=backend_probe))
        if findings[-1].fix is None:  # devices are only worth reporting with Keras on JAX
            findings += devices
    finally:
        _stop(backend_probe, jax_probe)
    findings.append(check_memory())
    for finding in findings:
        print(finding, file=out)
    problems = [f for f in findings if f.fix is not None]
    print(f"\n{'Ready for the course.' if not problems else f'{len(problems)} problem(s) to fix (see fix: lines).'}",
          file=out)
    return 1 if problems else 0


def _device_findings(jax_probe: subprocess.Popen) -> list[Finding]:
    device_finding, setup = check_devices(jax_probe=jax_probe)
    if setup is None:
        return [device_finding]
    return [device_finding, check_compilation_cache(setup), check_mesh_computation(), check_keras_internals(),
            check_jax_internals()]


def _stop(*processes: subprocess.Popen) -> None:
    """Ends the probes no check read (a report cut short), so none outlives the doctor."""
    for process in processes:
        if process.returncode is None:
            process.kill()
            process.communicate()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m course_utils.course.doctor [--set-keras-backend]`."""
    parser = argparse.ArgumentParser(prog="python -m course_utils.course.doctor", description=__doc__.split("\n")[0])
    parser.add_argument("--set-keras-backend", action="store_true",
                        help="make JAX the Keras backend of every Python process of this environment, then stop")
    if parser.parse_args(argv).set_keras_backend:
        print(f"Keras backend for this environment: jax ({set_keras_backend()})")
        return 0
    return run()


if __name__ == "__main__":
    sys.exit(main())
