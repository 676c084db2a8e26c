"""The launcher runs real multi-process JAX jobs on this machine, and cleans up after them.

The example trains on a 2 x 4 mesh as 2 processes x 4 devices and as 1 process
x 8 devices: both processes report the same losses, equal to the one-process
run. Failures (a killed worker, a worker that raises, a timeout) stop every
process within seconds and leave none behind.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from course_utils.multiprocess import process_group
from course_utils.launch import EXAMPLE, LaunchError, LaunchFailed, launch

ROOT = Path(__file__).resolve().parents[2]

# Prints its pid, then sleeps; the process named by RAISE raises instead.
SLEEPER = """
import os, sys, time
if os.environ.get("USE_JAX"):
    from course_utils.multiprocess import setup_process
    setup_process()
print(f"pid={os.getpid()}", flush=True)
if os.environ.get("RAISE") == os.environ["KERAS_DISTRIBUTION_PROCESS_ID"]:
    raise RuntimeError("something broke in this process")
time.sleep(120)
"""


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scripts") / "sleeper.py"
    path.write_text(SLEEPER)
    return path


@pytest.fixture(scope="module")
def two_by_four():
    return launch(EXAMPLE, processes=2, devices_per_process=4, mesh=(2, 4), timeout=120, echo=False)


@pytest.fixture(scope="module")
def one_by_eight():
    return launch(EXAMPLE, processes=1, devices_per_process=8, mesh=(2, 4), timeout=120, echo=False)


def pids(result) -> list[int]:
    return [int(m.group(1)) for lines in result.lines for line in lines if (m := re.match(r"pid=(\d+)", line))]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def no_children_left():
    assert psutil.Process().children(recursive=True) == []


def test_each_process_sees_its_devices(two_by_four):
    assert two_by_four.ok, two_by_four.message()
    records = [two_by_four.records(p)[-1] for p in range(2)]
    assert [(r["process"], r["local_devices"], r["global_devices"]) for r in records] == [(0, 4, 8), (1, 4, 8)]
    assert [r["rows"] for r in records] == [[0, 16], [16, 32]]


def test_processes_agree_and_match_one_process(two_by_four, one_by_eight):
    assert one_by_eight.ok, one_by_eight.message()
    first, second = (two_by_four.records(p)[-1]["losses"] for p in range(2))
    single = one_by_eight.records(0)[-1]["losses"]
    assert len(single) == 4
    assert first == second
    np.testing.assert_allclose(first, single, rtol=1e-6, atol=1e-7)
    no_children_left()


def test_killed_worker_stops_the_others(sleeper):
    """kill -9 one worker of a JAX run: the launcher stops the other and fails within seconds."""
    cli = subprocess.Popen(
        [sys.executable, "-m", "course_utils.launch", "--processes", "2", "--devices-per-process", "2",
         "--timeout", "60", str(sleeper)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "USE_JAX": "1"})
    seen = {}
    for line in cli.stdout:
        if m := re.match(r"\[p(\d)\] pid=(\d+)", line):
            seen[int(m.group(1))] = int(m.group(2))
        if len(seen) == 2:
            break
    os.kill(seen[1], signal.SIGKILL)
    start = time.monotonic()
    out, err = cli.communicate(timeout=30)
    assert time.monotonic() - start < 20
    assert cli.returncode == 1
    assert "Process 1 was killed by signal SIGKILL" in err
    assert all(gone(pid) for pid in seen.values())


def test_worker_that_raises_names_itself(sleeper, monkeypatch):
    monkeypatch.setenv("USE_JAX", "1")
    monkeypatch.setenv("RAISE", "1")
    start = time.monotonic()
    result = launch(sleeper, processes=2, devices_per_process=2, timeout=60, echo=False)
    assert time.monotonic() - start < 30
    assert result.status == "failed" and result.failed == 1
    assert result.returncodes[1] == 1 and result.returncodes[0] != 0
    assert "RuntimeError: something broke in this process" in result.message()
    assert "Last lines of process 1" in result.message()
    assert all(gone(pid) for pid in pids(result))
    no_children_left()


def test_raised_but_still_running_counts_as_failed(tmp_path, monkeypatch):
    """A script without setup_process hangs at exit after raising; the launcher does not wait."""
    script = tmp_path / "hangs.py"
    script.write_text(textwrap.dedent("""
        import os, time, traceback
        if os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] == "0":
            try:
                raise ValueError("bad input")
            except ValueError:
                traceback.print_exc()
        time.sleep(120)
    """))
    monkeypatch.setattr(process_group, "HANG_GRACE_S", 1.0)
    result = launch(script, processes=2, devices_per_process=1, timeout=60, echo=False)
    assert result.failed == 0 and "did not exit" in result.reason
    assert "ValueError: bad input" in result.message()
    no_children_left()


def test_timeout_stops_everything(sleeper):
    start = time.monotonic()
    result = launch(sleeper, processes=2, devices_per_process=1, timeout=2, echo=False)
    assert time.monotonic() - start < 10
    assert result.status == "timeout" and not result.ok
    assert "Timed out after 2 s" in result.message()
    assert all(gone(pid) for pid in pids(result))
    no_children_left()
    with pytest.raises(LaunchFailed, match="Timed out"):
        launch(sleeper, processes=1, devices_per_process=1, timeout=1, echo=False, check=True)


def test_output_is_prefixed_with_the_process(sleeper, capsys):
    launch(sleeper, processes=2, devices_per_process=1, timeout=2)
    printed = capsys.readouterr().out.splitlines()
    assert {line[:5] for line in printed if "pid=" in line} == {"[p0] ", "[p1] "}


@pytest.mark.parametrize("kwargs, words", [
    ({"processes": 0, "devices_per_process": 4}, ["processes=0", ">= 1"]),
    ({"processes": 2, "devices_per_process": 0}, ["devices_per_process=0"]),
    ({"processes": 3, "devices_per_process": 4, "mesh": (2, 4)}, ["needs 8 devices", "give 12", "2 x 4"]),
])
def test_bad_arguments_say_what_to_do(kwargs, words):
    with pytest.raises(LaunchError) as error:
        launch(EXAMPLE, **kwargs)
    for word in words:
        assert word in str(error.value)


def test_missing_script():
    with pytest.raises(LaunchError, match="No script at 'nowhere.py'"):
        launch("nowhere.py", processes=2, devices_per_process=4)


def test_port_in_use_is_refused_clearly(sleeper):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"Port {port} on 127.0.0.1 is not free"):
            launch(sleeper, processes=1, devices_per_process=1, port=port)


def test_command_line_errors():
    run = subprocess.run([sys.executable, "-m", "course_utils.launch", "--processes", "0",
                          "--devices-per-process", "4", "--mesh", "2x4", str(EXAMPLE)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "processes=0" in run.stderr


def test_workers_die_with_a_killed_launcher(sleeper):
    """Even SIGKILL on the launcher (no clean-up possible) leaves no worker behind (Linux)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    cli = subprocess.Popen([sys.executable, "-m", "course_utils.launch", "--processes", "2",
                            "--devices-per-process", "1", str(sleeper)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    workers = []
    for line in cli.stdout:
        if m := re.search(r"pid=(\d+)", line):
            workers.append(int(m.group(1)))
        if len(workers) == 2:
            break
    cli.kill()
    cli.wait()
    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(pid) for pid in workers)


def test_a_port_taken_after_it_was_picked_is_replaced(tmp_path, monkeypatch):
    """The coordinator cannot bind the picked port: the launcher tries a fresh one."""
    script = tmp_path / "hello.py"
    script.write_text("from course_utils.multiprocess import setup_process\n"
                      "print(setup_process().summary(), flush=True)\n")
    from course_utils import launch as launch_module

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken])
        real_free_port = launch_module.free_port
        monkeypatch.setattr(launch_module, "free_port", lambda: next(ports, None) or real_free_port())
        result = launch(script, processes=1, devices_per_process=1, timeout=60)
    assert result.ok, result.message()
    assert result.port != taken
    no_children_left()
