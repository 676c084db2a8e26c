"""The test run uses 8 simulated CPU devices, set up before anything starts JAX.

Every lesson runs at most twice in a test session (`lesson_runs`): as a learner gets it, in the
environment Binder would build (`binder_env`), and with its solutions filled in, in this one.
Every test that needs an executed lesson reads those runs. So that what a lesson that compares
training runs says holds on every learner's CPU, not only on this one, its two runs compile for
different instruction sets: the learner's run with XLA's defaults (the newest this CPU has), the
solved run for the oldest XLA CPU targets (`--xla_cpu_max_isa=SSE4_2`, a test-only flag), and it runs
once more, solved, for each instruction set in between (`OLDER_ISAS`). The other lessons' solved runs
compile with XLA's defaults, as their learner's runs do, and find their programs in the cache. All runs share this environment's
compilation cache, so the second run of a lesson, and every run of a later session, starts from
the programs the first one compiled.

A test module that reads the built course may define `from_built_course(built, browser)`: it is
called once, in a background thread with a Chromium of its own, as soon as the course is built
from the learner's runs, so slow browser work (stepping every deck) runs beside the other tests;
the module's tests read what it returned through the `from_built_course` fixture. A module whose
slow work needs no lesson run (nbgrader's grading) may define `in_background(folder)` instead: it
is called once, in the same background thread, after the work on the course (when the lesson runs
no longer take both cores), and the module's tests read what it returned through the
`in_background` fixture. A module whose slow work needs Binder's environment and a browser, and no
run (a learner's path through every lesson) may define `after_the_lessons(folder, binder_env, browser)`:
it is queued on the lesson runs' own threads after every run, so it starts as soon as one of them is free
and runs beside the tests that are left, on the core the runs no longer take; its tests read what it
returned through the `after_the_lessons` fixture. Tests that read any of these run after the others,
as do the tests that read lesson runs.

Browser tests share one headless Chromium per test module (Debian's, driven by Playwright).

The lesson runs' kernels ask for less of the cores than the tests here (`LESSON_RUN_NICENESS`), and when the session
runs lessons, the tests that start processes and read none of the work above run in a second pytest process started
with the session (`BesideRun`), their reports read back here in their place: pytest's own process is the suite's
longest chain, and both let it end sooner.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ["COURSE_PLATFORM"] = "cpu"
os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils import setup_devices  # noqa: E402
from course_utils.xla_settings import CACHE_ENV, instruction_sets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
BINDER_KERNEL = "course-binder"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# The x86 instruction sets XLA CPU can compile for here, oldest first: the learner's runs take XLA's
# default (the newest); a lesson that compares runs is solved on the oldest, and on each one in between.
ISAS = instruction_sets()
SOLVED_ISA = ISAS[0] if len(ISAS) > 1 else None
OLDER_ISAS = ISAS[1:-1]



def solved_isa(path) -> str | None:
    """The instruction set a lesson's solved run compiles for: the oldest for a lesson that compares runs."""
    from course_utils.course.lesson_parts import compares_runs

    return SOLVED_ISA if compares_runs(path) else None


_BUILT: dict = {}
_BUILDING = threading.Lock()


def lesson_workers() -> int:
    """Lessons run at once, in the background: as many as a build runs (`SERIES_WORKERS`), unless set."""
    from course_utils.course.checking.lesson_runs import SERIES_WORKERS

    return int(os.environ.get("COURSE_TEST_LESSON_WORKERS", SERIES_WORKERS))


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
    with _BUILDING:
        if "binder" not in _BUILT:
            _BUILT["binder"] = _build_binder_env(tmp_path_factory)
    return _BUILT["binder"]


