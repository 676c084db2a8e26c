"""Is this machine ready for the course? `python -m course_utils.course doctor`.

Checks, in a few seconds: the versions of Python and the course's packages,
the Keras backend a fresh process picks (`fresh_process`),
which devices the course will use (real or simulated) and why, whether XLA_FLAGS is set, a tiny real
computation on a 2 x 4 mesh, and free memory. Every problem comes with a fix;
the command exits non-zero when there is one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

# The checks made in fresh processes of this environment live in fresh_process; they are imported here
# under the same names (`doctor.check_backend`, `doctor.set_keras_backend`), as before they moved.
from course_utils.course.environment.fresh_process import (Finding, another_backend_named, check_backend, check_jax_starts,
                                               set_keras_backend, start_backend_probe, start_jax_probe, stop)

MIN_PYTHON = (3, 11)
MIN_FREE_MB = 1500
PACKAGES = ("keras", "jax", "jaxlib", "jupyterlab", "ipywidgets", "matplotlib", "numpy")


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


def check_devices(n: int = 8, *, jax_probe: subprocess.Popen | None = None) -> tuple[Finding, object]:
    """Which devices the course will use, and why; also the set-up, or None when JAX cannot start.

    `jax_probe`: the fresh process of `check_jax_starts`, when `start_jax_probe` already started it.
    """
    from course_utils.xla_settings import XlaFlagsWarning
    from course_utils.device_choice import DeviceSetupError
    from course_utils.devices import setup_devices
    from course_utils.program_cache import CacheWarning

    stopped = check_jax_starts(probe=jax_probe)
    if stopped is not None:
        return stopped, None
    try:
        with warnings.catch_warnings():  # the report says them (check_xla_flags, check_compilation_cache)
            warnings.simplefilter("ignore", XlaFlagsWarning)
            warnings.simplefilter("ignore", CacheWarning)
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
    """Where compiled programs are kept between runs, and how much is there; a folder that cannot be used."""
    from course_utils.xla_settings import CACHE_ENV, CACHE_FIX, CACHE_LIMIT_BYTES, cache_problem, compilation_cache_dir
    from course_utils.program_cache import SUFFIX

    if compilation_cache_dir() is None:
        return Finding("compilation cache", f"off ({CACHE_ENV}=off): every run compiles again")
    problem = cache_problem()
    if problem or setup.compilation_cache is None:
        return Finding("compilation cache", f"{problem or 'not in use'}: every run compiles again", CACHE_FIX)
    folder = Path(setup.compilation_cache)
    kept = list(folder.glob("*" + SUFFIX))
    size = sum(p.stat().st_size for p in kept) / 2**20
    return Finding("compilation cache", f"{folder}: {len(kept)} compiled programs, {size:,.0f} MB, each checked "
                                        f"when read (at most {CACHE_LIMIT_BYTES / 2**30:g} GiB; delete the folder "
                                        f"to start afresh)")


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
    pins = requirement_pins(Path(__file__).resolve().parents[3] / "requirements.txt")
    # The two fresh processes (a bare `import keras`; JAX starting its devices) run side by side,
    # while the devices are checked here.
    backend_probe, jax_probe = start_backend_probe(), start_jax_probe()
    try:
        findings = [check_python(), *check_packages(pins)]
        # Keras in this process is on JAX unless KERAS_BACKEND says otherwise (a fresh one: check_backend)
        devices = _device_findings(jax_probe) if another_backend_named() is None else []
        findings.append(check_backend(probe=backend_probe))
        if findings[-1].fix is None:  # devices are only worth reporting with Keras on JAX
            findings += devices
    finally:
        stop(backend_probe, jax_probe)
    findings.append(check_memory())
    for finding in findings:
        print(finding, file=out)
    problems = [f for f in findings if f.fix is not None]
    print(f"\n{'Ready for the course.' if not problems else f'{len(problems)} problem(s) to fix (see fix: lines).'}",
          file=out)
    return 1 if problems else 0


def check_xla_flags() -> Finding:
    """Whether XLA_FLAGS is set: the lessons' numbers were checked with XLA's defaults."""
    from course_utils.xla_settings import XLA_FLAGS_FIX, XLA_FLAGS_RISK, instruction_sets, xla_flags

    flags = xla_flags()
    if not flags:
        sets = instruction_sets()
        cpu = f", compiling for this CPU's {sets[-1]}" if sets else ""
        return Finding("XLA flags", f"none set: XLA's defaults{cpu}, with which every lesson's numbers were checked "
                                    f"(the test suite checks them for every x86 instruction set XLA compiles for)")
    return Finding("XLA flags", f"XLA_FLAGS={flags!r}: {XLA_FLAGS_RISK}", XLA_FLAGS_FIX)


def _device_findings(jax_probe: subprocess.Popen) -> list[Finding]:
    device_finding, setup = check_devices(jax_probe=jax_probe)
    if setup is None:  # JAX could not start (a flag it does not know, a platform it lacks), or too few devices
        return [device_finding]
    return [device_finding, check_xla_flags(), check_compilation_cache(setup), check_mesh_computation(),
            check_keras_internals(), check_jax_internals()]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m course_utils.course doctor [--set-keras-backend]`."""
    parser = argparse.ArgumentParser(prog="python -m course_utils.course doctor", description=__doc__.split("\n")[0])
    parser.add_argument("--set-keras-backend", action="store_true",
                        help="make JAX the Keras backend of every Python process of this environment, then stop")
    if parser.parse_args(argv).set_keras_backend:
        print(f"Keras backend for this environment: jax ({set_keras_backend()})")
        return 0
    return run()
