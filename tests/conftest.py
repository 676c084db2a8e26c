"""The test run uses 8 simulated CPU devices, set up before anything starts JAX.

Every lesson runs at most twice in a test session (`lesson_runs`): as a learner gets it, in the
environment Binder would build (`binder_env`), and with its solutions filled in, in this one.
Every test that needs an executed lesson reads those runs. All runs share this environment's
compilation cache, so the second run of a lesson, and every run of a later session, starts from
the programs the first one compiled.

Browser tests share one headless Chromium (Debian's, driven by Playwright).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["COURSE_PLATFORM"] = "cpu"
os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils import setup_devices  # noqa: E402
from course_utils.devices import CACHE_ENV, compilation_cache_dir  # noqa: E402

SETUP = setup_devices(8)
# Kernels and subprocesses of every environment the tests start share this one's cache.
if SETUP.compilation_cache:
    os.environ[CACHE_ENV] = SETUP.compilation_cache
ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
BINDER_KERNEL = "course-binder"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


_BUILT: dict = {}


@pytest.fixture(scope="session")
def binder_env(tmp_path_factory):
    """An environment built as repo2docker builds Binder's, from `binder/` alone, and a kernel in it.

    Returns:
        (its bin folder, the environment variables of a shell in it).
    """
    return _binder_env(tmp_path_factory)


def _binder_env(tmp_path_factory):
    """An environment built as repo2docker builds Binder's, from `binder/` alone, and a kernel in it.

    The Python of `runtime.txt` (this one's when that is not installed), `pip install -r
    binder/requirements.txt`, then `postBuild`; its kernels start through `binder/start`, as a
    kernelspec named `course-binder`.

    Built once per session.
    """
    if "binder" in _BUILT:
        return _BUILT["binder"]
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    python = shutil.which(f"python{version}")
    if python is None:  # the pins and steps are still checked, with this test run's Python
        python = sys.executable
        print(f"binder/runtime.txt asks for Python {version}, not found here; using {sys.version.split()[0]}")
    home = tmp_path_factory.mktemp("binder")
    env_dir = home / "env"
    subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
    bin_dir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(env_dir)}
    env.pop("PYTHONPATH", None)
    run = lambda *cmd: subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=1200)
    run(str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-r", str(BINDER / "requirements.txt"))
    run("bash", str(BINDER / "postBuild"))
    spec = home / "jupyter" / "kernels" / BINDER_KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["bash", str(BINDER / "start"), str(bin_dir / "python"), "-m", "ipykernel_launcher",
                 "-f", "{connection_file}"],
        "display_name": "Binder's environment", "language": "python",
        "env": {"PATH": env["PATH"], "VIRTUAL_ENV": str(env_dir)}}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(home / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    _BUILT["binder"] = bin_dir, env
    return _BUILT["binder"]


class LessonRuns:
    """Each lesson run at most twice per session, on demand: as a learner gets it and solved.

    The learner's run happens in Binder's environment (`binder_env`), with the exercises
    untouched; the solved run in this environment, with every worked solution filled in. Both
    end with `VERDICTS_CELL`, so `run.verdicts()` gives every checker's verdict. Each run gets a
    temporary folder of its own as the kernel's TMPDIR (`tmpdir[stem, solved]`).
    """

    def __init__(self, folder: Path, binder_env):
        self.folder, self.binder_env = folder, binder_env
        self.tmpdir: dict[tuple[str, bool], Path] = {}
        self._runs: dict[tuple[str, bool], object] = {}

    def learner(self, path):
        return self._run(Path(path), solved=False)

    def solved(self, path):
        return self._run(Path(path), solved=True)

    def _run(self, path: Path, *, solved: bool):
        from course_utils.course.runner import VERDICTS_CELL, execute

        key = (path.stem, solved)
        if key not in self._runs:
            kernel = "python3" if solved else (self.binder_env(), BINDER_KERNEL)[1]
            tmp = self.tmpdir[key] = self.folder / f"{path.stem}-{'solved' if solved else 'learner'}"
            tmp.mkdir()
            self._runs[key] = execute(path, solutions=solved, extra_cells=(VERDICTS_CELL,),
                                      kernel=kernel, env={"TMPDIR": str(tmp)})
        return self._runs[key]


@pytest.fixture(scope="session")
def lesson_runs(tmp_path_factory):
    """The session's runs of every lesson (`LessonRuns`); Binder's environment is built on first use."""
    return LessonRuns(tmp_path_factory.mktemp("lesson_runs"), lambda: _binder_env(tmp_path_factory))


@pytest.fixture(scope="session")
def built_course(tmp_path_factory, lesson_runs):
    """The course built once per test session from the learner's runs: every lesson's rendered page
    and its deck side by side (tests/course/test_render.py and test_decks.py share it).

    Returns:
        (the build folder, its index page).
    """
    from course_utils.course import render
    from course_utils.course.runner import lessons

    out = tmp_path_factory.mktemp("course_build")
    runs = [lesson_runs.learner(path) for path in lessons(ROOT / "notebooks")]
    return out, render.build_from_runs(runs, out)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright; fails loudly when either is missing.

    Closed at the end of each test module, so no browser process outlives the tests that use it.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("The browser tests need the Playwright package: run `make test` "
                    "(it installs requirements-test.txt) or `pip install -r requirements-test.txt`.")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"The browser tests need Debian's Chromium at {CHROMIUM}: run `make test` "
                    f"or `apt-get install -y chromium`.")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()


def _two_dense_mlp(hidden=32):
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(hidden, name="d1"), keras.layers.Dense(4, name="d2")],
        name="mlp",
    )


def _megatron_map(mesh):
    from keras import distribution

    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d1/bias"] = ("model",)
    layout_map[".*d2/kernel"] = ("model", None)
    return layout_map


@pytest.fixture
def mlp():
    """Builds the layout tests' Sequential MLP `mlp` (16 -> d1 -> d2 -> 4), seeded: `mlp(hidden=32)`."""
    return _two_dense_mlp


@pytest.fixture
def good_map():
    """A sound Megatron LayoutMap for `mlp` on a mesh: `good_map(mesh)`."""
    return _megatron_map


@pytest.fixture
def mesh():
    from course_utils import make_mesh

    return make_mesh((2, 4), ("data", "model"))
