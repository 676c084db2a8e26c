"""ZeRO-2: the optimizer's state split over the batch axis, the weights whole; trained for real and compiled."""

import numpy as np
import pytest

from course_utils import make_mesh
from course_utils.layouts.layout_map import make_layout_map
from course_utils.layouts.zero import split_optimizer_state, state_layout, zero_parallel


def _whole():
    return make_layout_map(make_mesh((8, 1), ("batch", "model")), {})


def _data_parallel(keras):
    return keras.distribution.ModelParallel(layout_map=_whole(), batch_dim_name="batch")


def test_zero_trains_as_one_device_does_with_adams_state_split_and_the_weights_whole(up_down, sixteen_rows):
    import keras

    x, y = sixteen_rows
    alone = up_down().fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False).history["loss"]
    with _data_parallel(keras).scope():
        model = up_down()
        model.optimizer.build(model.trainable_variables)
        assert split_optimizer_state(model) == 8  # two moments of four weights
        split = model.fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(split, alone, rtol=1e-5)
    state = {v.path.split("/")[-1]: tuple(v.value.sharding.spec) for v in model.optimizer.variables}
    assert state["up_kernel_momentum"] == ("batch", None) and state["down_bias_velocity"] == ("batch",)
    assert state["iteration"] == ()
    assert all(tuple(v.value.sharding.spec) in ((), (None,), (None, None)) for v in model.trainable_variables)


def test_the_compiled_step_sums_slices_and_gathers_the_updated_weights(up_down):
    import keras

    from course_utils.advice.program import read_step

    model = up_down()
    dp = read_step(model, _data_parallel(keras), (16, 16))
    zero = read_step(model, zero_parallel(_whole()), (16, 16))
    assert {(t.kind, t.pass_) for t in dp.transfers} == {("all-reduce", "backward")}
    assert {(t.kind, t.pass_) for t in zero.transfers} == {("reduce-scatter", "backward"), ("all-gather", "other")}
    assert zero.sent() == pytest.approx(dp.sent(), rel=0.01)  # a reduce-scatter and an all-gather: one all-reduce
    assert zero.memory.arguments < dp.memory.arguments


@pytest.mark.parametrize("axes, shape, expected", [
    ((None, None), (32, 16), ("batch", None)),          # the first whole dimension that divides
    ((None,), (4,), (None,)),                            # a bias too small to split stays whole
    (("batch", "model"), (32, 16), ("batch", "model")),  # already split over the axis (FSDP): as it is
    (("model",), (12, 32), ("model", "batch")),          # the split dimension kept, the next one that divides
])
def test_state_layout_adds_the_batch_axis_where_the_weight_leaves_a_dimension_whole(axes, shape, expected):
    assert state_layout(axes, shape, "batch", 8) == expected


def test_its_mistakes_say_what_to_do(up_down):
    import keras

    with pytest.raises(ValueError, match=r"none is in scope.*inside `with distribution.scope\(\):`"):
        split_optimizer_state(up_down())
    with _data_parallel(keras).scope():
        with pytest.raises(ValueError, match=r"optimizer is not built yet.*model.optimizer.build"):
            split_optimizer_state(up_down())
    with pytest.raises(ValueError, match=r"one of \('batch', 'model'\). Received: axis='data'"):
        zero_parallel(_whole(), "data")
