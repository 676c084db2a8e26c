"""Small helpers for lessons: run a classic mistake and show its real error."""

from __future__ import annotations

import contextlib


class ExpectedErrorMissing(AssertionError):
    """A cell that should show an error ran without one."""


@contextlib.contextmanager
def expect_error(*kinds: type[BaseException]):
    """Runs a block that should fail and prints the real error instead of stopping.

    "Run All" goes on past it, and the learner reads the message Keras or JAX
    really gives. If the block does not fail, that is itself an error.

    Args:
        kinds: The exception types expected (default: any `Exception`).

    Example:
        >>> with expect_error(ValueError):
        ...     keras.distribution.DeviceMesh((3, 3), ("data", "model"))
    """
    kinds = kinds or (Exception,)
    try:
        yield
    except kinds as error:
        print(f"{type(error).__name__} (the expected error):\n{error}")
    else:
        names = ", ".join(k.__name__ for k in kinds)
        raise ExpectedErrorMissing(f"This cell was meant to raise {names}, but it ran without error.")
