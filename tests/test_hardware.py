"""Named device sets: the book's figures, the link each mesh axis crosses, and a device set of your own."""

import re

import pytest

from course_utils.hardware import DEVICE_SETS, GB, DeviceSet, Link, device_set


@pytest.mark.parametrize("name, critical", [("8xH100-80GB", 2200), ("v5p-128", 2550)])
def test_inside_a_node_the_books_critical_batch_is_peak_over_link(name, critical):
    devices = device_set(name)
    assert devices.flops_per_second / devices.inside.bytes_per_second == pytest.approx(critical)


def test_an_axis_whose_groups_span_two_nodes_crosses_infiniband_through_as_many_nics_as_it_has_gpus_in_a_node():
    two_nodes = device_set("2x8xH100-80GB")
    assert two_nodes.between.bytes_per_second == 5e10  # each H100's own 400 Gb/s NIC
    # devices are numbered row-major, 8 to a node: on (2, 8) the first axis joins device i to i + 8
    assert [two_nodes.link((2, 8), (a,)).name.split()[0] for a in (0, 1)] == ["InfiniBand", "NVLink"]
    assert [two_nodes.link((8, 2), (a,)).name.split()[0] for a in (0, 1)] == ["InfiniBand", "NVLink"]
    assert two_nodes.link((16, 1), (1,)).name.startswith("NVLink")  # a group of one device leaves no node
    # one GPU of each node in a group: one NIC each, 8x slower than the node's egress (the book's node-egress
    # figure for a (2, 8) mesh's cross-node all-reduce: 8x the old estimate, which charged every GPU 400 GB/s)
    assert two_nodes.link((2, 8), (0,)).bytes_per_second == 5e10
    assert two_nodes.link((8, 2), (0,)).bytes_per_second == 4 * 5e10  # 4 of each node's GPUs in a group
    # all 16 in one group: every NIC of both nodes, the node's egress, 400 GB/s: the book's 2,475 critical batch
    assert two_nodes.flops_per_second / two_nodes.link((16, 1), (0,)).bytes_per_second == pytest.approx(2475)
    assert two_nodes.link((2, 8), (0, 1)).bytes_per_second == 4e11  # two axes: the whole node in each group
    assert two_nodes.inside.latency == 1e-6 and two_nodes.between.latency == 5e-6
    assert two_nodes.inside.achieved == 3.7e11 and "370 GB/s is reached in practice" in two_nodes.inside.source


@pytest.mark.parametrize("name, shape, axes, torus_axes, book", [
    ("v5e-8", (8, 1), (0,), 2, 1915), ("v5e-8", (2, 4), (1,), 1, 3830), ("v5p-128", (64, 1), (0,), 3, 850),
    ("v5p-16", (8, 1), (0,), 3, 1700)])
def test_a_tpu_axis_gets_the_links_of_every_torus_axis_it_spans(name, shape, axes, torus_axes, book):
    # the book's rule: data parallelism over all 8 chips of a v5e-8 (2 x 4, no wraparound) uses both torus axes'
    # links, critical batch C / W about 1,915 tokens (x 7/8, the ring); over v5p-128's 64 chips (4 x 4 x 4, with
    # wraparound) all three, about 850
    devices = device_set(name)
    link = devices.link(shape, axes)
    assert link.bytes_per_second == devices.inside.bytes_per_second * torus_axes
    assert link.short == ("ICI" if torus_axes == 1 else f"ICI x{torus_axes}")  # the links it sends through, counted
    critical = devices.flops_per_second / link.bytes_per_second * (7 / 8 if name == "v5e-8" else 1)
    assert critical == pytest.approx(book, rel=0.01)


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
    for wrong in (0, 1.5, True):
        with pytest.raises(ValueError, match=rf"Link 'x': count is how many links .* Received: count={wrong!r}\."):
            Link("x", 1e11, "s", count=wrong)
    with pytest.raises(TypeError, match=r"inside is a course_utils.hardware.Link.*Received: inside=400000000000.0"):
        DeviceSet("bad", "chip", 4, 1e15, 1e9, 4e11, per_node=4)
    assert mine.memory_bytes_per_second is None and device_set("8xH100-80GB").memory_bytes_per_second == 3.35e12
    with pytest.raises(ValueError, match=r"Received: mesh_shape=\(2, 4\) \(8 devices\)"):
        mine.link((2, 4), (0,))
    with pytest.raises(ValueError, match=r"devices is one of .*'8xH100-80GB'.*Received: devices='H100'"):
        device_set("H100")


def test_a_v5p_slice_is_named_by_its_tensorcores_and_jax_sees_its_chips():
    assert [device_set(n).devices for n in ("v5p-8", "v5p-16", "v5p-128")] == [4, 8, 64]
