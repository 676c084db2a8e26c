"""Where the course is launched from: its Binder links, from the one place they are set.

The repository's public address is set once, in `pyproject.toml`:

    [tool.course]
    binder_repository = "gh/OWNER/REPO"      # Binder's form: gh/, gl/ or git/, then the repository

The forms are Binder's own: `gh/OWNER/REPO` (GitHub), `gl/NAMESPACE/PROJECT` (GitLab; written
`gl/NAMESPACE%2FPROJECT` in a link, as Binder reads it) and `git/URL` (any git server; the URL
escaped in a link, `git/https%3A%2F%2Fexample.org%2Fme%2Fcourse`). Only these name a branch: the
course needs two (and tags), so Zenodo, Figshare and the other archive forms are refused.

`binder_url(ref)` gives the link to a branch, tag or commit: `main` (or a tag on it) for
self-study, with every solution; `student` (the branch `make student-branch` writes, or a tag on
it) for a class, where the lessons hold no solution and no teacher's note. Every document that
gives a Binder link (README.md, docs/TEACHING.md, the handout) writes exactly these links:
`python -m course_utils.course links --write` rewrites them after the setting changes (from any
form to any other, each link keeping its ref and the lesson it opens), and a test fails when a
document and the setting disagree (`stale_links`).
"""

from __future__ import annotations

import argparse
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote, unquote

ROOT = Path(__file__).resolve().parents[3]
PLACEHOLDER = "gh/OWNER/REPO"
FIRST_LESSON = "notebooks/00_start_here.ipynb"
STUDENT_BRANCH = "student"
DOCUMENTS = ("README.md", "docs/TEACHING.md")
BINDER = "https://mybinder.org/v2/"
FORMS = ("gh", "gl", "git")  # Binder's forms that name a branch or tag
_LINK = re.compile(r"https://mybinder\.org/v2/[^\s)`>\"]+")


@dataclass(frozen=True)
class BinderLink:
    """A Binder link in its parts: the repository in Binder's form, the ref, what follows `?` (verbatim)."""

    repository: str  # as a link writes it: gh/OWNER/REPO, gl/NAMESPACE%2FPROJECT, git/ESCAPED-URL
    ref: str
    query: str = ""  # e.g. "urlpath=lab/tree/notebooks/00_start_here.ipynb"

    def __str__(self) -> str:
        return f"{BINDER}{self.repository}/{self.ref}" + (f"?{self.query}" if self.query else "")


def canonical(repository: str) -> str | None:
    """`repository` as a link writes it (`gl/me/course` -> `gl/me%2Fcourse`); None when it is no form of `FORMS`."""
    kind, _, name = repository.partition("/")
    if kind == "gh" and re.fullmatch(r"[^/\s%?#]+/[^/\s%?#]+", name):
        return repository
    if kind == "gl" and re.fullmatch(r"[^/\s?#]+(/[^/\s?#]+)+", unquote(name)):
        return f"gl/{quote(unquote(name), safe='')}"
    if kind == "git" and re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+|[^/\s]+@[^/\s]+:\S+", unquote(name)):
        return f"git/{quote(unquote(name), safe='')}"
    return None


def binder_repository(pyproject: Path | None = None) -> str:
    """The repository as a Binder link names it (`gh/OWNER/REPO`), from `[tool.course]` in pyproject.toml."""
    pyproject = pyproject or ROOT / "pyproject.toml"
    try:
        settings = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("course", {})
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{pyproject} is not valid TOML ({error}), so the Binder links cannot be read from it. "
                         f"Fix that line; the setting reads: [tool.course] binder_repository = \"gh/OWNER/REPO\"."
                         ) from None
    repository = settings.get("binder_repository", PLACEHOLDER)
    written = canonical(repository) if isinstance(repository, str) else None
    if written is None:
        raise ValueError(f"[tool.course] binder_repository in {pyproject} must be in Binder's form, e.g. "
                         f"'gh/OWNER/REPO' for GitHub, 'gl/NAMESPACE/PROJECT' for GitLab or "
                         f"'git/https://example.org/me/course.git' for another git server (the course's links "
                         f"name a branch: Binder's archive forms such as zenodo/ cannot). Received: {repository!r}.")
    return written


