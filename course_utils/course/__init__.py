"""The course's machinery: building, grading and checking the course, and timing it.

Nothing here is what a learner reads: the lessons import the teaching library (`from course_utils
import ...`, the exercise checkers of `course_utils.exercises` included). One folder per job, and one
command line for all of them, `python -m course_utils.course <job>` (`make` targets call it):

- `publish/`: the rendered course and its decks (`render`), the copies students get (`builds`:
  the student lessons, the `student_branch`, the `answer_key`, the `handout`, printed by `pdf`),
  the Binder links (`binder_links`), the deck and page templates;
- `grading/`: nbgrader's course directory (`nbgrader_course`), one grading run of an assignment
  (`assignment`), each hand-in graded apart (`isolation`), what was handed in (`submissions`), an
  answer carried out of the student's kernel (`wire`) and checked again outside it (`recheck`);
- `checking/`: the lessons run unattended (`lesson_runs`, in `jupyter_kernels` of their own) and
  what their text claims (`claims`);
- `environment/`: is this machine ready (`doctor`, `fresh_process`), JupyterLab's settings
  (`lab_settings`);
- `bench/`: every benchmark: the lessons (`lessons`), the advisor (`advisor`), published runs
  (`published_rows`), real models (`real_models`), sharding costs (`sharding_costs`), the
  explorers' redraws (`widget_redraw`);
- `lesson_parts`: a lesson notebook's parts (exercises, solutions, teacher's notes), which every job reads.

Its extra dependencies (nbformat, nbclient, nbconvert) are the package's `course` extra. The
teaching library never imports it.
"""
