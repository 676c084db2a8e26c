"""will_it_fit: a row per model and mesh, in GiB, against device sizes; a layout that cannot split says why."""

import pytest

pytest.importorskip("keras_hub")

from course_utils.memory.fit import will_it_fit  # noqa: E402
from course_utils.memory.presets import GIB, LAYOUTS, PRESETS  # noqa: E402


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


def test_every_cannot_split_says_which_weight_which_dimension_which_axis():
    report = will_it_fit("gemma_2b_en", ((1, 8), (2, 4)))  # a single preset name is that model only
    split = report.row("gemma_2b_en", (2, 4)).split
    assert (split.what, split.shape, split.dim, split.size, split.axes, split.parts) == (
        "decoder_block_0/attention/key/kernel", (1, 2048, 256), 0, 1, ("model",), 4)
    assert split.others == 2 * 18 - 1  # every block's key and value kernels
    assert split.short == "key/kernel: dim 0 of size 1 over model"
    notes = "\n".join(report.notes())
    assert ("- cannot split gemma_2b_en on (2, 4): decoder_block_0/attention/key/kernel (1, 2048, 256): "
            "dimension 0, of size 1, does not divide into 4 parts along 'model' (Keras would raise IndivisibleError "
            "building it); 35 more weights do not split either.") in notes
    assert "on (1, 8)" in notes and "into 8 parts" in notes and "- cannot split" in repr(report)


@pytest.mark.parametrize("kwargs, words", [
    (dict(layout="fsdp"), ["layout='fsdp'", "'official', 'tensor_parallel', 'replicated'", "as FSDP does"]),
    (dict(mesh_shapes=((3, 3),)), ["(3, 3) uses 9 devices", "course's 8 devices", "(1, 8), (2, 4), (4, 2), (8, 1)"]),
    (dict(mesh_shapes=((2, 2, 2),)), ["(2, 2, 2) has 3 axes", "(batch, model)"]),
    (dict(mesh_shapes=((0, 8),)), ["(0, 8) has an axis smaller than 1"]),
    (dict(mesh_shapes="2x4"), ["mesh_shapes='2x4'", "mesh_shapes=((2, 4), (8, 1))"]),
    (dict(mesh_shapes=()), ["mesh_shapes=()", "Give a tuple of shapes"]),
    (dict(device_gib=(float("nan"),)), ["device_gib=(nan,)", "numbers above 0", "device_gib=(16, 80)"]),
    (dict(device_gib=(-16, 0)), ["device_gib=(-16, 0)", "numbers above 0"]),
    (dict(device_gib=("80",)), ["device_gib=('80',)", "numbers above 0"]),
    (dict(device_gib=True), ["device_gib=True"]),
    (dict(models=("gemma_9b",)), ["'gemma_9b' is not a preset", "gemma_7b_en"]),
    (dict(models=42), ["models=42", "preset names"]),
    (dict(models=()), ["models=()", "no model"]),
    (dict(models=[[1]]), ["neither a preset name nor a built backbone"]),
    (dict(batch=0, seq=16), ["batch=0", "whole number above 0"]),
    (dict(batch=8, seq=2.5), ["seq=2.5", "whole number above 0"]),
])
def test_bad_arguments_are_refused_with_what_was_received_and_what_to_give(kwargs, words):
    with pytest.raises(ValueError) as error:
        will_it_fit(**{"models": ("gemma_7b_en",), "mesh_shapes": ((2, 4),), **kwargs})
    for word in words:
        assert word in str(error.value)


def test_one_preset_one_mesh_and_one_device_size_need_no_tuple():
    report = will_it_fit("gemma_7b_en", (2, 4), device_gib=80)
    assert [(r.model, r.mesh_shape) for r in report.rows] == [("gemma_7b_en", (2, 4))]
    assert report.device_gib == (80,) and report.row("gemma_7b_en", (2, 4)).verdict(80) == "fits"
    with pytest.raises(ValueError, match=r"Received: device_gib=nan\. A device size"):
        report.rows[0].verdict(float("nan"))
