"""The explorers and the reports' verdicts in a real JupyterLab, in a real (headless) Chromium.

Starts JupyterLab on 127.0.0.1 with no token, opens a copy of
`tests/data/explorers.ipynb`, runs all cells from the Run menu, checks that the
widgets render (dropdowns, sliders, toggle buttons, images), changes controls
and checks the pictures change and an impossible layout shows its message.
Then opens the cells of the learner's lesson runs whose reports end in a verdict
(EQUIVALENT, AGREE, ...), outputs as they ran, and reads each verdict where
JupyterLab shows it: in the report's HTML, not only in its text form.
Last, a learner's path through every lesson in one JupyterLab with Binder's environment and settings:
each lesson opened, run, saved and closed in turn, the memory of the server and all it started
sampled throughout, which must stay within what Binder gives a user. The path runs beside the other
tests, once the lesson runs no longer take both cores (`after_the_lessons`, tests/conftest.py).
Screenshots go to `test-artifacts/browser/`. Needs the Playwright package and
Debian's Chromium (`make test` installs both); it fails, never skips, without them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest

from course_utils.course.lesson_parts import lessons
from course_utils.launch import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
NOTEBOOK = ROOT / "tests" / "data" / "explorers.ipynb"
RENDER_TIMEOUT_MS = int(os.environ.get("BROWSER_RENDER_TIMEOUT_MS", 180_000))  # a fresh kernel imports Keras and JAX, then draws three explorers


def _wait_until_up(url: str, process: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"JupyterLab exited with code {process.returncode}; its log:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer at {url} within {timeout} s; log in {log}")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM lets the server shut its kernels down; SIGKILL the whole group if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


@contextlib.contextmanager
def _jupyterlab(python: str, root: Path, name: str, env: dict | None = None, *extra: str):
    """A JupyterLab server of `python`'s environment at `root`; yields (base url, its process)."""
    port = free_port()
    runtime = ARTIFACTS / f"jupyter-runtime-{name}"
    shutil.rmtree(runtime, ignore_errors=True)  # a run stopped half-way leaves its tabs in the workspace: never reopen them
    command = [python, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
               f"--LabApp.workspaces_dir={runtime}", "--ServerApp.port_retries=0", *extra]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = ARTIFACTS / f"jupyterlab-{name}.log"
    env = {**(env or os.environ), "JUPYTER_RUNTIME_DIR": str(runtime)}
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(url, process, log)
        yield url, process
    finally:
        _stop(process)


