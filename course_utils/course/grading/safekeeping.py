"""What a grading run keeps safe in the course directory, whatever a hand-in does: `CourseCopy`, `gradebook_ready`.

- **The gradebook is backed up before every run and after its scores are written** (`gradebook-backups/`,
  the newest `KEPT_BACKUPS`, written with SQLite's own backup, so a copy is never half a transaction), and
  checked first: one that SQLite
  cannot read or that fails its integrity check is set aside (`gradebook-backups/gradebook-damaged-*.db`,
  never deleted) and the newest healthy backup put in its place, saying so. With no healthy backup the
  run stops, naming both files, before anything is written.
- **Every file of the course directory is kept in memory while hand-ins run** (`CourseCopy`) and compared
  after each hand-in: a file a hand-in changed or deleted is put back, and one it added is moved to
  `grading-quarantine/<student>/`, and the hand-in's note says what it did. This is what stands
  between a hand-in and the gradebook where no sandbox runs (`sandbox`); under bubblewrap no hand-in
  can reach the course directory, so it is not needed (and a change then would be the teacher's own,
  through the formgrader say, which must not be undone).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

GRADEBOOK = "gradebook.db"
BACKUPS = "gradebook-backups"
QUARANTINE = "grading-quarantine"
KEPT_BACKUPS = 20  # two a run: before hand-ins run, and after their scores are written
UNGUARDED = ("grading.lock",)  # the run's own lock, held open while hand-ins run


class GradebookUnsafe(RuntimeError):
    """The course's gradebook cannot be read and no backup of it can, or it cannot be backed up."""


def gradebook_problem(path: Path) -> str | None:
    """Why SQLite cannot use the gradebook at `path` (None: it can), read only."""
    if not path.is_file():
        return "it is missing" if not os.path.lexists(path) else "it is not a file"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as error:
        return f"SQLite cannot read it ({error})"
    if verdict != "ok":
        return f"it fails SQLite's check ({verdict})"
    if "assignment" not in tables:
        return "it holds no nbgrader tables"
    return None


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 10**9:09d}"


def _backups(root: Path) -> list[Path]:
    return sorted((root / BACKUPS).glob("gradebook-2*.db"), reverse=True)  # newest first


def gradebook_ready(root: Path) -> str:
    """Checks the course's gradebook, restores it from a backup when damaged, and backs it up.

    Returns:
        "" or, when it was damaged, what was done (for the teacher).

    Raises:
        GradebookUnsafe: it is damaged and no backup is healthy, or it cannot be backed up (nothing is
            changed then).
    """
    path, said = root / GRADEBOOK, ""
    problem = gradebook_problem(path)
    if problem:
        healthy = next((b for b in _backups(root) if gradebook_problem(b) is None), None)
        if healthy is None:
            raise GradebookUnsafe(
                f"{path} is damaged: {problem}, and {root / BACKUPS} holds no healthy backup. Nothing was graded "
                f"or changed. Put back a copy of your own (from your backups), or move {path.name} aside and run "
                f"`python -m course_utils.course build nbgrader --out {root}` for a new, empty gradebook.")
        aside = root / BACKUPS / f"gradebook-damaged-{_stamp()}.db"
        if os.path.lexists(path):
            os.replace(path, aside)
        shutil.copy2(healthy, path)
        said = (f"{path} was damaged ({problem}): "
                + (f"it was set aside as {aside}, and " if os.path.lexists(aside) else "")
                + f"the newest healthy backup, {healthy}, was put in its place (scores written after it was "
                  f"taken are not in it: grade those assignments again).")
    back_up(root)
    return said


