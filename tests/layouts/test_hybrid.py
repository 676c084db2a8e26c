"""HSDP as a Keras distribution: the batch over several mesh axes, the weights split within a replica."""

import numpy as np
import pytest

from course_utils import make_mesh
from course_utils.layouts.derive import derive_layout_map
from course_utils.layouts.hybrid import batch_axes_of, hybrid_parallel, over_replicas
from course_utils.layouts.layout_map import make_layout_map

AXES = ("replica", "batch", "model")


def test_hsdp_with_tensor_parallelism_trains_as_one_device_does(up_down, sixteen_rows):
    x, y = sixteen_rows
    alone = up_down().fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False).history["loss"]
    mesh = make_mesh((2, 2, 2), AXES)
    rules = derive_layout_map(up_down(), mesh, data_axis="batch", model_axis="model").layout_map
    hsdp = hybrid_parallel(over_replicas(rules, mesh))
    with hsdp.scope():
        model = up_down()
        split = model.fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(split, alone, rtol=1e-5)
    specs = {v.path: tuple(v.value.sharding.spec) for v in model.trainable_variables}
    assert specs["up/kernel"] == ("batch", "model") and specs["down/kernel"] == ("model", "batch")
    assert tuple(hsdp.get_data_layout((16, 16)).backend_layout.spec) == (("replica", "batch"), None)
    assert batch_axes_of(hsdp) == ("replica", "batch") and hsdp.num_model_replicas == 4
    # the derived rule for the block's output follows the batch onto both axes
    assert tuple(over_replicas(rules, mesh)["down/output"].axes) == (("replica", "batch"), None)


def test_a_dimension_split_over_several_axes_is_a_rule_keras_takes(up_down):
    import keras

    mesh = make_mesh((2, 2, 2), AXES)
    layout_map = make_layout_map(mesh, {"up/kernel": (("replica", "batch"), "model")})
    with keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():
        model = up_down()
    assert tuple(model.get_layer("up").kernel.value.sharding.spec) == (("replica", "batch"), "model")
    with pytest.raises(ValueError, match=r"\['nodes'\] are not axes of the mesh \('replica', 'batch', 'model'\)"):
        make_layout_map(mesh, {"up/kernel": (("nodes", "batch"), None)})


@pytest.mark.parametrize("axes", [("nodes",), (), ("batch", "batch")])
def test_batch_axes_must_be_distinct_axes_of_the_mesh(axes):
    mesh = make_mesh((2, 2, 2), AXES)
    with pytest.raises(ValueError, match=r"batch_axes names distinct axes of the mesh \('replica', 'batch', 'model'\)"):
        hybrid_parallel(make_layout_map(mesh, {}), axes)
