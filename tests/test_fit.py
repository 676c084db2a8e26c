"""will_it_fit: a row per model and mesh, in GiB, against device sizes; a layout that cannot split says why."""

import pytest

pytest.importorskip("keras_hub")

from course_utils.fit import will_it_fit  # noqa: E402
from course_utils.sizing import GIB, LAYOUTS, PRESETS  # noqa: E402


def test_gemma_7b_per_device_shrinks_with_each_split():
    fits = {layout: will_it_fit(("gemma_7b_en",), ((2, 4),), layout=layout).row("gemma_7b_en", (2, 4))
            for layout in LAYOUTS}
    assert fits["replicated"].total / fits["tensor_parallel"].total == pytest.approx(4, rel=1e-3)
    assert fits["tensor_parallel"].total / fits["official"].total == pytest.approx(2, rel=1e-3)
    assert fits["official"].fits(80) and not fits["tensor_parallel"].fits(16)
    assert fits["official"].verdict(16) == "tight"  # 15.9 GiB of 16: no room left for activations
    assert fits["official"].total == pytest.approx(16 * PRESETS["gemma_7b_en"].params / 8 / GIB, rel=1e-3)


def test_a_layout_that_cannot_split_a_weight_is_a_row_saying_why():
    report = will_it_fit(("gemma_2b_en",), ((2, 4), (8, 1)))  # one key/value head, split over 'model' in 4
    assert "key/kernel" in report.row("gemma_2b_en", (2, 4)).problem
    assert report.row("gemma_2b_en", (8, 1)).problem is None and report.row("gemma_2b_en", (8, 1)).fits(16)
    assert "cannot split" in repr(report)