def placeholder_warning(repository: str | None = None) -> str | None:
    """What to do when the setting is still the placeholder `gh/OWNER/REPO` (whose links lead nowhere); else None."""
    if (repository or binder_repository()) != PLACEHOLDER:
        return None
    return (f"binder_repository under [tool.course] in pyproject.toml is still the placeholder {PLACEHOLDER!r}, so "
            f"its Binder links ({BINDER}{PLACEHOLDER}/...) lead nowhere. Set it to your repository (e.g. "
            f"'gh/your-name/your-course'), run `python -m course_utils.course links --write`, then build again.")


def binder_url(ref: str, *, repository: str | None = None, lesson: str = FIRST_LESSON) -> str:
    """The Binder link that opens JupyterLab on `lesson` of the repository at `ref` (branch, tag or commit)."""
    return str(BinderLink(repository or binder_repository(), ref, f"urlpath=lab/tree/{lesson}"))


def links(repository: str | None = None) -> dict[str, str]:
    """The course's two Binder links: for self-study (`main`) and for a class (`student`)."""
    return {"self-study": binder_url("main", repository=repository),
            "class": binder_url(STUDENT_BRANCH, repository=repository)}


def parse(link: str) -> BinderLink | None:
    """A Binder link of a form in `FORMS` in its parts, whatever repository it names; None when it is not one
    (no ref, or another form). Also reads GitLab and git addresses written unescaped, as Binder does not."""
    spec, _, query = link.removeprefix(BINDER).partition("?")
    kind, _, rest = spec.partition("/")
    if kind == "gh":
        parts = rest.split("/", 2)
        repository, ref = "/".join(parts[:2]), (parts[2] if len(parts) == 3 else "")
    elif kind in ("gl", "git") and "%2F" in rest.split("/", 1)[0].upper():
        repository, _, ref = rest.partition("/")
    elif kind == "gl":  # gl/NAMESPACE/PROJECT/REF, unescaped: the last part is the ref
        repository, _, ref = rest.rpartition("/")
    elif kind == "git" and "://" in rest:  # git/https://host/me/course/REF, unescaped
        repository, _, ref = rest.rpartition("/")
    else:
        return None
    written = canonical(f"{kind}/{repository}")
    return BinderLink(written, ref, query) if written and ref else None


def stale_links(text: str, repository: str | None = None) -> list[str]:
    """The Binder links in `text` that are not exactly as the setting writes them: another repository, another
    form of it (an unescaped GitLab namespace), or no link `--write` could convert (no ref, another form)."""
    repository = repository or binder_repository()
    stale = []
    for link in _LINK.findall(text):
        parts = parse(link)
        if parts is None or str(replace(parts, repository=repository)) != link:
            stale.append(link)
    return stale


def rewrite(text: str, repository: str) -> tuple[str, list[str]]:
    """`text` with every Binder link naming `repository` (each keeps its ref and what follows `?`), and the
    links it could not convert (left as they are)."""
    left: list[str] = []

    def moved(match: re.Match) -> str:
        parts = parse(match.group())
        if parts is None:
            left.append(match.group())
            return match.group()
        return str(replace(parts, repository=repository))

    return _LINK.sub(moved, text), left


def main(argv: list[str] | None = None) -> int:
    """Prints the two links; with `--write`, rewrites every Binder link of `DOCUMENTS` (exit 1 if some could not be)."""
    parser = argparse.ArgumentParser(prog="python -m course_utils.course links", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the Binder links of README.md and docs/TEACHING.md to the repository set")
    args = parser.parse_args(argv)
    repository = binder_repository()
    for name, url in links(repository).items():
        print(f"{name:10} {url}")
    if not args.write:
        return 0
    status = 0
    for document in DOCUMENTS:
        path = ROOT / document
        text, left = rewrite(path.read_text(encoding="utf-8"), repository)
        path.write_text(text, encoding="utf-8")
        print(f"{document}: every Binder link names {repository}" if not left else
              f"{document}: {len(left)} link(s) left as they were, not of the forms {', '.join(FORMS)} with a "
              f"ref; mend them by hand: {', '.join(left)}")
        status = status or int(bool(left))
    return status
