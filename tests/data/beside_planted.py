"""Planted tests for the second pytest process (tests/test_beside.py runs this file with --beside): those marked
`processes` run there (one passes, one fails, one prints, one ends the process), the other here."""

import os

import pytest

THERE = "COURSE_TEST_BESIDE_REPORTS"  # set in the second process only


@pytest.mark.processes
def test_passes_beside():
    assert os.environ.get(THERE)


@pytest.mark.processes
def test_fails_beside():
    assert os.environ.get(THERE) is None, "planted: this ran in the second process"


@pytest.mark.processes
@pytest.mark.parametrize("case", ["one case"])
def test_prints_beside(case):
    print(f"printed in the second process, {case}")


def test_unmarked_runs_here():
    assert os.environ.get(THERE) is None


@pytest.mark.processes
def test_ends_the_second_process():
    os._exit(3)
