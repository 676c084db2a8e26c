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
- **never waited on**: entries are written to a temporary file and renamed into place, so a reader
  sees a whole entry or none, and no lock is needed to read or write; the lock that guards dropping
  the oldest entries beyond the size limit is only tried: when another process holds it, they stay
  for the next write to drop. Files the course did not write (JAX's own `-cache` and `-atime`
  entries, a stray file) are left alone and never read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import stat
import tempfile
import warnings
from pathlib import Path

MAGIC = b"course-program-1\n"
SUFFIX = ".program"
LOCK = ".evict.lock"


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


def _group_has_others(gid: int) -> bool:
    """Whether a user other than this one is in group `gid` (a private group, as many systems give each user, has none)."""
    import grp
    import pwd

    try:
        me = pwd.getpwuid(os.getuid()).pw_name
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:  # a user or group without a name: assume the worst
        return True
    members |= {user.pw_name for user in pwd.getpwall() if user.pw_gid == gid}
    return bool(members - {me})


def _writable_by_others(info: os.stat_result) -> str | None:
    if info.st_uid != os.getuid():
        return "another user owns it"
    if info.st_mode & stat.S_IWOTH:
        return "every user may write to it"
    if info.st_mode & stat.S_IWGRP and _group_has_others(info.st_gid):
        return "its group, which has other users, may write to it"
    return None


def folder_problem(folder: Path, *, own: bool = False) -> str | None:
    """Why the course cannot keep its compiled programs in `folder` (None: it can), making it if needed.

    A folder another user can write to (or a folder above it that they can write to, other than a
    sticky one such as /tmp) could hand this user programs that compute something else; a folder
    that cannot be made or written to would warn on every compile. Both run uncached instead.

    Args:
        folder: The folder.
        own: The course chose it (its default folder): one this user owns that others may write to
            is made this user's alone (chmod 700) rather than refused.
    """
    if not folder.is_absolute():
        return (f"{str(folder)!r} is not an absolute path (a user name after '~' that does not exist, or a "
                f"relative path, which names another folder from each working directory)")
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        return f"{folder} exists and is not a folder"
    except OSError as error:
        return f"{folder} cannot be made: {error.strerror or error}"
    info = folder.stat()
    if own and info.st_uid == os.getuid() and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        folder.chmod(0o700)
        info = folder.stat()
    others = _writable_by_others(info)
    if others:
        return (f"{folder} is writable by other users ({others}: {stat.filemode(info.st_mode)}), who could "
                f"change the programs this user runs")
    for above in folder.parents:
        parent = above.stat()
        if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX:
            return (f"{above}, above {folder}, is writable by every user without the sticky bit, so another user "
                    f"could replace the folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by this user (mode {stat.filemode(info.st_mode)})"
    return None


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
    """

    def __init__(self, folder: Path, *, limit_bytes: int, machine: str | None = None):
        self._path = Path(folder)
        self.limit_bytes = limit_bytes
        self.machine = machine or machine_tag()
        self._warned: set[str] = set()

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
        with contextlib.suppress(OSError):
            os.utime(path)  # the newest use, for dropping the oldest beyond the limit
        return program

    def put(self, key: str, value: bytes) -> None:
        """Keeps `value` under `key`: written whole to a temporary file, then renamed into place."""
        if len(value) > self.limit_bytes:
            return
        path = self.entry(key)
        self.drop_oldest(room=len(value))
        handle, temporary = tempfile.mkstemp(dir=self._path, prefix=".writing-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(MAGIC + _digest(key, value) + value)
            os.replace(temporary, path)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            self._warn(path, f"could not be written ({error.strerror or error}); it is compiled again next run")

    def entries(self) -> list[Path]:
        """The programs this cache holds, for every machine."""
        return sorted(self._path.glob("*" + SUFFIX))

    def drop_oldest(self, *, room: int = 0) -> None:
        """Drops the least recently used entries until `room` more bytes fit under the limit.

        Only tried: while another process holds the lock, nothing is dropped (the next write will).
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
            total = sum(size for _, size, _ in kept)
            for _, size, path in sorted(kept):
                if total + room <= self.limit_bytes:
                    break
                with contextlib.suppress(OSError):
                    path.unlink()
                total -= size

    def _warn(self, path: Path, why: str) -> None:
        if path.name not in self._warned:
            self._warned.add(path.name)
            warnings.warn(f"The compilation cache's entry {path} {why}.", CacheWarning, stacklevel=3)


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
