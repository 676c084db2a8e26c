import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding, PartitionSpec
from keras import distribution

from course_utils import make_mesh, mesh_shapes, placement, planned_placement, shard_of
from course_utils.layout_axes import layout_errors

SHAPES = [(8, 1), (4, 2), (2, 4), (1, 8)]


def layout(axes, shape=(2, 4), names=("data", "model")):
    return distribution.TensorLayout(axes, make_mesh(shape, names))


def real_array(shape, tensor_layout):
    values = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    return jax.device_put(values, tensor_layout.backend_layout)


def test_kernel_split_over_model_on_2x4():
    p = planned_placement((32, 64), layout((None, "model")))
    assert p.shard_shape == (32, 16)
    assert len(p.blocks) == 4
    # each block is held by the two devices of one mesh column
    assert [b.devices for b in p.blocks] == [("cpu:0", "cpu:4"), ("cpu:1", "cpu:5"), ("cpu:2", "cpu:6"), ("cpu:3", "cpu:7")]
    assert [b.index for b in p.blocks] == [((0, 32), (16 * i, 16 * (i + 1))) for i in range(4)]
    assert p.replication == 2
    assert p.bytes_per_device == {f"cpu:{i}": 32 * 16 * 4 for i in range(8)}
    assert p.dim_axes == ((), ("model",))
    assert p.mesh_shape == (2, 4) and p.axis_names == ("data", "model")


@pytest.mark.parametrize("mesh_shape", SHAPES)
def test_every_2d_shape_against_jax(mesh_shape):
    lay = layout((None, "model"), mesh_shape)
    p = planned_placement((32, 64), lay)
    data, model = mesh_shape
    assert p.shard_shape == (32, 64 // model)
    assert len(p.blocks) == model and p.replication == data
    array = real_array((32, 64), lay)
    real = placement(array)
    assert real == p
    for shard in array.addressable_shards:
        device = f"cpu:{shard.device.id}"
        np.testing.assert_array_equal(np.asarray(array)[p.slices(device)], np.asarray(shard.data))


def test_three_d_mesh_and_four_d_tensor():
    lay = layout(("a", None, "c", "b"), (2, 2, 2), ("a", "b", "c"))
    p = planned_placement((4, 3, 6, 8), lay)
    assert p.shard_shape == (2, 3, 3, 4)
    assert len(p.blocks) == 8 and p.replication == 1
    assert placement(real_array((4, 3, 6, 8), lay)) == p


def test_scalar_and_vector_are_replicated():
    scalar = planned_placement((), layout(()))
    assert scalar.shard_shape == () and len(scalar.blocks) == 1 and scalar.replication == 8
    assert scalar.is_replicated and scalar.total_bytes == 4
    vector = planned_placement((16,), layout(("data",)), dtype="float16")
    assert vector.shard_shape == (8,) and vector.bytes_per_device["cpu:0"] == 16


def test_two_axes_on_one_dimension_from_a_jax_sharding():
    # Keras's TensorLayout names one axis per dimension; JAX can split a dimension over two.
    mesh = make_mesh((2, 4), ("data", "model")).backend_mesh
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "model"), None))
    p = planned_placement((16, 4), sharding)
    assert p.shard_shape == (2, 4) and len(p.blocks) == 8
    assert p.dim_axes == (("data", "model"), ())


def test_keras_variable_placement_under_model_parallel():
    import keras

    mesh = make_mesh((2, 4), ("data", "model"))
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*dense/kernel"] = (None, "model")
    with distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data").scope():
        dense = keras.layers.Dense(64, name="dense")
        dense.build((None, 32))
    p = placement(dense.kernel)
    assert p.name == "dense/kernel" and p.shard_shape == (32, 16)
    assert p == planned_placement((32, 64), distribution.TensorLayout((None, "model"), mesh), name="dense/kernel")


def test_single_device_array():
    p = placement(jax.device_put(np.ones((3, 5), "float32"), jax.devices()[2]))
    assert p.devices == ("cpu:2",) and p.shard_shape == (3, 5) and p.axis_names == ()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: planned_placement((30, 64), layout(("model", None))), r"size 30.*4 equal parts along model"),
        (lambda: planned_placement((32,), layout((None, "model"))), r"2 entries but the tensor has 1"),
        (lambda: planned_placement((32, 64), layout(("model", "model"))), r"used for more than one dimension"),
        (lambda: planned_placement((32, 64), distribution.TensorLayout((None, "model"))), r"knows its mesh"),
        (lambda: planned_placement(32, layout(("model",))), r"Received: shape=32"),
        (lambda: placement(np.ones(3)), r"Received: ndarray.*planned_placement"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_shard_of_reads_the_block_a_device_holds():
    lay = layout((None, "model"))
    array = real_array((32, 64), lay)
    p = placement(array)
    np.testing.assert_array_equal(shard_of(array, "cpu:6"), np.asarray(array)[p.slices("cpu:6")])
    assert shard_of(array, "cpu:6").shape == (32, 16)
    with pytest.raises(ValueError, match="holds no block.*cpu:0"):
        shard_of(jax.device_put(np.ones(3), jax.devices()[0]), "cpu:5")


def test_shard_of_a_numpy_array_says_to_lay_it_out_first():
    with pytest.raises(TypeError, match=r"Received: ndarray\. A NumPy array lives on no device.*jax\.device_put"):
        shard_of(np.ones((4, 4)), "cpu:0")


@st.composite
def mesh_and_layout(draw):
    """A mesh of 1, 2, 4 or 8 devices (any order, 1-3 axes), a tensor shape, and a layout for it.

    Layouts may be shorter than the tensor's rank (or one entry longer), split a dimension over
    several axes, leave sizes that do not divide, repeat an axis, or name an
    axis the mesh lacks.
    """
    n = draw(st.sampled_from([1, 2, 4, 8]))
    ndim = draw(st.integers(1, 3))
    mesh_shape = draw(st.sampled_from(mesh_shapes(n, ndim)))
    names = ("data", "model", "seq")[:ndim]
    devices = draw(st.permutations([f"cpu:{i}" for i in range(n)]))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]), min_size=1, max_size=3)))
    entry = st.one_of(st.none(), st.sampled_from(names + ("other",)),
                      st.lists(st.sampled_from(names), min_size=1, max_size=2).map(tuple))
    axes = tuple(draw(st.lists(entry, min_size=1, max_size=len(shape) + 1)))
    return make_mesh(mesh_shape, names, devices=devices), shape, axes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mesh_and_layout())
def test_planned_placement_is_where_jax_puts_the_array(case):
    mesh, shape, axes = case
    several = any(isinstance(entry, tuple) for entry in axes)  # Keras's TensorLayout takes one axis per entry
    try:
        layout = (NamedSharding(mesh.backend_mesh, PartitionSpec(*axes)) if several
                  else distribution.TensorLayout(axes, mesh))
    except Exception as refused:  # Keras or JAX refuses the layout itself, before either path runs
        assert layout_errors(shape, axes, dict(zip(mesh.axis_names, mesh.shape))), refused
        return
    values = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    try:
        real = placement(jax.device_put(values, layout if several else layout.backend_layout))
    except Exception:  # JAX refuses with a ValueError, or its DuplicateSpecError (not a ValueError)
        with pytest.raises(ValueError, match=r"cannot split shape|partitioned|duplicate"):
            planned_placement(shape, layout)
        return
    assert planned_placement(shape, layout) == real
