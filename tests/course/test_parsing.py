"""Reading a lesson's source on several threads at once (`parsing.parse_source`)."""

import subprocess
import sys

import pytest

# Three threads parse the same module 30 times; a collection callback and a tiny switch interval let a thread be
# switched out while CPython builds its `ast` objects, as a busy process's collector does now and then.
RACE = """
import ast, gc, sys, threading
from course_utils.course.parsing import parse_source
sys.setswitchinterval(1e-6)
gc.callbacks.append(lambda phase, info: None)
gc.set_threshold(50)
source = "\\n".join(f"x{i} = [({i}, {i} + 1) for _ in range(3) if _ and (a or b)]" for i in range(400))
errors = []

def work(parse):
    for _ in range(30):
        try:
            parse(source)
        except SystemError as error:
            errors.append(str(error))
            return

threads = [threading.Thread(target=work, args=({parse},)) for _ in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors), errors[:1])
"""


def _race(parse: str) -> str:
    result = subprocess.run([sys.executable, "-c", RACE.replace("{parse}", parse)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.processes
def test_sources_parsed_on_several_threads_at_once_parse():
    assert _race("parse_source").startswith("0 []")
    if sys.version_info[:2] == (3, 11):  # the same race with ast.parse alone fails (python/cpython#106905)
        assert "AST constructor recursion depth mismatch" in _race("ast.parse")
