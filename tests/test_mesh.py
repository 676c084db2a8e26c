import numpy as np
import pytest
from keras import distribution

from course_utils import describe_mesh, make_mesh, mesh_shapes


def test_mesh_shapes_of_eight():
    assert mesh_shapes(8) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert mesh_shapes(8, 1) == [(8,)]
    three = mesh_shapes(8, 3)
    assert len(three) == 10 and (2, 2, 2) in three
    assert all(np.prod(s) == 8 for s in three)


@pytest.mark.parametrize("args", [(0, 2), (8, 0), (8.0, 2), (True, 2)])
def test_mesh_shapes_bad_input(args):
    with pytest.raises(ValueError, match="Received"):
        mesh_shapes(*args)


def test_mesh_shapes_of_many_devices_answer_at_once_or_say_why_not():
    import time

    start = time.perf_counter()
    assert len(mesh_shapes(2**40)) == 41 and mesh_shapes(2**40)[1] == (2, 2**39)  # once took minutes
    assert mesh_shapes(10**12 + 39) == [(1, 10**12 + 39), (10**12 + 39, 1)]  # a prime
    assert mesh_shapes(1, 5000) == [(1,) * 5000] and mesh_shapes(12, 3) == sorted(mesh_shapes(12, 3))
    assert time.perf_counter() - start < 2
    with pytest.raises(ValueError, match=r"n_devices=8, ndim=200: that makes 1,353,400 shapes.*fewer axes"):
        mesh_shapes(8, 200)
    with pytest.raises(ValueError, match=r"n_devices=2199023255552, more devices than any machine has"):
        mesh_shapes(2**41)


def test_make_mesh_is_a_real_keras_mesh_in_device_order():
    mesh = make_mesh((2, 4), ("data", "model"))
    assert isinstance(mesh, distribution.DeviceMesh)
    assert mesh.shape == (2, 4) and mesh.axis_names == ("data", "model")
    assert mesh.devices[1, 0] == "cpu:4"
    assert dict(mesh.backend_mesh.shape) == {"data": 2, "model": 4}
    assert [d.id for d in mesh.backend_mesh.devices.flat] == list(range(8))


def test_make_mesh_three_d_and_given_devices():
    mesh = make_mesh((2, 2, 2), ("a", "b", "c"))
    assert mesh.devices[1, 0, 1] == "cpu:5"
    reversed_mesh = make_mesh((8,), ("data",), devices=[f"cpu:{i}" for i in range(7, -1, -1)])
    assert list(reversed_mesh.devices) == [f"cpu:{i}" for i in range(7, -1, -1)]


@pytest.mark.parametrize(
    "shape, names, message",
    [
        ((3, 3), ("data", "model"), r"Received: shape=\(3, 3\) for 8 devices\. Valid 2-D shapes: \(1, 8\), \(2, 4\), \(4, 2\), \(8, 1\)"),
        ((2, 4), ("data",), r"one name per axis.*2 axes.*1 names"),
        ((2, 4), "data", r"a single string is not.*axis_names='data'"),
        ((2, 4), ("data", "data"), r"\['data'\] appear more than once"),
        ((2, 4), ("data", ""), r"non-empty string"),
        ((0, 8), ("data", "model"), r"positive whole number.*\[0\]"),
        ((-2, -4), ("data", "model"), r"positive whole number"),
        (8, ("data",), r"tuple of axis sizes.*Received: shape=8"),
        ((), (), r"at least one axis"),
        ((4, 4), ("data", "model"), r"needs 16 devices, but 8 were given"),
    ],
)
def test_make_mesh_bad_input(shape, names, message):
    with pytest.raises(ValueError, match=message):
        make_mesh(shape, names)


def test_make_mesh_accepts_a_shape_written_as_text():
    mesh = make_mesh("2x4", ("data", "model"))
    assert mesh.shape == (2, 4) and mesh.devices[1, 0] == "cpu:4"
    assert make_mesh("8", ("data",)).shape == (8,)
    with pytest.raises(ValueError, match=r"Received: shape='two by four'\. Write for example make_mesh\(\(2, 4\)"):
        make_mesh("two by four", ("data", "model"))


def test_make_mesh_takes_jax_devices_too():
    import jax

    mesh = make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8])
    assert mesh.devices[0, 1] == "cpu:1"


@pytest.mark.parametrize(
    "devices, message",
    [
        (["cpu:0"] * 8, r"only once.*Received: devices=\['cpu:0', .*\('cpu:0' 8 times\)"),
        ([f"cpu:{i}" for i in range(7)] + ["cpu:99"], r"device this process does not have.*cpu:99.*Available: \['cpu:0'"),
        ([f"cpu:{i}" for i in range(7)] + ["tpu:0"], r"device this process does not have.*tpu:0"),
        ("cpu:0", r"a list of device names.*Received: devices='cpu:0'"),
    ],
)
def test_make_mesh_bad_devices(devices, message):
    with pytest.raises(ValueError, match=message):
        make_mesh((8,), ("data",), devices=devices)


def test_describe_mesh_rows():
    table = describe_mesh(make_mesh((2, 4), ("data", "model")))
    assert len(table.rows) == 8
    assert table.rows[5].coordinate == (1, 1) and table.rows[5].device == "cpu:5"
    assert table.device_at(0, 3) == "cpu:3"
    text = repr(table)
    assert "data" in text and "model" in text and "cpu:7" in text
    assert "<table>" in table._repr_html_()
