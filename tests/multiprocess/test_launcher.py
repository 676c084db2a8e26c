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

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

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


def launched_processes_alive() -> list[int]:
    """Live processes carrying a launch's token, but for those in a Jupyter kernel's tree.

    The session's lesson runs and grading runs execute beside these tests: lesson 06 launches
    processes of its own from its kernel, and grading runs each hand-in's kernel below a keeper
    that carries its own token (a planted hand-in loops for 40 s). Neither is this module's to
    count; a launch starts no kernel. A process a launch left behind is re-parented away from
    its kernel (to init or a subreaper) and is counted wherever it came from.
    """
    alive = []
    for proc in psutil.process_iter():
        try:
            if (proc.status() != psutil.STATUS_ZOMBIE and process_group.TREE_ENV in proc.environ()
                    and not _in_a_kernels_tree(proc)):
                alive.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return alive


def _in_a_kernels_tree(proc: psutil.Process) -> bool:
    """Whether a Jupyter kernel is the process, one of its ancestors or one of its descendants."""
    family = [proc, *proc.parents(), *proc.children(recursive=True)]
    return any("ipykernel_launcher" in " ".join(member.cmdline()) for member in family)


def no_children_left(patience: float = 30.0):
    """No process a launch started is alive, once `patience` seconds have let any that are ending end: another
    test's launch, running meanwhile outside a kernel, ends within seconds; one a launch left behind never does."""
    deadline = time.monotonic() + patience
    while launched_processes_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    alive = launched_processes_alive()
    assert alive == [], [" ".join(psutil.Process(pid).cmdline())[:200] for pid in alive if psutil.pid_exists(pid)]


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


def test_a_printed_traceback_is_not_a_failure(tmp_path):
    """Judged by exit status alone: a worker that logs an error it caught and goes on is doing fine."""
    script = tmp_path / "logs.py"
    script.write_text(textwrap.dedent("""
        import time, traceback
        try:
            raise ValueError("bad input, handled")
        except ValueError:
            traceback.print_exc()
        time.sleep(6)  # longer than the 5 s of silence after a traceback that once counted as failing
        print("went on", flush=True)
    """))
    result = launch(script, processes=2, devices_per_process=1, timeout=60, echo=False)
    assert result.ok, result.message()
    assert all(lines[-1] == "went on" and "ValueError: bad input, handled" in lines for lines in result.lines)
    no_children_left()


def test_a_script_that_raises_without_setup_process_ends_at_once(tmp_path):
    """An uncaught error ends its process with exit status 1 at once (no wait in exit handlers)."""
    script = tmp_path / "raises.py"
    script.write_text(textwrap.dedent("""
        import atexit, os, time
        atexit.register(time.sleep, 120)  # as JAX's distributed shutdown waits for the others
        if os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] == "0":
            raise ValueError("bad input")
        time.sleep(120)
    """))
    start = time.monotonic()
    result = launch(script, processes=2, devices_per_process=1, timeout=60, echo=False)
    assert time.monotonic() - start < 10
    assert result.failed == 0 and result.returncodes[0] == 1, result.message()
    assert "Process 0 exited with code 1" in result.reason
    shown = result.last_lines(0)
    assert shown[-1] == "ValueError: bad input" and "run_script" not in "\n".join(shown)
    no_children_left()


def test_a_failing_exit_status_ends_at_once(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import atexit, sys, time\natexit.register(time.sleep, 120)\nsys.exit(3)\n")
    start = time.monotonic()
    result = launch(script, processes=1, devices_per_process=1, timeout=60, echo=False)
    assert time.monotonic() - start < 10 and result.returncodes == (3,)
    ok = tmp_path / "ok.py"
    ok.write_text("import sys\nprint(sys.argv[1:], __name__)\nsys.exit(0)\n")
    result = launch(ok, ["a", "b"], processes=1, devices_per_process=1, timeout=60, echo=False)
    assert result.ok and result.lines[0] == ("['a', 'b'] __main__",)


def test_timeout_stops_everything(sleeper):
    start = time.monotonic()
    result = launch(sleeper, processes=2, devices_per_process=1, timeout=2, echo=False)
    assert time.monotonic() - start < 10
    assert result.status == "timeout" and not result.ok
    assert "Timed out after 2 s" in result.message()
    for p, pid in enumerate(pids(result)):  # the processes the timeout caught, each named with its last line
        assert re.search(rf"process {p}, silent for \d+ s since its last line 'pid=", result.reason)
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
    ({"processes": 2, "devices_per_process": 4, "mesh": "2x4"}, ["Received: mesh='2x4'", "such as (2, 4)"]),
    ({"processes": 2, "devices_per_process": 4, "mesh": (2, 0)}, ["Received: mesh=(2, 0)"]),
    ({"processes": 2, "devices_per_process": 4, "port": 0}, ["Received: port=0"]),
    ({"processes": 2, "devices_per_process": 4, "timeout": float("nan")}, ["Received: timeout=nan"]),
    ({"processes": 2, "devices_per_process": 4, "retries": -1}, ["Received: retries=-1"]),
])
def test_bad_arguments_say_what_to_do(kwargs, words):
    with pytest.raises(LaunchError) as error:
        launch(EXAMPLE, **kwargs)
    for word in words:
        assert word in str(error.value)


