"""The student build has no solution text; the answer key holds every exercise, checked for real."""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils.course.publish.answer_key import build_answer_key
from course_utils.course.publish.pdf import pdf_pages
from course_utils.course.lesson_parts import build_student, exercise_cell, student_notebook
from course_utils.exercises import EXERCISES
from course_utils.course.lesson_parts import exercise_cells, lessons, solution_for

ROOT = Path(__file__).resolve().parents[3]
LESSONS = lessons(ROOT / "notebooks")


def _answers(notebook) -> list[str]:
    """Each worked solution's assignment of the checked name (`answer = (128 // 2, 10)`), and the block."""
    found = []
    for i in exercise_cells(notebook):
        name = exercise_cell(notebook.cells[i].source).name
        solution = solution_for(notebook, i)
        found.append(" ".join(solution.split()))
        found += [line.split("  #")[0].strip() for line in solution.splitlines()
                  if line.startswith(f"{name} = ")]
    return found


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_student_notebook_has_no_solution_text(path):
    lesson = nbformat.read(path, as_version=4)
    student = student_notebook(lesson)
    text = "\n".join(cell.source for cell in student.cells)
    assert "<summary>Solution" not in text and "Teacher's notes" not in text and "**Answer:**" not in text
    flat = " ".join(text.split())
    assert [answer for answer in _answers(lesson) if answer in text or answer in flat] == []
    assert len(exercise_cells(student)) == len(exercise_cells(lesson))  # the exercises stay
    assert all("..." in student.cells[i].source for i in exercise_cells(student))


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_student_notebook_never_speaks_of_solutions_it_does_not_hold(path):
    student = student_notebook(nbformat.read(path, as_version=4))
    text = "\n".join(cell.source for cell in student.cells if cell.cell_type == "markdown")
    assert re.findall(r"[^.\n]*\b[Ss]olutions?\b[^.\n]*", text) == [] or path.stem == "00_start_here"
    if path.stem == "00_start_here":
        assert re.findall(r"[^.\n]*\b[Ss]olutions?\b[^.\n]*", text) == [
            "In this copy of the course the worked solutions are with your teacher: the checker's hints are yours"]
    assert "<!--" not in text  # no marker is left for a student to read in the cell's source


def test_student_text_leaves_out_self_study_passages_and_shows_the_students():
    from course_utils.course.lesson_parts import student_text

    source = "Try it.<!-- self-study --> The solution is below.<!-- /self-study -->\n<!-- student: Ask your teacher. -->"
    assert student_text(source) == "Try it.\nAsk your teacher."


def test_the_student_build_writes_every_lesson(tmp_path):
    written = build_student(ROOT / "notebooks", tmp_path)
    assert [p.name for p in written] == [p.name for p in LESSONS]
    for path in written:
        nbformat.validate(nbformat.read(path, as_version=4))


def test_every_registered_exercise_sits_in_a_lesson():
    ids = [exercise_cell(nbformat.read(p, as_version=4).cells[i].source).exercise
           for p in LESSONS for i in exercise_cells(nbformat.read(p, as_version=4))]
    registered = [e.id for e in EXERCISES.values()  # the lessons' checkers, not those tests register
                  if e.checker.__module__.startswith("course_utils.exercises.lesson")]
    assert sorted(ids) == sorted(registered)  # each exactly once


def test_exercise_cell_reads_the_checked_name():
    call = exercise_cell('axes = ...  # one entry per dimension\ncheck("02.2", axes)')
    assert (call.exercise, call.name, call.blank) == ("02.2", "axes", "axes = ...  # one entry per dimension")
    with pytest.raises(ValueError, match="check"):
        exercise_cell("answer = 3")


