"""The course's compilation cache: no entry it holds can change a result (course_utils/program_cache.py)."""

import errno
import fcntl
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from course_utils import xla_settings as compiling
from course_utils.program_cache import (MAGIC, SUFFIX, CacheWarning, CheckedCache, folder_problem, installed,
                                        machine_tag)

ROOT = Path(__file__).resolve().parents[1]
AS_ROOT = os.getuid() == 0


@pytest.fixture
def cache(tmp_path):
    folder = tmp_path / "cache"
    assert folder_problem(folder) is None
    return CheckedCache(folder, limit_bytes=10_000, machine="machine-a")


def _quiet_get(cache, key):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = cache.get(key)
    return value, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def test_a_program_is_read_back_as_written(cache):
    cache.put("jit_f-1", b"program f")
    assert cache.get("jit_f-1") == b"program f"
    assert cache.entry("jit_f-1").read_bytes().startswith(MAGIC)
    assert cache.get("jit_g-2") is None


def test_swapped_entries_are_misses_with_a_warning_and_are_replaced(cache):
    cache.put("jit_f-1", b"program f")
    cache.put("jit_g-2", b"program g")
    f, g = cache.entry("jit_f-1"), cache.entry("jit_g-2")
    f_bytes, g_bytes = f.read_bytes(), g.read_bytes()
    f.write_bytes(g_bytes)
    g.write_bytes(f_bytes)
    value, said = _quiet_get(cache, "jit_f-1")
    assert value is None and len(said) == 1 and "does not match its check" in said[0] and str(f) in said[0]
    assert not f.exists()  # dropped, so the program compiled again takes its place
    cache.put("jit_f-1", b"program f")
    assert cache.get("jit_f-1") == b"program f"


@pytest.mark.parametrize("damage", [lambda b: b[:-3], lambda b: b[:len(MAGIC) + 10], lambda b: b"",
                                    lambda b: b[:-1] + bytes([b[-1] ^ 1]), lambda b: b"\x00" * len(b)])
def test_a_damaged_entry_is_a_miss(cache, damage):
    cache.put("jit_f-1", b"program f")
    path = cache.entry("jit_f-1")
    path.write_bytes(damage(path.read_bytes()))
    value, said = _quiet_get(cache, "jit_f-1")
    assert value is None and said


