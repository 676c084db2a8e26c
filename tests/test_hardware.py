"""Named device sets: the book's figures, the link each mesh axis crosses, and a device set of your own."""

import re

import pytest

from course_utils.hardware import DEVICE_SETS, GB, DeviceSet, Link, device_set


@pytest.mark.parametrize("name, critical", [("8xH100-80GB", 2200), ("v5p-128", 2550)])
def test_inside_a_node_the_books_critical_batch_is_peak_over_link(name, critical):
    devices = device_set(name)
    assert devices.flops_per_second / devices.inside.bytes_per_second == pytest.approx(critical)


def test_an_axis_whose_groups_span_two_nodes_crosses_infiniband():
    two_nodes = device_set("2x8xH100-80GB")
    assert two_nodes.flops_per_second / two_nodes.between.bytes_per_second == pytest.approx(2475)
    # devices are numbered row-major, 8 to a node: on (2, 8) the first axis joins device i to i + 8
    assert [two_nodes.link((2, 8), (a,)).name.split()[0] for a in (0, 1)] == ["InfiniBand", "NVLink"]
    assert [two_nodes.link((8, 2), (a,)).name.split()[0] for a in (0, 1)] == ["InfiniBand", "NVLink"]
    assert two_nodes.link((16, 1), (1,)).name.startswith("NVLink")  # a group of one device leaves no node
    assert two_nodes.link((2, 8), (0, 1)).name.startswith("InfiniBand")  # two axes: the slower link


def test_a_tpu_slice_without_wraparound_sends_one_way():
    v5e = device_set("v5e-8")
    assert v5e.inside.bytes_per_second == 4.5e10 and "no wraparound" in v5e.inside.source
    assert device_set("v5p-128").inside.bytes_per_second == 2 * 9e10 and v5e.memory_bytes == 16 * GB
    assert all(s.source and s.inside.source for s in DEVICE_SETS.values())


def test_a_device_set_of_your_own_and_its_mistakes():
    link = Link("my fabric", 1e11, "measured")
    mine = DeviceSet("4xMine", "my chip", 4, 1e15, 24 * GB, link, per_node=4)
    assert device_set(mine) is mine and mine.link((2, 2), (0,)) is link
    with pytest.raises(ValueError, match=r"do not make whole nodes of 3"):
        DeviceSet("bad", "chip", 4, 1e15, 1e9, link, per_node=3)
    with pytest.raises(ValueError, match=r"give between="):
        DeviceSet("bad", "chip", 8, 1e15, 1e9, link, per_node=4)
    with pytest.raises(ValueError, match=r"flops_per_second is a finite number above 0. Received: flops_per_second=0"):
        DeviceSet("bad", "chip", 4, 0, 1e9, link, per_node=4)
    for wrong in (0, -1e11, float("nan"), float("inf"), "4e11", True):
        with pytest.raises(ValueError, match=rf"Link 'x': bytes_per_second is a finite number above 0. Received: "
                                             rf"bytes_per_second={re.escape(repr(wrong))}\."):
            Link("x", wrong, "s")
        with pytest.raises(ValueError, match=r"finite number above 0"):
            DeviceSet("bad", "chip", 4, wrong, 1e9, link, per_node=4)
        with pytest.raises(ValueError, match=r"memory_bytes_per_second is a finite number above 0"):
            DeviceSet("bad", "chip", 4, 1e15, 1e9, link, per_node=4, memory_bytes_per_second=wrong)
    with pytest.raises(TypeError, match=r"inside is a course_utils.hardware.Link.*Received: inside=400000000000.0"):
        DeviceSet("bad", "chip", 4, 1e15, 1e9, 4e11, per_node=4)
    assert mine.memory_bytes_per_second is None and device_set("8xH100-80GB").memory_bytes_per_second == 3.35e12
    with pytest.raises(ValueError, match=r"Received: mesh_shape=\(2, 4\) \(8 devices\)"):
        mine.link((2, 4), (0,))
    with pytest.raises(ValueError, match=r"devices is one of .*'8xH100-80GB'.*Received: devices='H100'"):
        device_set("H100")


def test_a_v5p_slice_is_named_by_its_tensorcores_and_jax_sees_its_chips():
    assert [device_set(n).devices for n in ("v5p-8", "v5p-16", "v5p-128")] == [4, 8, 64]
