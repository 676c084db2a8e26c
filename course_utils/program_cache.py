"""The compilation cache the course turns on: JAX's persistent cache, with every entry checked.

JAX keeps compiled programs on disk and trusts what it finds there: two entries swapped, or an entry
written by someone else, and a function computes what another program computes, silently (JAX's own
documentation: "Do not share a compilation cache with users you do not trust"). The course keeps
programs in a cache of its own shape, which JAX reads and writes through its cache interface
(`jax_internals.READS`), so that no entry can change a result:

- **checked**: each entry holds a SHA-256 digest of its key and its program; an entry that does not
  match (swapped, truncated, damaged, of another format) is a miss: the program is compiled again and
  the entry replaced, with one `CacheWarning`.
- **this machine's**: an entry's name carries the machine's CPU (model and instruction sets): XLA
  compiles a CPU program for its host, and another CPU's program gives that CPU's rounding, or none.
- **the user's own**: a folder that another user can write to (or reach by a folder they can write
  to) is refused (`folder_problem`), and an entry owned by another user is never read.
- **never waited on**: entries are written to a temporary file (`.writing-<pid>-...`) and renamed into
  place, so a reader sees a whole entry or none, and no lock is needed to read or write; the lock that
  guards dropping the oldest entries beyond the size limit is only tried: when another process holds
  it, they stay for the next write to drop. A temporary file counts toward the limit, and one whose
  writer is gone (killed between writing and renaming) is deleted. Files the course did not write
  (JAX's own `-cache` and `-atime` entries, a stray file) are left alone and never read.
- **never in the way**: a folder that cannot be written to (a read-only file system, a full disk,
  another owner's permissions) is read but not written, and said so once (`CacheWarning`), whatever
  the number of programs compiled; JAX never sees a failed write.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import time
import warnings
from pathlib import Path

from course_utils.cache_folder import WRITING, folder_problem, temporary_file, unwritable, write_problem  # noqa: F401

MAGIC = b"course-program-1\n"
SUFFIX = ".program"
LOCK = ".evict.lock"
STALE_S = 3600  # a temporary file untouched this long is abandoned, whatever its pid says (another machine's)


class CacheWarning(UserWarning):
    """The course's compilation cache could not be used as it is, and the course said what it did instead."""