def test_another_cpus_programs_are_never_read(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    CheckedCache(folder, limit_bytes=10_000, machine="avx512-box").put("jit_f-1", b"avx512 program")
    assert CheckedCache(folder, limit_bytes=10_000, machine="avx2-box").get("jit_f-1") is None


def test_the_machine_tag_follows_the_cpu_not_the_core():
    avx2 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: sse4_2 avx avx2 fma\n"
    assert machine_tag(avx2) == machine_tag(avx2 + "processor\t: 1\nmodel name\t: AMD EPYC\nflags\t: avx\n")
    assert machine_tag(avx2) != machine_tag(avx2.replace(" avx2 fma", ""))
    assert machine_tag(avx2) != machine_tag(avx2.replace("AMD EPYC", "Intel Xeon"))


@pytest.mark.skipif(not AS_ROOT, reason="giving a file to another user needs root")
def test_an_entry_another_user_owns_is_never_read(cache):
    cache.put("jit_f-1", b"program f")
    os.chown(cache.entry("jit_f-1"), 12345, -1)
    value, said = _quiet_get(cache, "jit_f-1")
    assert value is None and "belongs to another user" in said[0]


def test_a_full_disk_warns_once_whatever_the_number_of_programs_and_leaves_no_partial_file(cache, monkeypatch):
    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(4):  # four programs compiled: one warning, as the README says
            cache.put(f"jit_f-{i}", b"program f")
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and f"the disk holding {cache._path} is full (No space left on device)" in said[0]
    assert "not said again" in said[0]
    assert list(cache._path.iterdir()) == [cache._path / ".evict.lock"]


def test_a_folder_turned_read_only_mid_run_warns_once_in_the_courses_words(cache, monkeypatch):
    import tempfile

    cache.put("jit_f-1", b"program f")
    (cache._path / ".evict.lock").unlink()
    (cache._path / ".evict.lock").mkdir()  # the lock cannot be opened: JAX used to report it, entry and all
    with pytest.warns(CacheWarning, match="The compilation cache cannot keep programs"):
        cache.put("jit_g-2", b"program g")  # never raises: JAX would say "Error writing ... .evict.lock"
    (cache._path / ".evict.lock").rmdir()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    later = CheckedCache(cache._path, limit_bytes=10_000, machine="machine-a")  # the next process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            later.put(f"jit_h-{i}", b"program h")
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and f"{cache._path} is on a read-only file system" in said[0]
    assert later.get("jit_f-1") == b"program f"  # what is kept is still read


def test_a_temporary_file_a_killed_writer_left_is_counted_and_removed(cache):
    dead = cache._path / ".writing-4194999-abc"  # above any pid Linux hands out: its writer is gone
    dead.write_bytes(bytes(5000))
    old_style = cache._path / ".writing-xyz"  # an earlier version's name, abandoned long ago
    old_style.write_bytes(bytes(100))
    os.utime(old_style, (0, 0))
    live = cache._path / f".writing-{os.getpid()}-live"  # a writer still at work: counted, kept
    live.write_bytes(bytes(3000))
    for i in range(4):
        cache.put(f"jit_f-{i}", bytes(2000))
        os.utime(cache.entry(f"jit_f-{i}"), ns=(i * 10**9, i * 10**9))
    assert not dead.exists() and not old_style.exists() and live.exists()
    kept = sum(p.stat().st_size for p in cache.entries()) + live.stat().st_size
    assert kept <= cache.limit_bytes and len(cache.entries()) == 3  # the oldest dropped to make room


def test_a_read_only_cache_reads_and_never_writes(cache):
    cache.put("jit_f-1", b"program f")
    reader = CheckedCache(cache._path, limit_bytes=10_000, machine="machine-a", read_only=True)
    before = cache.entry("jit_f-1").stat().st_mtime_ns
    assert reader.get("jit_f-1") == b"program f" and cache.entry("jit_f-1").stat().st_mtime_ns == before
    reader.put("jit_g-2", b"program g")
    assert reader.get("jit_g-2") is None and len(cache.entries()) == 1


def test_the_oldest_entries_are_dropped_beyond_the_limit(cache):
    for i in range(4):  # four of 2,049 bytes fit in 10,000; a fifth does not
        cache.put(f"jit_f-{i}", bytes(2000))
        os.utime(cache.entry(f"jit_f-{i}"), ns=(i * 10**9, i * 10**9))
    cache.get("jit_f-0")  # used now: the newest
    cache.put("jit_f-9", bytes(2000))
    kept = {path.name.split(".")[0] for path in cache.entries()}
    assert kept == {"jit_f-0", "jit_f-2", "jit_f-3", "jit_f-9"}


@pytest.mark.processes
def test_a_lock_another_process_holds_is_never_waited_on(cache):
    lock = open(cache._path / ".evict.lock", "a")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"f = open({str(cache._path / '.evict.lock')!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OSError):  # it really is held
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        writer = threading.Thread(target=lambda: [cache.put(f"jit_f-{i}", bytes(3000)) for i in range(5)])
        writer.start()
        writer.join(timeout=60)  # a hang guard only: the writes never wait for the lock
        assert not writer.is_alive()
        assert cache.get("jit_f-4") == bytes(3000)
        assert len(cache.entries()) == 5  # over the limit: nothing dropped while the lock is held
    finally:
        holder.kill()
        holder.wait()
        lock.close()
    cache.put("jit_f-5", bytes(3000))  # the next write drops what the held lock kept
    assert len(cache.entries()) == 3


def test_stray_files_are_left_alone_and_never_read(cache):
    (cache._path / "jit_f-1-cache").write_bytes(b"JAX's format, without its -atime")
    (cache._path / ("jit_f-1.machine-a" + SUFFIX + ".tmp")).write_bytes(b"junk")
    cache.put("jit_f-1", b"program f")
    assert cache.get("jit_f-1") == b"program f"
    assert (cache._path / "jit_f-1-cache").exists()


def test_a_folder_others_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "writable by other users (every user may write to it" in folder_problem(shared)
    shared.chmod(0o700)
    assert folder_problem(shared) is None
    open_parent = tmp_path / "open"
    (open_parent / "cache").mkdir(parents=True)
    open_parent.chmod(0o777)
    assert "is writable by every user without the sticky bit" in folder_problem(open_parent / "cache")
    open_parent.chmod(0o1777)  # as /tmp: others cannot rename what they do not own
    assert folder_problem(open_parent / "cache") is None


def test_the_courses_own_folder_is_made_private_rather_than_refused(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    own.chmod(0o777)
    assert folder_problem(own, own=True) is None
    assert own.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(not AS_ROOT, reason="a folder of another user needs root to make")
def test_a_folder_another_user_owns_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 12345, -1)
    assert "another user owns it" in folder_problem(theirs)


@pytest.mark.parametrize("error, said", [
    (errno.EROFS, "{folder} is on a read-only file system (mounted read-only)"),
    (errno.ENOSPC, "the disk holding {folder} is full"),
    (errno.EACCES, "cannot write in {folder} (Permission denied; the folder is drwx"),
])
def test_a_folder_that_cannot_be_written_says_why(tmp_path, monkeypatch, error, said):
    import tempfile

    from course_utils.program_cache import write_problem

    def refused(*args, **kwargs):  # root may write anywhere: say it may not, as the file system would
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert said.format(folder=tmp_path) in write_problem(tmp_path)
    monkeypatch.undo()
    assert write_problem(tmp_path) is None and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("setting, said", [
    ("{file}", "exists and is not a folder"),
    ("{file}/cache", "cannot be made: Not a directory"),
    ("relative/cache", "is not an absolute path"),
    ("~nosuchuser_course/cache", "is not an absolute path (a user name after '~' that does not exist"),
])
def test_every_bad_cache_setting_is_named_with_its_variable(tmp_path, monkeypatch, setting, said):
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    value = setting.format(file=file)
    monkeypatch.setenv(compiling.CACHE_ENV, value)
    problem = compiling.cache_problem()
    assert problem.startswith(f"{compiling.CACHE_ENV}={value!r}: ") and said in problem


def test_jax_own_cache_variable_is_named_when_it_is_the_one_set(tmp_path, monkeypatch):
    monkeypatch.delenv(compiling.CACHE_ENV, raising=False)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "cache-here")
    assert compiling.cache_problem().startswith("JAX_COMPILATION_CACHE_DIR='cache-here': ")


