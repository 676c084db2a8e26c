"""Whether a folder can hold the course's compiled programs: `folder_problem`, `write_problem`.

A folder another user can write to (or a folder above it that they can write to, other than a sticky
one such as /tmp) could hand this user programs that compute something else, so it is refused; a folder
this user cannot write to (a read-only file system, a full disk, another owner's permissions) is said
so in plain words, the file system's own reason first (`unwritable`), never as a bare mode.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

WRITING = ".writing-"  # a temporary file's name: WRITING, the writer's pid, "-", random letters


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
    that cannot be made holds nothing. Both run uncached instead. Whether this user can write in it
    is `write_problem`'s to say.

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
    return None


def write_problem(folder: Path) -> str | None:
    """Why this user cannot write into `folder` (None: a file was written there and removed), in plain words."""
    try:
        handle, probe = temporary_file(folder)
    except OSError as error:
        return unwritable(folder, error)
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def unwritable(folder: Path, error: OSError) -> str:
    """What a failed write into `folder` means: a read-only file system, a full disk, or whose folder it is."""
    if error.errno == errno.EROFS:
        return f"{folder} is on a read-only file system (mounted read-only), so nothing can be written there"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk holding {folder} is full ({error.strerror})"
    import pwd

    try:
        info = folder.stat()
        owner = pwd.getpwuid(info.st_uid).pw_name
        whose = f"; the folder is {stat.filemode(info.st_mode)}, owned by {owner}"
        me = pwd.getpwuid(os.getuid()).pw_name
    except (OSError, KeyError):
        whose, me = "", str(os.getuid())
    return f"this user ({me}) cannot write in {folder} ({error.strerror or error}{whose})"


def temporary_file(folder: Path) -> tuple[int, str]:
    """A new temporary file in `folder`, named for the process writing it: (its descriptor, its path)."""
    return tempfile.mkstemp(dir=folder, prefix=f"{WRITING}{os.getpid()}-")