def machine_tag(cpuinfo: str | None = None) -> str:
    """A short name for this machine's CPU, part of every entry's name: its model and its instruction sets.

    Args:
        cpuinfo: The text of /proc/cpuinfo; read from the machine when None (elsewhere, the
            processor Python reports).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    first = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in wanted:
            first.setdefault(name.strip(), " ".join(sorted(value.split())) if name.strip() in ("flags", "Features")
                             else value.strip())
    described = repr(sorted(first.items())) + platform.machine() + (platform.processor() if not first else "")
    return hashlib.sha256(described.encode()).hexdigest()[:12]


def _digest(key: str, program: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + program).digest()


class CheckedCache:
    """Compiled programs kept in a folder, each checked against its key when read (see the module).

    It has the two methods JAX's cache interface asks for, `get(key)` and `put(key, value)`;
    `install` puts it where JAX looks for its cache.

    Args:
        folder: The cache's folder (already vetted by `folder_problem`).
        limit_bytes: The oldest entries are dropped beyond this total.
        machine: This machine's CPU (`machine_tag()`).
        read_only: Read programs, never write or touch a file (a folder that cannot be written to, or
            a grading sandbox's view of the teacher's cache).
    """

    def __init__(self, folder: Path, *, limit_bytes: int, machine: str | None = None, read_only: bool = False):
        self._path = Path(folder)
        self.limit_bytes = limit_bytes
        self.machine = machine or machine_tag()
        self.read_only = read_only
        self._warned: set[str] = set()
        self._write_failed = False

    def entry(self, key: str) -> Path:
        """The file of the program kept under JAX's `key` on this machine."""
        name = f"{key}.{self.machine}"
        if len(name) > 200:  # file names stop at 255 bytes
            name = hashlib.sha256(name.encode()).hexdigest()
        return self._path / (name + SUFFIX)

    def get(self, key: str) -> bytes | None:
        """The program kept under `key`, or None (a miss) when there is none or it fails its check."""
        path = self.entry(key)
        try:
            with open(path, "rb") as file:
                owner = os.fstat(file.fileno()).st_uid
                data = file.read()
        except FileNotFoundError:
            return None
        except OSError as error:
            self._warn(path, f"cannot be read ({error.strerror or error})")
            return None
        if owner != os.getuid():
            self._warn(path, "belongs to another user, so it is not read")
            return None
        head, digest, program = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
        if head != MAGIC or digest != _digest(key, program):
            self._warn(path, "does not match its check (swapped, damaged or cut short); compiling it again")
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        if not self.read_only:
            with contextlib.suppress(OSError):
                os.utime(path)  # the newest use, for dropping the oldest beyond the limit
        return program

    def put(self, key: str, value: bytes) -> None:
        """Keeps `value` under `key`: written whole to a temporary file, then renamed into place.

        Never raises: the first write that fails warns once (`CacheWarning`) for the whole process.
        """
        if len(value) > self.limit_bytes or self.read_only:
            return
        temporary = None
        try:
            self.drop_oldest(room=len(value))
            handle, temporary = temporary_file(self._path)
            with os.fdopen(handle, "wb") as file:
                file.write(MAGIC + _digest(key, value) + value)
            os.replace(temporary, self.entry(key))
        except OSError as error:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            self._failed_write(error)

    def _failed_write(self, error: OSError) -> None:
        if self._write_failed:
            return
        self._write_failed = True
        warnings.warn(f"The compilation cache cannot keep programs: {unwritable(self._path, error)}. Programs "
                      f"compiled from now on are not kept (those already there are still used), and this is not "
                      f"said again in this process. To keep them, free space there or make the folder writable, "
                      f"or set COURSE_COMPILATION_CACHE to a folder of your own (or to off), then restart the "
                      f"kernel.", CacheWarning, stacklevel=4)

    def entries(self) -> list[Path]:
        """The programs this cache holds, for every machine."""
        return sorted(self._path.glob("*" + SUFFIX))

    def drop_oldest(self, *, room: int = 0) -> None:
        """Drops the least recently used entries until `room` more bytes fit under the limit.

        Only tried: while another process holds the lock, nothing is dropped (the next write will).
        Temporary files count toward the limit; those whose writer is gone are deleted.

        Raises:
            OSError: the folder's lock cannot be opened (`put` turns it into its one warning).
        """
        with open(self._path / LOCK, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return
            kept = []
            for path in self.entries():
                with contextlib.suppress(OSError):
                    info = path.stat()
                    kept.append((info.st_mtime_ns, info.st_size, path))
            total = sum(size for _, size, _ in kept) + self._writing_bytes()
            for _, size, path in sorted(kept):
                if total + room <= self.limit_bytes:
                    break
                with contextlib.suppress(OSError):
                    path.unlink()
                total -= size

    def tidy(self) -> None:
        """Deletes the temporary files killed writers left, and the oldest entries beyond the limit; never raises."""
        with contextlib.suppress(OSError):
            self.drop_oldest()

    def _writing_bytes(self) -> int:
        """The bytes of temporary files still being written; those a killed writer left are deleted first."""
        total = 0
        for path in self._path.glob(WRITING + "*"):
            with contextlib.suppress(OSError):
                info = path.stat()
                pid = path.name[len(WRITING):].split("-", 1)[0]
                if (pid.isdigit() and not _running(int(pid))) or time.time() - info.st_mtime > STALE_S:
                    path.unlink()
                else:
                    total += info.st_size
        return total

    def _warn(self, path: Path, why: str) -> None:
        if path.name not in self._warned:
            self._warned.add(path.name)
            warnings.warn(f"The compilation cache's entry {path} {why}.", CacheWarning, stacklevel=3)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def install(cache: CheckedCache) -> None:
    """Makes `cache` the one JAX reads and writes compiled programs through, in this process.

    JAX's cache folder is set to the same folder, so that JAX counts its persistent cache as on.
    """
    import jax
    from jax._src import compilation_cache

    jax.config.update("jax_compilation_cache_dir", str(cache._path))
    with compilation_cache._cache_initialized_mutex:
        compilation_cache._cache = cache
        compilation_cache._cache_initialized = True


def installed() -> CheckedCache | None:
    """The checked cache JAX uses in this process, or None (no cache, or JAX's own)."""
    from jax._src import compilation_cache

    cache = compilation_cache._cache
    return cache if isinstance(cache, CheckedCache) else None
