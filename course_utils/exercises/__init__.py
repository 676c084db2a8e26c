"""Exercise checkers for every lesson, registered by id ("01.1", "03.2", ...).

Each lesson's checkers live in `lessonNN.py` (lesson 04's last two in
`lesson04_derived.py`); importing this package registers every `lesson*` module.
"""

import importlib
import pkgutil

from course_utils.exercises.core import EXERCISES, Verdict, check, exercise, results

for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("lesson"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["EXERCISES", "Verdict", "check", "exercise", "results"]