@pytest.fixture
def lab():
    """A JupyterLab server at the repository root; yields (base url, notebook path in the server)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(NOTEBOOK, ARTIFACTS / NOTEBOOK.name)  # runs edit and autosave the copy, not the source
    with _jupyterlab(sys.executable, ROOT, "explorers") as (url, _):
        yield url, (ARTIFACTS / NOTEBOOK.name).relative_to(ROOT).as_posix()


VERDICTS = ("NOT equivalent", "EQUIVALENT", "AGREE", "DIFFER")


def _verdict_cells(runs) -> nbformat.NotebookNode:
    """One notebook of every code cell, with its outputs, whose HTML output holds a verdict."""
    cells = []
    for run in runs:
        for cell in run.notebook.cells:
            shown = [o.get("data", {}).get("text/html", "") for o in cell.get("outputs", [])]
            if cell.cell_type == "code" and any(word in html for html in shown for word in VERDICTS):
                cells.append(nbformat.v4.new_markdown_cell(f"{run.path.stem}"))
                cells.append(cell)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def _image_sources(page) -> list[str]:
    return page.eval_on_selector_all("img.widget-image", "imgs => imgs.map(i => i.src)")


def _run_all_cells(page) -> None:
    """Run > Run All Cells, once the kernel is idle; tries again if no cell started."""
    page.wait_for_selector(".jp-StatusBar-Widget >> text=/Idle/", timeout=90_000)
    for _ in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.wait_for_selector(".jp-InputPrompt >> text=/\\[(\\*|\\d+)\\]/", timeout=20_000)
            return
        except Exception:
            page.keyboard.press("Escape")
    raise AssertionError("Run > Run All Cells did not start the notebook")


def _dismiss_news(page) -> None:
    """JupyterLab asks once about news in a toast that covers the outputs; answer No."""
    button = page.locator(".jp-Notification-Toast-Close, .Toastify__toast button", has_text="No")
    if button.count():
        button.first.click()


def test_explorers_render_and_redraw_in_jupyterlab(lab, browser):
    url, notebook = lab
    started = time.monotonic()
    page = browser.new_page(viewport={"width": 1400, "height": 3000})
    try:
        _check_explorers(page, f"{url}/lab/tree/{notebook}")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
        print(f"\nbrowser test failed; screenshot {ARTIFACTS / 'failure.png'}, server log {ARTIFACTS / 'jupyterlab.log'}")
        raise
    print(f"\nbrowser test: {time.monotonic() - started:.1f} s in the browser; screenshots in {ARTIFACTS}")


def _check_explorers(page, notebook_url: str) -> None:
    page.goto(notebook_url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "0-opened.png"))
    _run_all_cells(page)
    page.wait_for_function("document.querySelectorAll('img.widget-image').length >= 3",
                           timeout=RENDER_TIMEOUT_MS)
    for kind in ("widget-dropdown", "widget-hslider", "widget-toggle-buttons"):
        assert page.locator(f".{kind}").count() >= 1, f"no {kind} rendered"
    _dismiss_news(page)
    explorers = page.locator(".jp-OutputArea-output:has(img.widget-image)")
    for i, name in enumerate(("mesh", "layout", "model")):
        explorers.nth(i).screenshot(path=str(ARTIFACTS / f"1-{name}-explorer.png"))

    before = _image_sources(page)
    page.locator(".widget-dropdown select").first.select_option(label="4 x 2")
    page.wait_for_function(f"document.querySelector('img.widget-image').src !== {before[0]!r}", timeout=30_000)
    assert _image_sources(page)[0] != before[0], "the mesh picture did not change"
    explorers.nth(0).screenshot(path=str(ARTIFACTS / "2-mesh-explorer-4x2.png"))

    layout_axis = page.locator(".widget-dropdown select").nth(1)  # layout explorer, dim 0 split
    layout_axis.select_option(label="'model' (4)")  # dim 1 is split over 'model' already
    message = explorers.nth(1).locator(".widget-html", has_text="Not possible")
    message.wait_for(timeout=30_000)
    assert "more than one dimension" in message.inner_text()
    explorers.nth(1).screenshot(path=str(ARTIFACTS / "3-layout-explorer-message.png"))


@pytest.mark.lesson_runs("learner")
def test_every_reports_verdict_shows_in_jupyterlab(lab, browser, lesson_runs):
    """The verdict a report's text ends in (compare_runs, communication_report) is in the HTML the lab shows."""
    url, _ = lab
    notebook = _verdict_cells([lesson_runs.learner(path) for path in lessons(ROOT / "notebooks")])
    expected = [next(w for w in VERDICTS if any(w in o.get("data", {}).get("text/html", "") for o in cell.outputs))
                for cell in notebook.cells if cell.cell_type == "code"]
    assert len(expected) >= 8 and {"EQUIVALENT", "AGREE"} <= set(expected)
    path = ARTIFACTS / "verdicts.ipynb"
    nbformat.write(notebook, path)
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    try:
        page.goto(f"{url}/lab/tree/{path.relative_to(ROOT).as_posix()}")
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= {len(expected)}",
                               timeout=60_000)
        _dismiss_news(page)
        page.wait_for_function("document.querySelectorAll('.jp-CodeCell .jp-OutputArea-output p.table-note strong')"
                               f".length >= {len(expected)}", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "4-verdicts.png"))
        # in the order of the cells: a report's verdict is the one bold word under its table
        seen = page.eval_on_selector_all(".jp-CodeCell .jp-OutputArea-output p.table-note strong",
                                         "nodes => nodes.map(n => n.textContent)")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure-verdicts.png"), full_page=True)
        raise
    assert seen == expected


# Binder gives a user 1 to 2 GB; a learner's whole path through the course stays within 1.5 GB.
PATH_LIMIT_MB = 1500


