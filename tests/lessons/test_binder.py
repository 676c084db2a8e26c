"""Reproduces a Binder launch as closely as this machine allows.

repo2docker builds an environment from `binder/` alone: the Python of `runtime.txt`, `pip install -r
binder/requirements.txt`, then `postBuild`; each kernel starts through `binder/start`. The session's
`binder_env` does the same in a fresh virtual environment, and the learner's run of every lesson
(`lesson_runs.learner`) happens in it; here each kernel's peak memory is checked against Binder's
limits (kernels are restarted at 2 GB; the course allows 1.2 GB).
"""

import subprocess

import pytest

from course_utils.course.lesson_parts import lessons

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
KERNEL_LIMIT_MB = 1200
USER_LIMIT_MB = 2000


def test_the_binder_environment_has_the_pinned_stack(binder_env):
    bin_dir, env = binder_env
    code = "import course_utils, keras, jax; print(course_utils.__file__, keras.__version__, jax.__version__)"
    out = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=ROOT / "notebooks", env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == str(ROOT / "course_utils" / "__init__.py")  # importable from notebooks/
    pins = dict(line.split("==") for line in (BINDER / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert out[1:] == [pins["keras"], pins["jax"]]


@pytest.mark.lesson_runs("learner")
def test_every_lesson_runs_in_the_binder_environment_within_memory(binder_env, lesson_runs):
    bin_dir, _ = binder_env
    runs = [lesson_runs.learner(path) for path in lessons(ROOT / "notebooks")]
    assert len(runs) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    for run in runs:
        print(f"{run.path.name:32} {run.seconds:6.1f} s {run.peak_rss_mb:6.0f} MB kernel "
              f"{run.child_peak_rss_mb:6.0f} MB largest child")
    where = subprocess.run([str(bin_dir / "python"), "-c", "import sys; print(sys.prefix)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert runs[0].kernel_prefix == where  # the kernel really was Binder's environment's
    heavy = {r.path.name: round(r.peak_rss_mb) for r in runs if r.peak_rss_mb >= KERNEL_LIMIT_MB}
    assert heavy == {}, f"kernels over {KERNEL_LIMIT_MB} MB: {heavy}"
    # lesson 06 runs two worker processes at once beside its kernel: all together must fit Binder's 2 GB
    together = {r.path.name: round(r.peak_rss_mb + 2 * r.child_peak_rss_mb) for r in runs}
    assert max(together.values()) < USER_LIMIT_MB, together
