"""Small helpers for lessons: run a classic mistake and show its real error."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field


class ExpectedErrorMissing(AssertionError):
    """A cell that should show an error ran without one."""


@dataclass
class Caught:
    """What an `expect_error` block raised, and the warnings it gave before.

    Attributes:
        error: The exception the block raised (None until it has).
        warnings: Each warning given inside the block, as `"Category: message"`.
    """

    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return "" if self.error is None else str(self.error)


_last: Caught | None = None


def last_caught() -> Caught | None:
    """The most recent `expect_error` block's `Caught` (what a lesson's claims read)."""
    return _last


@contextlib.contextmanager
def expect_error(*kinds: type[BaseException]):
    """Runs a block that should fail and prints the real error instead of stopping.

    "Run All" goes on past it, and the learner reads the message Keras or JAX
    really gives. A warning given inside the block is shown first, labelled as
    a warning, so that it does not read as a second failure. If the block does
    not fail, that is itself an error.

    Args:
        kinds: The exception types expected (default: any `Exception`).

    Yields:
        A `Caught`, filled in when the block ends.

    Example:
        >>> with expect_error(ValueError):
        ...     keras.distribution.DeviceMesh((3, 3), ("data", "model"))
    """
    global _last
    kinds = kinds or (Exception,)
    caught = _last = Caught()
    with warnings.catch_warnings(record=True) as given:
        try:
            yield caught
        except kinds as error:
            caught.error = error
    caught.warnings = [f"{w.category.__name__}: {w.message}" for w in given]
    for text in caught.warnings:
        print(f"First a warning, not the error ({text.split(':', 1)[0]}):\n{text.split(': ', 1)[1].strip()}\n")
    if caught.error is None:
        names = ", ".join(k.__name__ for k in kinds)
        raise ExpectedErrorMissing(f"This cell was meant to raise {names}, but it ran without error.")
    print(f"{type(caught.error).__name__} (the expected error):\n{caught.error}")
