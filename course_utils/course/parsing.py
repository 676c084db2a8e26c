"""Python source turned into `ast` objects, safely on several threads (lesson runs, grading and the test suite's
runs read lessons' cells side by side).
"""

from __future__ import annotations

import ast
import threading

# CPython 3.11 (3.11.7 here) counts the depth of every thread's AST construction in one place: two threads turning
# source into `ast` objects at once can break each other's count, and `ast.parse` then fails with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905; met in a test session whose lesson runs, on two
# threads, read their claims while the tests parsed modules). The course parses on several threads (a series' lessons
# run side by side), so every parse takes this lock.
_PARSING = threading.Lock()


def parse_source(source: str, mode: str = "exec") -> ast.AST:
    """`ast.parse(source, mode=mode)`, one thread at a time (see `_PARSING`)."""
    with _PARSING:
        return ast.parse(source, mode=mode)
