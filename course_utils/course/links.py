"""Where the course is launched from: its Binder links, from the one place they are set.

The repository's public address is set once, in `pyproject.toml`:

    [tool.course]
    binder_repository = "gh/OWNER/REPO"      # Binder's form: gh/, gl/, git/ ... then the repository

`binder_url(ref)` gives the link to a branch, tag or commit: `main` (or a tag on it) for
self-study, with every solution; `student` (the branch `make student-branch` writes, or a tag on
it) for a class, where the lessons hold no solution and no teacher's note. Every document that
gives a Binder link (README.md, docs/TEACHING.md, the handout) writes exactly these links:
`python -m course_utils.course.links --write` rewrites them after the setting changes, and a test
fails when a document and the setting disagree.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "gh/OWNER/REPO"
FIRST_LESSON = "notebooks/00_start_here.ipynb"
STUDENT_BRANCH = "student"
DOCUMENTS = ("README.md", "docs/TEACHING.md")
_LINK = re.compile(r"https://mybinder\.org/v2/[^\s)`>\"]+")


def binder_repository(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The repository as Binder names it (`gh/OWNER/REPO`), from `[tool.course]` in pyproject.toml."""
    settings = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("course", {})
    repository = settings.get("binder_repository", PLACEHOLDER)
    if not re.fullmatch(r"(gh|gl|git|gist|zenodo|figshare|hydroshare|dataverse)/\S+", repository):
        raise ValueError(f"[tool.course] binder_repository in {pyproject} must be in Binder's form, e.g. "
                         f"'gh/OWNER/REPO' for GitHub. Received: {repository!r}.")
    return repository


def binder_url(ref: str, *, repository: str | None = None, lesson: str = FIRST_LESSON) -> str:
    """The Binder link that opens JupyterLab on `lesson` of the repository at `ref` (branch, tag or commit)."""
    return f"https://mybinder.org/v2/{repository or binder_repository()}/{ref}?urlpath=lab/tree/{lesson}"


def links(repository: str | None = None) -> dict[str, str]:
    """The course's two Binder links: for self-study (`main`) and for a class (`student`)."""
    return {"self-study": binder_url("main", repository=repository),
            "class": binder_url(STUDENT_BRANCH, repository=repository)}


def stale_links(text: str, repository: str | None = None) -> list[str]:
    """The Binder links in `text` that do not name the repository as set (any ref and lesson may follow)."""
    prefix = f"https://mybinder.org/v2/{repository or binder_repository()}/"
    return [link for link in _LINK.findall(text) if not link.startswith(prefix)]


def rewrite(text: str, old: str, new: str) -> str:
    """`text` with every Binder link to repository `old` pointing to `new` instead."""
    return text.replace(f"https://mybinder.org/v2/{old}/", f"https://mybinder.org/v2/{new}/")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course.links", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the Binder links of README.md and docs/TEACHING.md to the repository set")
    args = parser.parse_args(argv)
    repository = binder_repository()
    for name, url in links(repository).items():
        print(f"{name:10} {url}")
    if args.write:
        for document in DOCUMENTS:
            path = ROOT / document
            text = path.read_text(encoding="utf-8")
            for link in stale_links(text, repository):
                old = "/".join(link.removeprefix("https://mybinder.org/v2/").split("/")[:3])
                text = rewrite(text, old, repository)
            path.write_text(text, encoding="utf-8")
            print(f"{document}: every Binder link names {repository}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
