"""step_replay: how far a sharded step lies from the same step on one device, and how that is judged."""

import numpy as np
import pytest

from course_utils.step_replay import (AGREES, BEYOND, FLIPPED, ROUNDING, UNIT_ROUNDOFF, StepReplay, classify,
                                      explain_bounds)


def replay(differences, changes, sizes, rows=64, names=("d1/kernel", "adam/d1_kernel_momentum", "d2/kernel")):
    as_array = lambda v: np.atleast_2d(np.asarray(v, np.float64))
    return StepReplay(tuple(names), as_array(differences), as_array(changes), as_array(sizes), rows)


def test_the_bounds_are_float32_rounding_and_one_examples_share():
    assert UNIT_ROUNDOFF == 2.0**-24 and ROUNDING == 2.0**-12
    assert classify(ROUNDING, 1 / 64) == AGREES
    assert classify(ROUNDING * 1.01, 1 / 64) == FLIPPED
    assert classify(1 / 64, 1 / 64) == FLIPPED and classify(1 / 63, 1 / 64) == BEYOND
    assert "2**12 units of rounding" in explain_bounds(64) and "1/64" in explain_bounds(64)


def test_a_difference_is_measured_against_what_the_step_changed():
    r = replay([[1e-9, 2e-9, 0.0]], [[1e-3, 1e-2, 1e-3]], [[1.0, 1.0, 1.0]])
    # the last bit of each stored result (2 u |s|) is taken off first: 1e-9 - 2**-23 < 0
    assert r.relative[0, 0] == 0.0 and r.relative[0, 2] == 0.0
    small = replay([[1e-5, 0, 0]], [[1e-3, 1, 1]], [[1e-3, 1, 1]])
    assert small.relative[0, 0] == pytest.approx((1e-5 - 2 * UNIT_ROUNDOFF * 1e-3) / 1e-3)


def test_a_tensor_that_moved_in_one_run_only_is_beyond_anything():
    r = replay([[0.5, 0.0, 0.0]], [[0.0, 0.1, 0.1]], [[1.0, 1.0, 1.0]])
    assert np.isinf(r.relative[0, 0]) and r.kinds() == [BEYOND] and not r.agrees
    assert r.worst()[:2] == (1, "d1/kernel")


def test_steps_are_sorted_into_rounding_flipped_decisions_and_beyond():
    differences = [[1e-9, 0, 0], [5e-6, 0, 0], [0.5, 0, 0]]
    r = replay(differences, [[1e-3, 1, 1]] * 3, [[1e-3, 1, 1]] * 3, rows=64)
    assert r.kinds() == [AGREES, FLIPPED, BEYOND]
    assert r.steps_where(FLIPPED) == [2] and r.steps_where(BEYOND) == [3] and len(r) == 3
    assert replay(differences[:2], [[1e-3, 1, 1]] * 2, [[1e-3, 1, 1]] * 2).agrees


def test_a_weight_is_judged_with_its_optimizer_slots():
    r = replay([[0, 3e-6, 1e-9]], [[1, 1e-3, 1]], [[1, 1e-3, 1]])
    assert r.largest_for("d1/kernel") == pytest.approx(r.relative[0, 1])  # its momentum moved most
    assert r.largest_for("d2/kernel") == 0.0 and np.isnan(r.largest_for("d3/kernel"))


def test_a_tensor_whose_step_is_rounding_noise_is_named_and_not_judged():
    # d1's momentum differs by half of what the step changed; nudging every weight by one unit in its last
    # place moved it by as much (its gradient is noise), while d2 moved by rounding only
    differences, changes, sizes = [[1e-9, 5e-10, 1e-9]], [[1e-3, 1e-9, 1e-3]], [[1.0, 1e-9, 1.0]]
    unmeasured = replay(differences, changes, sizes)
    assert unmeasured.kinds() == [BEYOND] and unmeasured.noise_only() == []
    nudged = StepReplay(unmeasured.names, *(np.array(a, np.float64) for a in (differences, changes, sizes)),
                        rows=64, nudged=np.array([[1e-9, 8e-10, 1e-9]]))
    assert nudged.noise_only() == ["adam/d1_kernel_momentum"] and nudged.noise_for("d1/kernel")
    assert not nudged.noise_for("d2/kernel") and nudged.agrees and nudged.relative[0, 1] == 0.0
    # one example's share is the line: a tensor a nudge moves by less is judged as before
    within = StepReplay(unmeasured.names, *(np.array(a, np.float64) for a in (differences, changes, sizes)),
                        rows=64, nudged=np.array([[0.0, 1e-9 / 70, 0.0]]))
    assert within.noise_only() == [] and within.kinds() == [BEYOND]

