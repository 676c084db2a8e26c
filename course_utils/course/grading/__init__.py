"""Grading with nbgrader: the course directory (`nbgrader_course`), one run of an assignment (`assignment`),
each hand-in graded apart (`isolation`, `submissions`), answers carried out as data (`wire`) and checked in the
grader's own process (`recheck`)."""