def test_the_course_runs_through_its_checked_cache():
    assert installed() is not None and installed()._path == Path(os.environ[compiling.CACHE_ENV])


_TWO_PROGRAMS = (
    "import json, warnings\n"
    "warnings.simplefilter('always')\n"
    "from course_utils import setup_devices\n"
    "setup = setup_devices(1)\n"
    "import jax, jax.numpy as jnp\n"
    "x = jnp.arange(4.0)\n"
    "print(json.dumps([setup.compilation_cache, jax.jit(lambda x: 2 * x + 1)(x).tolist(),\n"
    "                  jax.jit(lambda x: 3 * x - 1)(x).tolist()]))\n"
)


def _run(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "COURSE_PLATFORM": "cpu", **env})


@pytest.mark.processes
def test_two_entries_swapped_on_disk_still_give_the_right_answers(tmp_path):
    folder = tmp_path / "cache"
    first = _run(_TWO_PROGRAMS, COURSE_COMPILATION_CACHE=str(folder))
    assert first.returncode == 0, first.stderr
    lambdas = sorted(path for path in folder.glob("jit__lambda*" + SUFFIX))
    assert len(lambdas) == 2
    one, two = (path.read_bytes() for path in lambdas)
    lambdas[0].write_bytes(two)
    lambdas[1].write_bytes(one)
    second = _run(_TWO_PROGRAMS, COURSE_COMPILATION_CACHE=str(folder))
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    assert '[1.0, 3.0, 5.0, 7.0], [-1.0, 2.0, 5.0, 8.0]]' in second.stdout
    assert second.stderr.count("does not match its check") == 2


@pytest.mark.processes
def test_a_bad_cache_folder_warns_once_and_the_course_runs_uncached(tmp_path):
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    run = _run(_TWO_PROGRAMS, COURSE_COMPILATION_CACHE=str(file))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].startswith("[null, [1.0, 3.0, 5.0, 7.0]")
    assert run.stderr.count("CacheWarning") == 1
    assert "exists and is not a folder. The course runs without its compilation cache" in run.stderr


def test_a_read_only_cache_folder_is_named_as_such_with_its_setting(tmp_path, monkeypatch):
    import tempfile

    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(compiling.CACHE_ENV, str(folder))

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    said = compiling.cache_read_only()  # was: "not writable by this user (mode drwx------)", a mode that allows it
    assert said == f"{compiling.CACHE_ENV}={str(folder)!r}: {folder} is on a read-only file system (mounted " \
                   f"read-only), so nothing can be written there"
    assert compiling.cache_problem() is None  # read, not refused
    monkeypatch.setenv(compiling.READ_ONLY_ENV, "1")  # read-only on purpose (a grading sandbox): nothing to say
    assert compiling.cache_read_only() is None
