"""A learner's answer as plain values, so that no checker can be fooled, hung or broken by it.

`plain(answer)` returns what a checker compares: built-in values rebuilt as
exactly `str`, `int`, `float`, `tuple`, `list`, `set`, `dict` (a `str`
subclass whose `==` always says yes becomes the plain string it holds), NumPy
values as NumPy's own, and objects of the libraries the exercises ask for
(Keras meshes, layout maps and models, JAX arrays) as they are. Anything else
that can be iterated is read as a list of at most `MAX_ITEMS` items (a
generator, `itertools.repeat(...)`: never an endless loop). An object that
brings its own comparison (`__eq__`, `__hash__`, `<`...) is refused with
`Unreadable`, which names its type. `time_limit` bounds a check in time.
`shown` is a `repr` that never raises and never runs long.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading

import numpy as np

from course_utils._table import shown  # noqa: F401  (the checkers quote answers with it)

MAX_ITEMS = 100_000  # over the whole answer, nested items included
MAX_DEPTH = 32
LIBRARIES = ("keras", "jax", "jaxlib", "numpy", "ml_dtypes", "course_utils")
TRUSTED = (*LIBRARIES, "builtins", "collections", "_collections_abc", "abc", "enum", "itertools", "types")
COMPARISONS = ("__eq__", "__ne__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__")
_CONTAINERS = (tuple, list, set, frozenset)


class Unreadable(ValueError):
    """An answer the checkers do not compare: too large, too deep, or bringing its own comparison."""


class TimeUp(BaseException):
    """A check ran past its time (a BaseException: a checker's `except Exception` does not swallow it)."""


def plain(answer):
    """The answer rebuilt from plain values (see the module's notes); raises `Unreadable`."""
    return _plain(answer, [MAX_ITEMS], 0)


def _plain(value, budget: list[int], depth: int):
    if depth > MAX_DEPTH:
        raise Unreadable(f"it is nested more than {MAX_DEPTH} levels deep (does it contain itself?)")
    if value is None or value is ... or isinstance(value, bool):
        return value
    if isinstance(value, np.generic):
        return _plain(value.item(), budget, depth)  # NumPy's scalars as Python's (np.str_ is a str too)
    for kind, rebuild in ((str, str.__str__), (int, int.__int__), (float, float.__float__),
                          (complex, complex.__complex__), (bytes, lambda b: bytes(memoryview(b)))):
        if isinstance(value, kind):
            return rebuild(value)  # the base type's own method: a subclass's overrides never run
    if isinstance(value, dict):
        items = dict.items(value)
        _spend(budget, 2 * len(items))
        return {_plain(k, budget, depth + 1): _plain(v, budget, depth + 1) for k, v in items}
    for kind in _CONTAINERS:
        if isinstance(value, kind):
            _spend(budget, kind.__len__(value))
            return kind(_plain(item, budget, depth + 1) for item in kind.__iter__(value))
    if isinstance(value, range):
        return value
    if isinstance(value, np.ndarray):
        _spend(budget, value.size)
        array = np.array(value, subok=False)
        return _plain(array.tolist(), budget, depth + 1) if array.dtype == object else array
    custom = _own_comparison(type(value))
    if custom:
        raise Unreadable(f"it is an object of type {type(value).__name__} that defines its own {custom} "
                         f"(a checker compares plain values only)")
    if any(_root(c) in LIBRARIES for c in type(value).__mro__):  # a mesh, a layout map, a model (yours too)
        return value
    if hasattr(type(value), "__iter__"):  # a generator, map(...), itertools: a list, never past the budget
        items = list(itertools.islice(iter(value), budget[0] + 1))
        _spend(budget, len(items))
        return [_plain(item, budget, depth + 1) for item in items]
    return value


def _spend(budget: list[int], n: int) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise Unreadable(f"it holds more than {MAX_ITEMS:,} items")


def _root(kind: type) -> str:
    return str(getattr(kind, "__module__", "") or "").split(".")[0]


def _own_comparison(kind: type) -> str | None:
    """The first comparison method `kind` takes from a class outside the trusted libraries, if any."""
    for name in COMPARISONS:
        owner = next((c for c in kind.__mro__ if name in c.__dict__), object)
        if _root(owner) not in TRUSTED:
            return name
    return None


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raises `TimeUp` in the block after `seconds` (main thread, where SIGALRM exists; elsewhere no bound)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def up(signum, frame):
        raise TimeUp

    previous = signal.signal(signal.SIGALRM, up)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's timer was running: give it back what it had left
            signal.setitimer(signal.ITIMER_REAL, max(outer - seconds, 0.001))