def back_up(root: Path) -> Path:
    """Copies the course's gradebook into `gradebook-backups/` (the newest `KEPT_BACKUPS` are kept).

    Raises:
        GradebookUnsafe: the copy could not be written (a full disk, say).
    """
    target = root / BACKUPS / f"gradebook-{_stamp()}.db"
    try:
        _back_up(root / GRADEBOOK, target)
    except (sqlite3.Error, OSError) as error:
        with contextlib.suppress(OSError):
            target.unlink()
        raise GradebookUnsafe(f"{root / GRADEBOOK} could not be backed up into {target.parent} ({error}). Free "
                              f"some space there (or make it writable), then grade again.") from None
    for old in _backups(root)[KEPT_BACKUPS:]:
        old.unlink()
    return target


def _back_up(source: Path, target: Path) -> None:
    target.parent.mkdir(exist_ok=True)
    with contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as live, \
            contextlib.closing(sqlite3.connect(target)) as copy:
        live.backup(copy)


@dataclass(frozen=True)
class _Kept:
    kind: str  # "file", "link" or "folder"
    mode: int
    data: bytes = b""
    digest: bytes = b""


def _read(path: Path) -> _Kept | None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return _Kept("link", 0, os.readlink(path).encode())
        if stat.S_ISDIR(info.st_mode):
            return _Kept("folder", stat.S_IMODE(info.st_mode))
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
    except OSError:
        return None
    return _Kept("file", stat.S_IMODE(info.st_mode), data, hashlib.sha256(data).digest())


class CourseCopy:
    """Every file and folder of a course directory, kept in memory, to put back what a hand-in changed."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.kept = self._walk()

    def _walk(self) -> dict[str, _Kept]:
        found = {}
        for folder, folders, files in os.walk(self.root):  # links are listed, never followed
            for name in [*folders, *files]:
                path = Path(folder) / name
                relative = str(path.relative_to(self.root))
                if relative not in UNGUARDED and (kept := _read(path)) is not None:
                    found[relative] = kept
        return found

    def keep(self, path: Path) -> None:
        """Takes a file the grader itself wrote (and the folders above it) into the copy."""
        path = Path(path)
        for each in [*reversed(path.relative_to(self.root).parents[:-1]), path.relative_to(self.root)]:
            self.kept[str(each)] = _read(self.root / each)

    def put_back(self, student: str) -> str:
        """Puts back what changed since the copy was taken; returns what a hand-in did ("" when nothing)."""
        now = self._walk()
        changed = sorted(k for k, v in self.kept.items() if k in now and _differs(v, now[k]))
        gone = sorted(k for k in self.kept if k not in now)
        added = sorted(k for k in now if k not in self.kept and not any(k.startswith(a + "/") for a in now
                                                                         if a not in self.kept and a != k))
        if not (changed or gone or added):
            return ""
        quarantine = self.root / QUARANTINE / student / _stamp()
        for relative in added:
            target = quarantine / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(self.root / relative, target)
        for relative in sorted(changed + gone, key=lambda k: k.count("/")):
            self._restore(relative)
        self.kept = self._walk()
        return _said(changed, gone, added, quarantine.relative_to(self.root))

    def _restore(self, relative: str) -> None:
        path, kept = self.root / relative, self.kept[relative]
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir() and kept.kind != "folder":
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if kept.kind == "folder":
            path.mkdir(exist_ok=True)
        elif kept.kind == "link":
            os.symlink(kept.data.decode(), path)
            return
        else:
            path.write_bytes(kept.data)
        path.chmod(kept.mode)


def _differs(kept: _Kept, now: _Kept) -> bool:
    return (kept.kind, kept.mode, kept.digest if kept.kind == "file" else kept.data) != (
        now.kind, now.mode, now.digest if now.kind == "file" else now.data)


def _said(changed, gone, added, quarantine) -> str:
    def listed(names):
        return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    parts = [f"changed {listed(changed)}" if changed else "", f"deleted {listed(gone)}" if gone else "",
             f"added {listed(added)} (moved to {quarantine})" if added else ""]
    return (f"while it was graded, this hand-in reached the course directory: {'; '.join(p for p in parts if p)}. "
            f"Everything was put back as it was before; look at its notebook in autograded/")