class _MemorySampler(threading.Thread):
    """The resident memory of a process and everything it started, summed, sampled every half second."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.peak_mb, self.now_mb, self._done = psutil.Process(pid), 0.0, 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.5):
            total = 0
            for process in [self.root, *self.root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += process.memory_info().rss
            self.now_mb = total / 2**20
            self.peak_mb = max(self.peak_mb, self.now_mb)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _lab_command(page, command: str) -> None:
    page.evaluate(f"window.jupyterapp.commands.execute({command!r})")


def _run_save_and_close(page, url: str, notebook: Path, timeout_s: float = 600) -> dict:
    """Opens a lesson, runs all its cells, saves it and closes its tab, as the lesson's last cell asks."""
    page.goto(f"{url}/lab/tree/{notebook.name}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_selector(".jp-StatusBar-Widget >> text=/Idle/", timeout=120_000)
    _dismiss_news(page)
    _lab_command(page, "notebook:run-all-cells")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # done when every code cell ran, or one failed and the kernel stopped
        time.sleep(3)
        _lab_command(page, "docmanager:save")
        time.sleep(0.5)
        cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
        failed = [c for c in cells if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
        if all(c.get("execution_count") for c in cells) or failed:
            break
    else:
        raise AssertionError(f"{notebook.name} did not finish within {timeout_s} s")
    kernels = json.load(urllib.request.urlopen(f"{url}/api/kernels", timeout=10))
    _lab_command(page, "application:close")
    return {"failed": [("".join(c["source"])[:80], c["outputs"][-1].get("evalue")) for c in failed],
            "kernels_open": len(kernels)}


def _kernels_left(url: str, server: subprocess.Popen, wait_s: float = 60) -> int:
    """The kernels the server still runs once a tab closed: those it lists, or whose process has not yet ended."""
    deadline = time.monotonic() + wait_s
    while True:
        listed = len(json.load(urllib.request.urlopen(f"{url}/api/kernels", timeout=10)))
        running = []
        for process in psutil.Process(server.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):  # a process that ended while being read
                if process.status() != psutil.STATUS_ZOMBIE and "ipykernel" in " ".join(process.cmdline()):
                    running.append(process)
        if (listed == 0 and not running) or time.monotonic() > deadline:
            return max(listed, len(running))
        time.sleep(0.5)


def after_the_lessons(folder: Path, binder_env, browser) -> dict:
    """A learner's path: every lesson in one JupyterLab with Binder's environment and settings, each opened, run,
    saved and closed in turn. It runs beside the other tests once the lesson runs no longer take both cores
    (conftest's `after_the_lessons`); the test below checks what it found.

    Returns:
        {"lessons": the lessons in order, "steps": one dict per lesson run (cells that failed, kernels open,
        kernels left after closing, memory so far), "peak_mb": the most the server and all it started held}.
    """
    bin_dir, env = binder_env
    course = folder / "notebooks"
    course.mkdir()
    paths = [shutil.copy(path, course) for path in lessons(ROOT / "notebooks")]  # the learner's copies run
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with _jupyterlab(str(bin_dir / "python"), course, "path", env, "--LabApp.expose_app_in_browser=True") as (url, server):
        sampler = _MemorySampler(server.pid)
        sampler.start()
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        steps = []
        try:
            for path in map(Path, paths):
                step = _run_save_and_close(page, url, path)
                left = _kernels_left(url, server)
                time.sleep(1.0)  # a sample after the kernel's process ended
                steps.append({**step, "lesson": path.stem, "peak_mb": sampler.peak_mb, "left": left,
                              "after_mb": sampler.now_mb})
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "failure-path.png"), full_page=True)
            raise
        finally:
            sampler.stop()
            page.close()
    return {"lessons": [Path(p).stem for p in paths], "steps": steps, "peak_mb": sampler.peak_mb}


def test_a_learners_path_through_every_lesson_fits_in_binders_memory(after_the_lessons):
    """Every lesson in one JupyterLab with Binder's settings: each closed tab stops its kernel."""
    steps = after_the_lessons["steps"]
    for step in steps:
        print(f"{step['lesson']:32} peak so far {step['peak_mb']:6.0f} MB, after closing {step['after_mb']:6.0f} MB, "
              f"kernels left {step['left']}")
    assert [s["lesson"] for s in steps] == after_the_lessons["lessons"]  # the path went through every lesson
    assert [s["failed"] for s in steps] == [[] for _ in steps]  # every lesson ran to its end
    assert [s["kernels_open"] for s in steps] == [1] * len(steps)  # each ran in a kernel of its own
    assert [s["left"] for s in steps] == [0] * len(steps)  # closing the tab stopped its kernel
    assert after_the_lessons["peak_mb"] < PATH_LIMIT_MB, steps