def _build_binder_env(tmp_path_factory):
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    python = shutil.which(f"python{version}")
    if python is None:  # the pins and steps are still checked, with this test run's Python
        python = sys.executable
        print(f"binder/runtime.txt asks for Python {version}, not found here; using {sys.version.split()[0]}")
    home = tmp_path_factory.mktemp("binder")
    env_dir = home / "env"
    subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
    bin_dir = env_dir / "bin"
    # PYTHONDONTWRITEBYTECODE (set on some machines) is cleared: the image repo2docker builds holds
    # every module byte-compiled, and without it each kernel here would compile Keras and JAX from
    # source again (8 s of imports instead of 3).
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(env_dir),
           "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("PYTHONPATH", None)
    run = lambda *cmd: subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=1200)
    # as repo2docker, but without byte-compiling every installed file (a third of the install's time;
    # Python compiles a module the first time it is imported)
    run(str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-compile", "-r",
        str(BINDER / "requirements.txt"))
    run("bash", str(BINDER / "postBuild"))
    spec = home / "jupyter" / "kernels" / BINDER_KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["bash", str(BINDER / "start"), str(bin_dir / "python"), "-m", "ipykernel_launcher",
                 "-f", "{connection_file}"],
        "display_name": "Binder's environment", "language": "python",
        "env": {"PATH": env["PATH"], "VIRTUAL_ENV": str(env_dir), "PYTHONDONTWRITEBYTECODE": ""}}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(home / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    return bin_dir, env


class LessonRuns:
    """Each lesson run at most twice per session: as a learner gets it and solved.

    The learner's run happens in Binder's environment (`binder_env`), with the exercises
    untouched; the solved run in this environment, with every worked solution filled in. Both
    end with `VERDICTS_CELL`, so `run.verdicts()` gives every checker's verdict. Each run gets a
    temporary folder of its own as the kernel's TMPDIR (`tmpdir[stem, solved]`).

    `start` queues the runs the selected tests need on `lesson_workers()` background threads (each
    run is a kernel process of its own), so the lessons execute while the other tests run; a test
    asking for a run waits for it, or starts it when nothing queued it. `course` is the course
    built from every learner's run, `after_course` queues work that reads it, and `background`
    work that needs no run; all three run, in the order queued, on one more background thread.
    `after_runs` queues work on the runs' own threads, behind the runs queued before it.
    """

    def __init__(self, folder: Path, binder_env, lessons: list[Path]):
        self.folder, self.binder_env, self.lessons = folder, binder_env, lessons
        self.tmpdir: dict[tuple[str, bool], Path] = {}
        self._futures: dict[tuple[str, bool], object] = {}
        self._pool = ThreadPoolExecutor(lesson_workers(), thread_name_prefix="lesson")
        self._course_pool = ThreadPoolExecutor(1, thread_name_prefix="course")
        self._once_futures: dict[str, object] = {}
        self._lock = threading.Lock()

    def start(self, wanted) -> None:
        """Queues runs, given as `(lesson path, solved, instruction set)`, in that order."""
        for path, solved, isa in wanted:
            self._future(Path(path), solved, isa)

    def learner(self, path):
        return self._future(Path(path), False, None).result()

    def solved(self, path):
        return self._future(Path(path), True, solved_isa(path)).result()

    def on(self, path, isa: str):
        """The lesson run solved, its programs compiled for the instruction set `isa`."""
        return self._future(Path(path), True, isa).result()

    def course(self):
        """The course built once from every learner's run: (the build folder, its index page)."""
        return self._once("", self._build_course).result()

    def after_course(self, name: str, work):
        """`work(course, browser)`, run once per `name` as soon as the course is built, in the
        background with a Chromium of its own; returns its future."""
        self._once("", self._build_course)  # queued first: the work reads it
        return self._once(name, lambda: _with_chromium(work, self.course()))

    def background(self, name: str, work):
        """`work(folder)`, run once per `name` on the background thread, with a new folder of its own;
        returns its future."""
        return self._once(f"background {name}", lambda: work(self._new_folder(name)))

    def after_runs(self, name: str, work):
        """`work(folder, binder_env, browser)`, run once per `name` on the lesson runs' threads, behind every run
        queued before it, with a folder of its own, Binder's environment and a Chromium of its own; its future."""
        return self._once(f"after {name}", lambda: self._after_runs(name, work), self._pool)

    def _after_runs(self, name: str, work):
        folder, binder_env = self._new_folder(f"{name}-after"), self.binder_env()
        with _chromium() as browser:
            return work(folder, binder_env, browser)

    def close(self) -> None:
        self._course_pool.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _once(self, name: str, job, pool=None):
        """`job()` queued once per `name` on `pool` (the one background thread by default); its future."""
        with self._lock:
            if name not in self._once_futures:
                self._once_futures[name] = (pool or self._course_pool).submit(job)
            return self._once_futures[name]

    def _new_folder(self, name: str) -> Path:
        folder = self.folder / f"background-{name.rsplit('.', 1)[-1]}"
        folder.mkdir()
        return folder

    def _build_course(self):
        from course_utils.course.publish import render

        out = self.folder / "course_build"
        out.mkdir()
        return out, render.build_from_runs([self.learner(path) for path in self.lessons], out)

    def summary(self) -> list[str]:
        """One line per lesson run this session: its seconds and its kernel's peak memory."""
        lines = []
        for (stem, solved, isa), future in sorted(self._futures.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
            if future.done() and not future.cancelled() and not future.exception():
                run = future.result()
                kind = ("solved" if solved else "learner") + (f", {isa}" if isa else "")
                lines.append(f"{stem:28} {kind:16} {run.seconds:6.1f} s {run.peak_rss_mb:6.0f} MB")
        return lines

    def _future(self, path: Path, solved: bool, isa: str | None):
        key = (path.stem, solved, isa)
        with self._lock:
            if key not in self._futures:
                self._futures[key] = self._pool.submit(self._run, path, solved, isa)
            return self._futures[key]

    def _run(self, path: Path, solved: bool, isa: str | None):
        from course_utils.course.checking.lesson_runs import VERDICTS_CELL, execute

        kernel = "python3" if solved else (self.binder_env(), BINDER_KERNEL)[1]
        name = f"{path.stem}-{'solved' if solved else 'learner'}{f'-{isa}' if isa else ''}"
        tmp = self.folder / name
        if isa == (solved_isa(path) if solved else None):  # a lesson's two runs; the others are read for their claims
            self.tmpdir[path.stem, solved] = tmp
        tmp.mkdir()
        env = {"TMPDIR": str(tmp), **({"XLA_FLAGS": f"--xla_cpu_max_isa={isa}"} if isa else {})}
        return _behind_the_tests(lambda: execute(path, solutions=solved, extra_cells=(VERDICTS_CELL,), kernel=kernel,
                                                 env=env))


# How much less of the cores a lesson run's kernel asks for than the tests in this process (Linux's niceness).
# The tests that run here one after another are the session's longest chain; the runs, which are read only at
# the end, take what that chain leaves. At the same priority the chain got two thirds of a core beside two
# runs, and the session's last 230 to 500 s were this process alone, with the second core mostly idle.
LESSON_RUN_NICENESS = 10


def _behind_the_tests(work):
    """`work()` on a thread of its own whose niceness is `LESSON_RUN_NICENESS`, which the kernel it starts (and
    everything that kernel starts) inherits: Linux keeps a niceness per thread, and a process started from a thread
    takes that thread's. Elsewhere `work()` as it is."""
    if not sys.platform.startswith("linux"):
        return work()

    def lowered():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LESSON_RUN_NICENESS)

    with ThreadPoolExecutor(1, thread_name_prefix="lesson-run", initializer=lowered) as one:
        return one.submit(work).result()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Keras numbers its unnamed layers and optimizers per process (`dense_3`); each test, and each fixture
    made for it, starts the numbering anew, so its models get the same names whichever tests ran before it
    in this process (`-k`, a test added, the fast lane's two processes). The compilation cache keys a
    program by those names too (`xla_settings.use_compilation_cache`): a name shifted by another test
    would compile it again."""
    from keras.src.utils.naming import reset_uids

    reset_uids()


def pytest_generate_tests(metafunc):
    """A test that takes `older_isa` runs once per instruction set between the lesson runs' two (`OLDER_ISAS`)."""
    if "older_isa" in metafunc.fixturenames:
        metafunc.parametrize("older_isa", OLDER_ISAS)


# What the fast lane (`make test-fast`, pytest --fast) leaves out: the lessons' runs, Binder's environment,
# the browser, the work they start in the background, every test marked `processes` (one that starts
# Python processes or kernels: the machinery's modules, fresh interpreters) and every test marked
# `compiles_long` (tens of seconds of compiling). The library and the exercise checkers stay.
SLOW_FIXTURES = {"lesson_runs", "binder_env", "in_background", "after_the_lessons", "browser", "built_course"}


def pytest_addoption(parser):
    parser.addoption("--beside", action="store_true",
                     help="run the tests marked `processes` that read no lesson run in a second pytest process beside "
                          "this one, as the whole suite does")
    parser.addoption("--fast", action="store_true",
                     help="the fast lane: the library and the exercise checkers; no lesson runs, no Binder "
                          "environment, no browser, no test that starts processes (make test-fast)")


def pytest_configure(config):
    _set_up_devices(config)
    config.addinivalue_line("markers", "processes: the test starts Python processes, kernels or a browser (the machinery, "
                                       "fresh interpreters): left out of the fast lane")
    config.addinivalue_line("markers", "compiles_long: the test compiles programs for tens of seconds (the advisor's "
                                       "levers, the GPU's own program): left out of the fast lane")
    config.addinivalue_line("markers", "lesson_runs(*kinds): the test reads the session's runs of the lessons "
                                       "('learner', 'solved', 'isa'); such tests run last, their runs start first")
    if os.environ.get(BESIDE_ENV):
        _BESIDE_CONFIG.append(config)


def _xdist_role(config) -> str:
    """This process's part in a pytest-xdist run: 'controller' (hands tests out, runs none), 'worker', or 'single' (no
    pytest-xdist, or `-n 0`)."""
    if getattr(config, "workerinput", None) is not None:
        return "worker"
    return "controller" if config.getoption("numprocesses", default=None) else "single"


def _set_up_devices(config) -> None:
    """The 8 simulated CPU devices, before any test module is imported (and starts JAX); kernels and subprocesses of
    every environment the tests start share this one's compilation cache.

    Not in pytest-xdist's controller (`make test-fast`), which hands the tests out and runs none: each of its
    workers sets up its own, and the controller's 5 s of JAX, Keras and devices would come before they start.
    """
    if _xdist_role(config) == "controller":
        return
    setup = setup_devices(8)
    if setup.compilation_cache:
        os.environ[CACHE_ENV] = setup.compilation_cache


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: no run starts for a test that will not run
def pytest_collection_modifyitems(session, config, items):
    """Tests that read lesson runs go last (after those that need Binder's environment), and the runs
    they need are noted for `_start_lesson_runs`.

    A test's `lesson_runs` marker names the kinds it reads ('learner', 'solved', and 'isa': the solved
    run for its parameter `older_isa`); one that reaches the runs only through `built_course` reads the
    learner's; one with neither gets both. A test parametrized by a lesson `path` reads that lesson's
    runs; any other reads every lesson's.
    """
    if config.getoption("fast"):
        slow = [item for item in items if SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("processes") or item.get_closest_marker("compiles_long")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item not in slow]
    readers = [item for item in items if "lesson_runs" in getattr(item, "fixturenames", ())]
    # a test of Binder's environment waits for its build (in the background, for the first learner's
    # run), and one that reads background work waits for it: they go after the other tests, which run meanwhile
    waiting = [item for item in items if item not in readers
               and {"binder_env", "in_background", "after_the_lessons"} & set(getattr(item, "fixturenames", ()))]
    rest = [item for item in items if item not in readers and item not in waiting]
    beside = [item for item in rest if _runs_beside(item)] if _beside_wanted(config, readers) else []
    items[:] = [item for item in rest if item not in beside] + beside + waiting + readers
    config.stash[_BESIDE] = [item.nodeid for item in beside]
    config.stash[_BACKGROUND] = _modules_reading(waiting, "in_background")
    config.stash[_AFTER_LESSONS] = _modules_reading(waiting, "after_the_lessons")
    config.stash[_WANTED] = _runs_wanted(readers)
    config.stash[_AFTER_COURSE] = _modules_reading(readers, "from_built_course")


def _runs_wanted(readers) -> list:
    """The lesson runs the tests in `readers` read, as (path, solved, instruction set), in the order they start."""
    from course_utils.course.lesson_parts import lessons

    every = lessons(ROOT / "notebooks")
    wanted = []
    for item in readers:
        marker = item.get_closest_marker("lesson_runs")
        kinds = marker.args if marker else ("learner",) if "built_course" in item.fixturenames else (
            "learner", "solved")
        params = getattr(item, "callspec", None)
        paths = [Path(params.params["path"])] if params and "path" in params.params else every
        for kind in kinds:
            isa = params.params["older_isa"] if kind == "isa" else "solved" if kind == "solved" else None
            wanted += [(path, kind != "learner", solved_isa(path) if isa == "solved" else isa) for path in paths]
    # The learner's runs first: the course is built from them, and its decks are stepped through after,
    # beside the other tests. While the first of them waits for Binder's environment to be built, the
    # other worker takes the longest run of all (the last lesson compiled for another instruction set:
    # nothing shares its programs). Then the runs for other instruction sets, longest first, then the
    # other solved runs, which find the learner's programs in the cache.
    other_isa = lambda run: run[1] and run[2] is not None
    wanted = sorted(dict.fromkeys(wanted), key=lambda run: (
        run[1], other_isa(run) is False, -int(run[0].stem[:2]) if other_isa(run) else int(run[0].stem[:2])))
    learners = [run for run in wanted if not run[1]]
    others = [run for run in wanted if run[1]]
    return learners[:1] + others[:1] + learners[1:] + others[1:]


def _modules_reading(items, fixture: str) -> list:
    """The test modules of `items` with a test that reads `fixture`, each once, in order."""
    return list({item.module.__name__: item.module for item in items if fixture in item.fixturenames}.values())


_WANTED = pytest.StashKey[list]()
_BESIDE = pytest.StashKey[list]()
_AFTER_COURSE = pytest.StashKey[list]()
_BACKGROUND = pytest.StashKey[list]()
_AFTER_LESSONS = pytest.StashKey[list]()


@pytest.fixture(scope="session", autouse=True)
def _start_lesson_runs(request):
    """Queues the selected tests' lesson runs at the session's start, in the background, their modules'
    work that needs no run (`in_background`), and the work they do on the built course
    (`from_built_course`) right after the course."""
    wanted = request.config.stash.get(_WANTED, [])
    if wanted:
        runs = request.getfixturevalue("lesson_runs")
        runs.start(wanted)
        for module in request.config.stash.get(_AFTER_COURSE, []):
            runs.after_course(module.__name__, module.from_built_course)
    # after the work on the course, when the lesson runs no longer take both cores
    for module in request.config.stash.get(_BACKGROUND, []):
        request.getfixturevalue("lesson_runs").background(module.__name__, module.in_background)
    # behind every run queued above, on the runs' threads: it starts when they no longer need both
    for module in request.config.stash.get(_AFTER_LESSONS, []):
        request.getfixturevalue("lesson_runs").after_runs(module.__name__, module.after_the_lessons)
    yield


_SESSION_RUNS: list = []


@pytest.fixture(scope="session")
def lesson_runs(tmp_path_factory):
    """The session's runs of every lesson (`LessonRuns`); Binder's environment is built on first use."""
    from course_utils.course.lesson_parts import lessons

    runs = LessonRuns(tmp_path_factory.mktemp("lesson_runs"), lambda: _binder_env(tmp_path_factory),
                      lessons(ROOT / "notebooks"))
    _SESSION_RUNS.append(runs)
    yield runs
    runs.close()


def pytest_terminal_summary(terminalreporter):
    """The lesson runs of the session, with their time and memory (running in the background, beside other tests)."""
    for runs in _SESSION_RUNS:
        lines = runs.summary()
        if lines:
            terminalreporter.section("lesson runs (two at a time, beside the other tests)")
            for line in lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def built_course(lesson_runs):
    """The course built once per test session from the learner's runs: every lesson's rendered page
    and its deck side by side (tests/course/publish/test_render.py and test_decks.py share it).

    Returns:
        (the build folder, its index page).
    """
    return lesson_runs.course()


@pytest.fixture(scope="module")
def in_background(request):
    """What the test module's `in_background(folder)` returned, run in the background (queued at the session's start).

    (`lesson_runs` is asked for here, not named as an argument: a test that reads background work does
    not read lesson runs, so it must not start them.)
    """
    runs = request.getfixturevalue("lesson_runs")
    return runs.background(request.module.__name__, request.module.in_background).result()


@pytest.fixture(scope="module")
def after_the_lessons(request):
    """What the test module's `after_the_lessons(folder, binder_env, browser)` returned, run on the lesson runs'
    threads after the runs queued at the session's start (`lesson_runs` is asked for here, as for
    `in_background`: reading this work starts no run)."""
    runs = request.getfixturevalue("lesson_runs")
    return runs.after_runs(request.module.__name__, request.module.after_the_lessons).result()


@pytest.fixture(scope="module")
def from_built_course(request, built_course, lesson_runs):
    """What the test module's `from_built_course(built_course, browser)` returned, run in the background."""
    return lesson_runs.after_course(request.module.__name__, request.module.from_built_course).result()


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright; fails loudly when either is missing.

    Closed at the end of each test module, so no browser process outlives the tests that use it.
    """
    with _chromium() as instance:
        yield instance


@contextmanager
def _chromium():
    """A headless Chromium of this thread's own (Playwright's objects belong to the thread that made them)."""
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


def _with_chromium(work, course):
    with _chromium() as instance:
        return work(course, instance)


def _two_dense_mlp(hidden=32):
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(hidden, name="d1"), keras.layers.Dense(4, name="d2")],
        name="mlp",
    )


def _megatron_map(mesh):
    from course_utils import make_layout_map
    from course_utils.models import mlp_rules

    return make_layout_map(mesh, mlp_rules())


class TinyMlp:
    """The memory and communication tests' MLP (16 -> 32 -> 4, `models.mlp`), compiled with Adam, and the
    distributions they lay it out by."""

    gradient_bytes = (16 * 32 + 32 + 32 * 4 + 4) * 4  # float32: every trainable weight once

    @staticmethod
    def build():
        import keras

        from course_utils import models

        keras.utils.set_random_seed(0)
        model = models.mlp(inputs=16, hidden=32, classes=4)
        model.compile(optimizer="adam", loss="mse")
        return model

    @staticmethod
    def data_parallel():
        from keras import distribution

        from course_utils import make_mesh

        return distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))

    @staticmethod
    def megatron(shape=(2, 4)):
        from keras import distribution

        from course_utils import make_layout_map, make_mesh, models

        layout_map = make_layout_map(make_mesh(shape, ("data", "model")), models.mlp_rules())
        return distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")

    def built_under(self, dist):
        with dist.scope():
            return self.build()


@pytest.fixture
def tiny():
    """`TinyMlp`: the small MLP the memory and communication tests build, and its distributions."""
    return TinyMlp()


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


# Tests that start processes (marked `processes`) spend their time in those processes while pytest waits. When the
# session runs lessons (the whole suite, or --beside), those that read none of its lesson runs, Binder's environment,
# browsers or background work run in a second pytest process, started with the session, beside the tests here:
# pytest's own process was the suite's longest chain, its last 230 to 500 s alone on one core. Their reports are
# read back here, in their place (after the other tests), as if they had run here.
BESIDE_ENV = "COURSE_TEST_BESIDE_REPORTS"  # set in the second process: the file its reports go to
_BESIDE_RUN = pytest.StashKey[object]()
_BESIDE_CONFIG: list = []


def _beside_wanted(config, readers) -> bool:
    return (not os.environ.get(BESIDE_ENV) and _xdist_role(config) == "single"
            and bool(readers or config.getoption("beside")))


def _runs_beside(item) -> bool:
    return bool(item.get_closest_marker("processes")) and not (SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))


class BesideRun:
    """The second pytest process, running `nodeids`; `reports(config, item)` waits for it to end and gives that
    test's reports (with a failure for any part of it the process never reported)."""

    def __init__(self, nodeids: list[str]):
        import tempfile

        self.nodeids = set(nodeids)
        self.folder = Path(tempfile.mkdtemp(prefix="course-tests-beside-"))
        self.file, self.log = self.folder / "reports.jsonl", self.folder / "output.txt"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nodeids],
                                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, BESIDE_ENV: str(self.file)})
        self._read: dict | None = None

    def reports(self, config, item) -> list:
        if self._read is None:
            self.process.wait()
            self._read = {}
            lines = self.file.read_text().splitlines() if self.file.exists() else []
            for line in lines:
                data = json.loads(line)
                self._read.setdefault(data.pop("$nodeid"), []).append(data)
        found = [config.hook.pytest_report_from_serializable(config=config, data=data)
                 for data in self._read.get(item.nodeid, [])]
        if any(report.when == "teardown" for report in found):
            return found
        from _pytest.reports import TestReport

        output = self.log.read_text(errors="replace")[-4000:]
        when = "teardown" if any(report.when == "call" for report in found) else "call"
        return found + [TestReport(item.nodeid, item.location, {}, "failed", f"The second pytest process (exit code "
                                   f"{self.process.returncode}) ran {item.nodeid} without a report of its {when}. Its "
                                   f"output's end:\n{output}", when)]

    def stop(self) -> None:
        """Stopped as Ctrl-C stops pytest (its fixtures stop what its tests started), killed if it has not ended 30 s
        later; its files removed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """The second process starts before the first test, and is stopped (and its files gone) after the last."""
    nodeids = session.config.stash.get(_BESIDE, [])
    run = BesideRun(nodeids) if nodeids and not session.config.option.collectonly else None
    session.config.stash[_BESIDE_RUN] = run
    try:
        return (yield)
    finally:
        if run is not None:
            run.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A test run beside: its reports from the second process, logged here in its place."""
    beside = item.config.stash.get(_BESIDE_RUN, None)
    if beside is None or item.nodeid not in beside.nodeids:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in beside.reports(item.config, item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_runtest_logreport(report):
    """In the second process: each report written for the first to read."""
    if _BESIDE_CONFIG:
        config = _BESIDE_CONFIG[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(os.environ[BESIDE_ENV], "a") as out:
            out.write(json.dumps({"$nodeid": report.nodeid, **data}) + "\n")
