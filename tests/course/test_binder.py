"""Reproduces a Binder launch as closely as this machine allows.

repo2docker builds an environment from `binder/` alone: the Python of
`runtime.txt`, `pip install -r binder/requirements.txt`, then `postBuild`; each
kernel starts through `binder/start`. This test does the same in a fresh virtual
environment, then runs every lesson in it and checks each kernel's peak memory
against Binder's limits (kernels are restarted at 2 GB; the course allows 1.2 GB).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
KERNEL_LIMIT_MB = 1200
USER_LIMIT_MB = 2000


@pytest.fixture(scope="module")
def binder_env(tmp_path_factory):
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    python = shutil.which(f"python{version}")
    if python is None:  # the pins and steps are still checked, with this test run's Python
        python = sys.executable
        print(f"binder/runtime.txt asks for Python {version}, not found here; using {sys.version.split()[0]}")
    env_dir = tmp_path_factory.mktemp("binder") / "env"
    subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
    bin_dir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(env_dir)}
    env.pop("PYTHONPATH", None)
    run = lambda *cmd: subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=1200)
    run(str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-r", str(BINDER / "requirements.txt"))
    run("bash", str(BINDER / "postBuild"))
    return bin_dir, env


def test_the_binder_environment_has_the_pinned_stack(binder_env):
    bin_dir, env = binder_env
    code = "import course_utils, keras, jax; print(course_utils.__file__, keras.__version__, jax.__version__)"
    out = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=ROOT / "notebooks", env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == str(ROOT / "course_utils" / "__init__.py")  # importable from notebooks/
    pins = dict(line.split("==") for line in (BINDER / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert out[1:] == [pins["keras"], pins["jax"]]


def test_every_lesson_runs_in_the_binder_environment_within_memory(binder_env, tmp_path):
    bin_dir, env = binder_env
    figures = tmp_path / "bench.json"
    result = subprocess.run(
        ["bash", str(BINDER / "start"), str(bin_dir / "python"), "-m", "course_utils.course.bench", "notebooks",
         "--json", str(figures)],
        cwd=ROOT, env={k: v for k, v in env.items() if k != "COURSE_PLATFORM"},
        capture_output=True, text=True, timeout=1800,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = json.loads(figures.read_text())
    assert len(runs) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    heavy = {r["notebook"]: round(r["peak_rss_mb"]) for r in runs if r["peak_rss_mb"] >= KERNEL_LIMIT_MB}
    assert heavy == {}, f"kernels over {KERNEL_LIMIT_MB} MB: {heavy}"
    # lesson 06 runs two worker processes at once beside its kernel: all together must fit Binder's 2 GB
    together = {r["notebook"]: round(r["peak_rss_mb"] + 2 * r["child_peak_rss_mb"]) for r in runs}
    assert max(together.values()) < USER_LIMIT_MB, together
