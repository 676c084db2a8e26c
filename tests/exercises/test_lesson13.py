"""Lesson 13's checkers: right answers pass, plausible wrong ones get a hint that does not give the answer."""

import pytest

from course_utils import check
from course_utils.exercises import lesson13


@pytest.mark.parametrize("exercise_id", ["13.1", "13.2"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_decode_time_per_token():
    found = lesson13.decode_milliseconds()
    weights, cache = lesson13._decode_bytes()
    # 8.54e9 bf16 parameters over 8 devices, 64 x 4,096 tokens of 448 KiB over 8, at 3.35e12 bytes/s
    assert found == pytest.approx((8.54e9 * 2 / 8 + 64 * 4096 * 448 * 1024 / 8) / 3.35e12 * 1e3, rel=0.01)
    assert check("13.1", round(found, 1)).ok
    alone = check("13.1", weights / 3.35e12 * 1e3)
    assert alone.status == "not yet" and "weights alone" in alone.message and f"{found:.1f}" not in alone.message
    whole = check("13.1", found * 8)
    assert whole.status == "not yet" and "an eighth" in whole.message
    far = check("13.1", 100.0)
    assert far.status == "not yet" and "too long" in far.message
    assert "Answer a number of milliseconds" in check("13.1", "fast").message


def test_kv_cache_per_device():
    found = lesson13.cache_bytes_per_device()
    assert found == 16 * 32 * 2 * 4096 * 8 * 128 * 2 // 8 == 2**30
    assert check("13.2", found).ok
    no_values = check("13.2", found // 2)
    assert no_values.status == "not yet" and "Keys and values" in no_values.message
    heads_only = check("13.2", found * 2)
    assert heads_only.status == "not yet" and "divided by both" in heads_only.message
    whole = check("13.2", found * 8)
    assert whole.status == "not yet" and "whole cache" in whole.message
    for verdict in (no_values, heads_only, whole, check("13.2", 12345)):
        assert f"{found:,}" not in verdict.message and str(found) not in verdict.message
    assert "Answer a number of bytes" in check("13.2", -1).message
