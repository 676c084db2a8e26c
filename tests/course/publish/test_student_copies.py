"""Nothing a student receives carries an answer: no worked solution, teacher's note or claim.

A lesson's teacher's side lives in three places: the collapsed cells (solutions, teacher's notes),
the cells' metadata (claims quote the teacher's notes and the worked answers; deck summaries) and
the notebook's metadata (givens). JupyterLab's property inspector shows metadata, so every copy a
student receives is scanned for every such passage (`teacher_passages`), whole files: sources,
outputs and metadata. nbgrader's release is scanned in test_grading.py, on the course it builds.
"""

import json
import subprocess
from pathlib import Path

import nbformat
import pytest

from course_utils.course.publish.student_branch import TEACHER_FILES, write_student_branch
from course_utils.course.lesson_parts import (build_student, lessons, passages_in, student_notebook,
                                           teacher_passages)

ROOT = Path(__file__).resolve().parents[3]
LESSONS = lessons(ROOT / "notebooks")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_the_scan_finds_every_teacher_passage_in_the_lesson_and_a_claim_left_in_a_copy(path):
    lesson = nbformat.read(path, as_version=4)
    passages = teacher_passages(lesson)
    kinds = {where.split(" of ")[0].split(" cell")[0] for where in passages.values()}
    assert {"a claim's check", "the teacher's"} <= kinds  # every lesson has notes and checked claims
    assert len(passages_in(lesson, passages)) == len(passages)  # the lesson itself holds them all
    leaky = student_notebook(lesson)
    claimed = next(i for i, c in enumerate(lesson.cells) if c.metadata.get("claims"))
    kept = next(c for c in leaky.cells if c.source == lesson.cells[claimed].source)
    kept.metadata["claims"] = lesson.cells[claimed].metadata["claims"]  # the leak this round closed
    assert passages_in(leaky, passages)


def test_the_student_build_holds_no_answer_note_or_claim(tmp_path):
    written = build_student(ROOT / "notebooks", tmp_path)
    for lesson, copy in zip(LESSONS, written, strict=True):
        assert passages_in(copy.read_text(), teacher_passages(nbformat.read(lesson, as_version=4))) == [], copy.name
        assert "claims" not in copy.read_text()  # no key of the teacher's metadata either


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_the_student_branch_holds_no_answer_note_claim_or_teachers_file(tmp_path):
    repo = tmp_path / "course"
    (repo / "notebooks").mkdir(parents=True)
    for path in LESSONS:
        (repo / "notebooks" / path.name).write_bytes(path.read_bytes())
    for name in ("README.md", "docs/TEACHING.md", "docs/TROUBLESHOOTING.md", "tests/course/test_answers.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"{name}\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "the course")
    write_student_branch(repo)
    files = _git(repo, "ls-tree", "-r", "--name-only", "student").split()
    assert sorted(files) == sorted(["README.md", "docs/TROUBLESHOOTING.md"] + [f"notebooks/{p.name}" for p in LESSONS])
    assert not [f for f in files if f.startswith(TEACHER_FILES)]
    for path in LESSONS:
        copy = _git(repo, "show", f"student:notebooks/{path.name}")
        assert passages_in(copy, teacher_passages(nbformat.read(path, as_version=4))) == [], path.name
        assert not {"claims", "deck_summary"} & {k for c in json.loads(copy)["cells"] for k in c["metadata"]}


def test_the_quiz_bank_lives_in_the_teachers_guide_which_no_student_copy_holds(tmp_path):
    """The question bank, answers included, is in docs/TEACHING.md: the student branch built from a course
    holding the real guide has no file with its heading or any of its questions, and neither has
    `make student`'s folder."""
    import re

    guide = (ROOT / "docs" / "TEACHING.md").read_text()
    assert "docs/TEACHING.md" in TEACHER_FILES and "## A question bank for quizzes" in guide
    questions = [" ".join(q.split()) for q in re.findall(r"^- \*\*Q:\*\* (.*?)\n\s+\*\*A:\*\*", guide, re.S | re.M)]
    assert len(questions) >= 30
    repo = tmp_path / "course"
    (repo / "docs").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    (repo / "docs" / "TEACHING.md").write_text(guide)
    (repo / "README.md").write_text("the course\n")
    for path in LESSONS:
        (repo / "notebooks" / path.name).write_bytes(path.read_bytes())
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "the course")
    write_student_branch(repo)
    files = _git(repo, "ls-tree", "-r", "--name-only", "student").split()
    copies = [_git(repo, "show", f"student:{name}") for name in files]
    copies += [p.read_text() for p in build_student(ROOT / "notebooks", tmp_path / "student")]
    seen = [" ".join(text.split()) for text in copies]
    assert not [q for q in questions + ["A question bank for quizzes"] if any(q in text for text in seen)]
