"""Where a hand-in's code runs while graded: bubblewrap where it starts, said plainly where it does not
(course_utils/course/grading/sandbox.py). The sandbox itself is tried on real hand-ins in test_isolation.py."""

import sys
from pathlib import Path

from course_utils.course.grading.sandbox import BUBBLEWRAP, NONE, SANDBOX_ENV, Sandbox, choose_sandbox, sandbox_folders
from course_utils.xla_settings import READ_ONLY_ENV

ROOT = Path(__file__).resolve().parents[3]


def test_no_sandbox_is_said_with_its_reason_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(SANDBOX_ENV, "off")
    off = choose_sandbox(hide=[tmp_path])
    assert off.mode == NONE and f"without a sandbox ({SANDBOX_ENV}=off)" in off.describe()
    assert "could read the solutions" in off.describe() and "apt-get install bubblewrap" in off.describe()
    monkeypatch.delenv(SANDBOX_ENV)
    assert choose_sandbox(hide=[tmp_path], which=lambda name: None).reason == "bubblewrap is not installed"


def test_a_sandbox_that_cannot_start_falls_back_and_says_why(tmp_path, monkeypatch):
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    chosen = choose_sandbox(hide=[tmp_path], which=lambda name: "/bin/false")  # a bwrap that always fails
    assert chosen.mode == NONE and chosen.reason.startswith("bubblewrap cannot start here")


def test_the_course_its_solutions_and_the_home_are_hidden_and_python_shown(tmp_path):
    # the checkout on the path (PYTHONPATH=. say), given rather than patched into sys.path, which gradings run
    # meanwhile in the background read
    hidden, shown = sandbox_folders([tmp_path / "nowhere", tmp_path], path=[str(ROOT), *sys.path])
    # each hidden itself, or inside a hidden folder (a checkout cloned into /tmp lies inside the hidden /tmp)
    assert all(any(h == folder or h in folder.parents for h in hidden) for folder in (ROOT, Path.home(), tmp_path))
    assert ROOT / "course_utils" in shown and ROOT not in shown
    assert not any(s == h or s in h.parents for s in shown for h in hidden)  # nothing hidden is shown again
    assert all((ROOT / name) not in shown for name in ("notebooks", "tests", "docs", ".git"))


def test_a_sandboxed_hand_in_gets_no_secret_and_reads_the_cache_only(tmp_path):
    sandbox = Sandbox(BUBBLEWRAP, "", (tmp_path,), ())
    env = sandbox.environment({"PATH": "/usr/bin", "GITHUB_TOKEN": "secret", "AWS_SECRET_ACCESS_KEY": "secret",
                               "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}, tmp_path / "work")
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["PATH"] == "/usr/bin" and env["PYTHONPATH"] == str(ROOT) and env["KERAS_BACKEND"] == "jax"
    assert env["TMPDIR"] == str(tmp_path / "work" / ".tmp") and env[READ_ONLY_ENV] == "1"
    command = sandbox.command(["python", "-m", "nbgrader"], tmp_path / "work")
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"):
        assert flag in command
    assert command[-4:] == ["--", "python", "-m", "nbgrader"]
    assert command[command.index("--cap-drop") + 1] == "ALL"
    assert ["--bind", str(tmp_path / "work"), str(tmp_path / "work")] == command[command.index("--bind"):][:3]
