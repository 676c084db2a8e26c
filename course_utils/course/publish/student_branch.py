"""The `student` branch: the repository as committed, with every lesson in its student version.

Binder launches a branch, so the branch students launch must not hold the answers: on it,
`notebooks/` holds the lessons without worked solutions, teacher's notes or the teacher's metadata
(`student_notebook`); the files only a teacher needs are left out (`TEACHER_FILES`: the tests hold
every exercise's right answers, docs/TEACHING.md the lecture plans), and every other file is the
commit's own. (The exercises' checkers stay: they run in the student's kernel, so they know what a
right answer is.) `write_student_branch` makes it from a commit (HEAD by
default) with git's plumbing commands and a private index: the working tree, the index and the
checked-out branch are never touched, so nothing uncommitted can be lost. Each run adds one commit
on top of the branch, or none when the lessons' student versions have not changed.

    make student-branch          # then: git push origin student
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.course.lesson_parts import student_notebook

BRANCH = "student"
TEACHER_FILES = ("tests", "docs/TEACHING.md")


@dataclass(frozen=True)
class StudentBranch:
    """What `write_student_branch` did: the branch, its commit, the source commit, and whether it moved."""

    branch: str
    commit: str
    source: str
    lessons: tuple[str, ...]
    changed: bool

    def __str__(self) -> str:
        what = "updated" if self.changed else "already up to date"
        return (f"branch '{self.branch}' {what} at {self.commit[:12]}: {len(self.lessons)} lessons without solutions "
                f"or teacher's notes, no {' or '.join(TEACHER_FILES)}, every other file as in {self.source[:12]}")


def _git(repo: Path, *args: str, env: dict | None = None, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, input=stdin,
                          env={**os.environ, **(env or {})}, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")
    return done.stdout.strip()


def write_student_branch(repo: str | os.PathLike = ".", *, source: str = "HEAD", branch: str = BRANCH,
                         folder: str = "notebooks") -> StudentBranch:
    """Writes (or moves forward) `branch`: `source`'s files with every lesson of `folder` as a student copy.

    Args:
        repo: The repository.
        source: The commit to copy (a branch, tag or hash); the lessons as committed there.
        branch: The branch to write.
        folder: The lessons' folder in the repository.

    Returns:
        A `StudentBranch`.
    """
    repo = Path(_git(Path(repo), "rev-parse", "--show-toplevel"))  # from any folder of the repository
    _refuse_checked_out(repo, source, branch)
    commit = _git(repo, "rev-parse", "--verify", f"{source}^{{commit}}")
    names = [n for n in _git(repo, "ls-tree", "--name-only", commit, f"{folder}/").splitlines()
             if Path(n).name[:2].isdigit() and n.endswith(".ipynb")]
    if not names:
        raise ValueError(f"{source} ({commit[:12]}) has no lessons in {folder}/: nothing to write to '{branch}'.")
    with tempfile.TemporaryDirectory() as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(repo, "read-tree", commit, env=index)
        _git(repo, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *TEACHER_FILES, env=index)
        for name in names:
            try:
                lesson = nbformat.reads(_git(repo, "show", f"{commit}:{name}"), as_version=4)
            except (ValueError, nbformat.reader.NotJSONError) as error:
                raise ValueError(f"{name}, as committed in {source} ({commit[:12]}), is not a notebook nbformat "
                                 f"can read ({type(error).__name__}: {str(error)[:120]}); nothing was written to "
                                 f"'{branch}'. Fix and commit it, then run make student-branch again.") from None
            text = nbformat.writes(student_notebook(lesson))
            blob = _git(repo, "hash-object", "-w", "--stdin", stdin=text)
            _git(repo, "update-index", "--cacheinfo", f"100644,{blob},{name}", env=index)
        tree = _git(repo, "write-tree", env=index)
    try:
        tip = _git(repo, "rev-parse", "--verify", f"refs/heads/{branch}")
    except RuntimeError:
        tip = None
    if tip is not None and _git(repo, "rev-parse", f"{tip}^{{tree}}") == tree:
        return StudentBranch(branch, tip, commit, tuple(names), changed=False)
    message = (f"Student version of {commit[:12]}: the lessons without worked solutions or teacher's notes\n\n"
               f"Written by `make student-branch` from {source}; without {', '.join(TEACHER_FILES)}, and every "
               f"other file as committed there.")
    new = _git(repo, "commit-tree", tree, *(["-p", tip] if tip else []), "-m", message, env=_identity(repo))
    _git(repo, "update-ref", f"refs/heads/{branch}", new, *([tip] if tip else []))
    return StudentBranch(branch, new, commit, tuple(names), changed=True)


def _refuse_checked_out(repo: Path, source: str, branch: str) -> None:
    """The branch is written from the lessons with their solutions: never while it is the one checked out."""
    try:
        head = _git(repo, "symbolic-ref", "--quiet", "HEAD")
    except RuntimeError:
        return  # a detached HEAD is no branch
    if head == f"refs/heads/{branch}":
        raise ValueError(f"'{branch}' is checked out here: make student-branch writes it from the branch with "
                         f"the worked solutions (source={source!r} is '{branch}' itself now), and moving the "
                         f"checked-out branch would leave this working tree behind it. Run `git checkout main`, "
                         f"then make student-branch again.")


def _identity(repo: Path) -> dict[str, str]:
    """Who the commit is by: git's own settings; where none are set, the course's build."""
    try:
        _git(repo, "var", "GIT_COMMITTER_IDENT")
        return {}
    except RuntimeError:  # no user.name / user.email configured (a fresh CI machine)
        name, email = "course_utils student build", "student-build@localhost"
        return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                "GIT_COMMITTER_EMAIL": email}
