"""The second pytest process the whole suite runs the tests that start processes in (conftest's `BesideRun`): what
ran there is reported here as it would be, and a test it never reported fails."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.processes
def test_tests_run_beside_report_here_and_one_never_reported_fails():
    env = {k: v for k, v in os.environ.items() if k != "COURSE_TEST_BESIDE_REPORTS"}  # this may run in one
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--beside", "-rA",
                             "tests/data/beside_planted.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert out.rstrip().splitlines()[-1].startswith("2 failed, 3 passed"), out
    assert "PASSED tests/data/beside_planted.py::test_passes_beside" in out
    assert "PASSED tests/data/beside_planted.py::test_unmarked_runs_here" in out  # here: no second process's setting
    assert "AssertionError: planted: this ran in the second process" in out  # the failure as it was there
    assert "printed in the second process, one case" in out  # captured output comes back
    assert "FAILED tests/data/beside_planted.py::test_ends_the_second_process" in out
    assert ("The second pytest process (exit code 3) ran tests/data/beside_planted.py::test_ends_the_second_process "
            "without a report of its call") in out
    # the unmarked test ran first, here, while the second process ran the others
    assert out.index("test_unmarked_runs_here") > 0 and out.startswith(".")
