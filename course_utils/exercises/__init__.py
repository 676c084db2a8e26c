"""Exercise checkers for every lesson, registered by id ("01.1", "03.2", ...)."""

from course_utils.exercises.core import EXERCISES, Verdict, check, exercise, results

__all__ = ["EXERCISES", "Verdict", "check", "exercise", "results"]