def test_numpy_integers_are_whole_numbers(sleeper):
    result = launch(sleeper, processes=np.int64(2), devices_per_process=np.int32(1), mesh=(np.int64(2),),
                    timeout=1, echo=False)
    assert result.status == "timeout" and len(result.returncodes) == 2
    with pytest.raises(LaunchError, match="Received: processes=2.5"):
        launch(sleeper, processes=2.5, devices_per_process=1)
    with pytest.raises(LaunchError, match="Received: processes=True"):
        launch(sleeper, processes=True, devices_per_process=1)


def test_silent_process_is_named_at_the_timeout(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text("import os, time\nif os.environ['KERAS_DISTRIBUTION_PROCESS_ID'] == '0':\n"
                      "    print('done', flush=True)\nelse:\n    time.sleep(120)\n")
    result = launch(script, processes=2, devices_per_process=1, timeout=2, echo=False)
    assert result.status == "timeout"
    assert "Still running at the timeout: process 1, silent for 2 s having printed nothing." in result.reason
    assert "process 0" not in result.reason.split("Still running")[1]


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


# Starts a grandchild in its own session (it leaves the worker's process group), prints both pids (and
# writes them to PIDS/<process>), then ends as MODE says: "ok" exits 0, "fail": process 1 exits 3 once both
# wrote their pids while process 0 sleeps, "hang" sleeps (timeout or interrupt), "chatter" prints forever.
SPAWNER = """
import os, pathlib, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
line = f"pid={os.getpid()} grandchild={grandchild.pid}"
folder = pathlib.Path(os.environ["PIDS"])
(folder / os.environ["KERAS_DISTRIBUTION_PROCESS_ID"]).write_text(line)
print(line, flush=True)
mode = os.environ["MODE"]
if mode == "ok":
    sys.exit(0)
if mode == "fail" and os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] == "1":
    while len(list(folder.iterdir())) < 2:
        time.sleep(0.01)
    sys.exit(3)
while True:
    if mode == "chatter":
        print("x" * 60, flush=True)
    time.sleep(0.01)
"""


@pytest.fixture(scope="module")
def spawner(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spawner") / "spawner.py"
    path.write_text(SPAWNER)
    return path


def tree_pids(lines) -> list[int]:
    return [int(n) for line in lines for n in re.findall(r"(?:pid|grandchild)=(\d+)", line)]


def all_gone(pids, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not all(gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(gone(pid) for pid in pids)


@pytest.mark.parametrize("mode, status, timeout", [("ok", "ok", 30), ("fail", "failed", 30), ("hang", "timeout", 3)])
def test_no_process_of_the_tree_survives(spawner, monkeypatch, tmp_path, mode, status, timeout):
    monkeypatch.setenv("MODE", mode)
    monkeypatch.setenv("PIDS", str(tmp_path))
    result = launch(spawner, processes=2, devices_per_process=1, timeout=timeout, echo=False)
    assert result.status == status, result.message()
    pids = tree_pids(path.read_text() for path in tmp_path.iterdir())
    assert len(pids) == 4  # two workers, two grandchildren in sessions of their own
    assert all_gone(pids, within=0.5)  # gone when launch returns, not some time later
    no_children_left()


def cli(script, *options, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "course_utils.launch", *options, str(script)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def read_pids(stream, workers: int) -> list[int]:
    pids = []
    for line in stream:
        pids += tree_pids([line])
        if len(pids) == 2 * workers:
            return pids
    raise AssertionError("the launcher ended before every worker reported")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_launcher_leaves_nothing(spawner, tmp_path, sig):
    launcher = cli(spawner, "--processes", "2", "--devices-per-process", "1", "--timeout", "60", MODE="hang",
                   PIDS=str(tmp_path))
    pids = read_pids(launcher.stdout, 2)
    launcher.send_signal(sig)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 130 and "interrupted; stopped every process" in err
    assert all_gone(pids)


# A double-forked daemon with an empty environment in a session of its own, and a grandchild in its own
# session with an empty environment: neither carries the run's token, and neither is a child of the worker.
DAEMONS = """
import os, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, f"{os.getpid()}\\n".encode())
        os.execve(sys.executable, sleep, {})
    os._exit(0)
daemon = int(os.read(r, 100).split()[0])
grandchild = subprocess.Popen(sleep, start_new_session=True, env={})
print(f"pid={os.getpid()} daemon={daemon} grandchild={grandchild.pid}", flush=True)
if os.environ.get("MODE") == "hang":
    time.sleep(300)
"""


@pytest.fixture(scope="module")
def daemons(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("daemons") / "daemons.py"
    path.write_text(DAEMONS)
    return path


def daemon_pids(lines) -> list[int]:
    return [int(n) for line in lines for n in re.findall(r"(?:pid|daemon|grandchild)=(\d+)", line)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="keepers are Linux only")
def test_daemons_that_cleared_their_environment_are_stopped_at_a_normal_end(daemons):
    result = launch(daemons, processes=2, devices_per_process=1, timeout=60, echo=False)
    assert result.ok, result.message()
    pids = daemon_pids(line for lines in result.lines for line in lines)
    assert len(pids) == 6 and all_gone(pids, within=0.5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="keepers are Linux only")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_no_daemon_outlives_a_stopped_or_killed_launcher(daemons, sig):
    launcher = cli(daemons, "--processes", "2", "--devices-per-process", "1", "--timeout", "60", MODE="hang")
    pids = []
    for line in launcher.stdout:
        pids += daemon_pids([line])
        if len(pids) == 6:
            break
    launcher.send_signal(sig)
    launcher.communicate(timeout=30)
    assert launcher.returncode == (-9 if sig == signal.SIGKILL else 130)
    # a killed launcher cannot wait for them: its keepers stop them on their own (SIGTERM, a second's grace,
    # SIGKILL), which takes a few seconds more on a machine whose two cores are busy (make test's last minutes)
    assert all_gone(pids, within=30.0)


# Starts one keeper from its main thread while a thousand other threads wait, prints the pids below it, waits.
MANY_THREADS = """
import os, subprocess, sys, threading, time
for _ in range(1000):
    threading.Thread(target=time.sleep, args=(300,), daemon=True).start()
below = subprocess.Popen([sys.executable, "-S", sys.argv[1], str(os.getpid()), sys.executable, sys.argv[2]],
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "MODE": "hang"})
print(below.stdout.readline(), end="", flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="keepers are Linux only")
def test_a_keeper_whose_launcher_had_many_threads_stops_every_daemon_when_it_is_killed(daemons, tmp_path):
    """A launcher killed with SIGKILL sends its keepers the parent-death signal once for each thread it had.

    The kernel sends it again each time a dying thread hands the keeper to the next (kernel/exit.c,
    forget_original_parent). A keeper that handled the first and was cut short by the next left its
    daemons to init: 11 runs in 20 with a thousand threads, and once in make test's CI run with three.
    """
    parent = tmp_path / "many_threads.py"
    parent.write_text(MANY_THREADS)
    for _ in range(10):
        launcher = subprocess.Popen([sys.executable, str(parent), process_group.KEEPER, str(daemons)],
                                    stdout=subprocess.PIPE, text=True)
        found = daemon_pids([launcher.stdout.readline()])
        launcher.kill()
        launcher.communicate(timeout=30)
        assert len(found) == 3 and all_gone(found, within=10.0), [pid for pid in found if not gone(pid)]


def test_sigint_stops_a_launcher_that_inherited_it_ignored(spawner, tmp_path):
    """`launch ... &` in a script starts the launcher with SIGINT ignored; it still stops at once."""
    command = (f"trap '' INT; exec {sys.executable} -m course_utils.launch --processes 2 "
               f"--devices-per-process 1 --timeout 60 {spawner}")
    launcher = subprocess.Popen(["sh", "-c", command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "MODE": "hang", "PIDS": str(tmp_path)})
    pids = read_pids(launcher.stdout, 2)
    start = time.monotonic()
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 130 and time.monotonic() - start < 10
    assert "interrupted; stopped every process" in err
    assert all_gone(pids)


def test_output_piped_to_head_ends_quietly(spawner, tmp_path):
    launcher = cli(spawner, "--processes", "2", "--devices-per-process", "1", "--timeout", "60", MODE="chatter",
                   PIDS=str(tmp_path))
    pids = read_pids(launcher.stdout, 2)
    launcher.stdout.readline()
    launcher.stdout.close()  # what `| head -n 3` does after its third line
    err = launcher.stderr.read()
    assert launcher.wait(timeout=30) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert all_gone(pids)


@pytest.mark.parametrize("options, words", [
    (["--port", "0"], ["Received: port=0", "each process pick its own port", "Leave the port out"]),
    (["--port", "70000"], ["from 1 to 65535", "Received: port=70000"]),
    (["--port", "-1"], ["Received: port=-1"]),
    (["--timeout", "nan"], ["positive, finite", "timeout=nan"]),
    (["--timeout", "inf"], ["timeout=inf"]),
])
def test_bad_command_line_values_are_refused_before_anything_starts(sleeper, options, words):
    start = time.monotonic()
    launcher = cli(sleeper, "--processes", "2", "--devices-per-process", "1", *options)
    out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 2 and time.monotonic() - start < 30
    assert "Traceback" not in err and out == ""  # no worker ever printed
    for word in words:
        assert word in err


def test_silence_is_reported_while_waiting(sleeper, monkeypatch, capsys):
    monkeypatch.setattr(process_group, "QUIET_NOTICE_S", 0.5)
    result = launch(sleeper, processes=1, devices_per_process=1, timeout=2.5)
    assert result.status == "timeout"
    printed = capsys.readouterr().out
    assert "[launch] no output for 0.5 s from any process; still waiting (stopping all at the timeout, in" in printed