@pytest.mark.lesson_runs("solved")
def test_the_answer_key_holds_every_exercise_with_the_checkers_verdict(tmp_path, lesson_runs):
    entries = build_answer_key(ROOT / "notebooks", tmp_path, only=("01",), solved_run=lesson_runs.solved)
    expected = sorted(e for e in EXERCISES if e.startswith("01."))
    assert [e.exercise for e in entries] == expected
    assert [e.status for e in entries] == ["correct"] * len(expected)
    page = (tmp_path / "answer_key.html").read_text()
    for entry in entries:
        assert f"Exercise {entry.exercise}: correct." in page  # the checker's own display
        assert f"**Exercise {entry.exercise}.**" in entry.task
        assert "check(" in entry.solution
    assert len(re.findall(r'<section class="exercise">', page)) == len(expected)
    assert pdf_pages(tmp_path / "answer_key.pdf") >= 1
    sizes = {name: re.search(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)", (tmp_path / name).read_bytes()).groups()
             for name in ("answer_key.pdf", "answer_key-letter.pdf")}
    assert {name: tuple(round(float(v)) for v in size) for name, size in sizes.items()} == {
        "answer_key.pdf": (595, 842), "answer_key-letter.pdf": (612, 792)}  # A4 and US Letter, in points
    assert not list(tmp_path.glob(".*.html"))  # the pages printed are not left behind


def test_the_answer_key_keeps_every_lesson_when_one_fails_or_is_contradicted_and_marks_them(tmp_path):
    from course_utils.course.checking.claims import Verdict
    from course_utils.course.checking.lesson_runs import VERDICTS_CELL, IncompleteBuild, LessonRun
    from course_utils.course.lesson_parts import with_solutions

    lesson01 = nbformat.read(LESSONS[1], as_version=4)
    verdicts = nbformat.v4.new_code_cell(VERDICTS_CELL, outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text='[["01.1", "correct", "Right."]]')])
    contradicted = LessonRun(LESSONS[1], with_solutions(lesson01), 1.0, 100.0, extras=(verdicts,),
                             claims=(Verdict(3, "8 devices", "len(devices) == 8", False, "is False"),))

    def solved(path):
        if path.name.startswith("01"):
            return contradicted
        raise RuntimeError("CellExecutionError\nValueError: lesson 02 broke")

    with pytest.raises(IncompleteBuild) as incomplete:
        build_answer_key(ROOT / "notebooks", tmp_path, only=("01", "02"), solved_run=solved, pdf=False)
    assert [line.split(":")[0] for line in incomplete.value.problems] == ["01_mesh_grids", "02_axis_roles"]
    page = (tmp_path / "answer_key.html").read_text()
    assert "2 lessons are marked below" in page
    assert "the lesson says &#x27;8 devices&#x27;" in page
    assert "It did not run to its end with its solutions filled in: ValueError: lesson 02 broke" in page
    ids = [exercise_cell(nb.cells[i].source).exercise for p in LESSONS[1:3]
           for nb in [nbformat.read(p, as_version=4)] for i in exercise_cells(nb)]
    assert re.findall(r"<h3>Exercise (\d\d\.\d)</h3>", page) == ids  # every exercise kept, in order
    assert page.count("Not run: the lesson stopped before its checker ran") == sum(i.startswith("02") for i in ids)


def test_an_answer_key_task_shows_the_code_its_exercise_starts_from():
    from course_utils.course.publish.answer_key import _as_markdown, _task_cells

    notebook = nbformat.read(ROOT / "notebooks" / "04_layout_map.ipynb", as_version=4)
    index = next(i for i in exercise_cells(notebook) if exercise_cell(notebook.cells[i].source).exercise == "04.2")
    task = "\n\n".join(_as_markdown(c) for c in _task_cells(notebook, index, "04.2"))
    assert task.startswith("**Exercise 04.2.**") and "```python\nbuggy_too = {" in task


def test_the_answer_key_shows_every_teacher_s_note_that_names_an_exercise():
    # The notes on the slide that opens a lesson's exercises ask the first one ("**Ask (01.1):**").
    from course_utils.course.publish.answer_key import _task_cells

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        for i in exercise_cells(notebook):
            exercise_id = exercise_cell(notebook.cells[i].source).exercise
            shown = [c.source for c in _task_cells(notebook, i, exercise_id)]
            named = [c.source for c in notebook.cells if c.cell_type == "markdown"
                     and c.source.startswith("<details><summary>Teacher's notes") and f"({exercise_id})" in c.source]
            assert all(note in shown for note in named), f"{path.name} {exercise_id}: a note that names it is left out"
            assert f"Exercise {exercise_id}" in shown[0]  # the task first, then the notes


def test_no_answer_waits_above_an_exercise_for_a_self_studying_learner():
    """A teacher's note that answers sits below the exercise and its solution, opened on purpose, never above it."""
    from course_utils.course.lesson_parts import teachers_notes

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        for i in exercise_cells(nbformat.read(path, as_version=4)):
            j = i - 1
            while j >= 0 and cells[j].cell_type == "markdown" and "<summary>Solution</summary>" not in cells[j].source:
                assert not (teachers_notes(cells[j]) and "**Answer" in cells[j].source), f"{path.name}: cell {j}"
                if cells[j].metadata.get("slideshow", {}).get("slide_type") == "slide":
                    break
                j -= 1


def _git(repo, *args):
    import subprocess

    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_the_student_branch_holds_the_student_lessons_and_leaves_the_work_tree_alone(tmp_path):
    import shutil

    from course_utils.course.publish.student_branch import write_student_branch

    repo = tmp_path / "course"
    (repo / "notebooks").mkdir(parents=True)
    for path in LESSONS[:2]:
        shutil.copy(path, repo / "notebooks" / path.name)
    (repo / "README.md").write_text("the course\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "lessons")
    (repo / "README.md").write_text("an edit not committed\n")  # must survive
    first = write_student_branch(repo)
    assert first.changed and first.lessons == ("notebooks/00_start_here.ipynb", "notebooks/01_mesh_grids.ipynb")
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "README.md").read_text() == "an edit not committed\n"
    assert _git(repo, "status", "--porcelain") == "M README.md"
    on_branch = nbformat.reads(_git(repo, "show", "student:notebooks/01_mesh_grids.ipynb"), as_version=4)
    expected = student_notebook(nbformat.read(LESSONS[1], as_version=4))
    assert [c.source for c in on_branch.cells] == [c.source for c in expected.cells]
    assert _git(repo, "show", "student:README.md") == "the course"  # every other file as committed
    again = write_student_branch(repo)
    assert not again.changed and again.commit == first.commit  # nothing changed: no new commit
    (repo / "README.md").write_text("the course, second edition\n")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qam", "edit")
    third = write_student_branch(repo)
    assert third.changed and _git(repo, "rev-parse", f"{third.commit}^") == first.commit  # on top of the branch


def test_the_student_branch_is_written_from_any_folder_refused_while_checked_out_and_names_a_broken_lesson(tmp_path):
    import shutil

    from course_utils.course.publish.student_branch import write_student_branch

    repo = tmp_path / "course"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy(LESSONS[0], repo / "notebooks" / LESSONS[0].name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "lessons")
    written = write_student_branch(repo / "notebooks")  # as from notebooks/
    assert written.lessons == ("notebooks/00_start_here.ipynb",)
    _git(repo, "checkout", "-q", "student")
    with pytest.raises(ValueError, match=r"'student' is checked out here: .* Run `git checkout main`"):
        write_student_branch(repo)
    _git(repo, "checkout", "-q", "main")
    (repo / "notebooks" / "01_broken.ipynb").write_text("{ not a notebook")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "broken")
    with pytest.raises(ValueError, match=r"notebooks/01_broken.ipynb, as committed in HEAD \(.*\), is not a notebook"):
        write_student_branch(repo)
    assert _git(repo, "rev-parse", "student") == written.commit  # nothing written
