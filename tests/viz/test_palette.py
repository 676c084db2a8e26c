"""The palette stays distinguishable with colour-vision deficiencies, by a simulation checked against its sources."""

import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.colors import to_rgb

from course_utils.viz import vision
from course_utils.viz.palette import (DEVICE_COLORS, MEMORY_COLORS, PROCESS_COLORS, device_color, mesh_colors,
                                      process_color)

MIN_DELTA_E = 12.0


def rgb(colors):
    return np.array([to_rgb(c) for c in colors])


@pytest.mark.parametrize("lab1, lab2, expected", [  # Sharma, Wu and Dalal (2005), Table 1
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
    ((50.0, 2.5, 0.0), (50.0, 3.2592, 0.3350), 1.0),
])
def test_ciede2000_matches_the_published_test_pairs(lab1, lab2, expected):
    assert vision.delta_e_2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)


def test_simulation_keeps_grey_and_maps_to_lab_like_the_standard():
    grey = np.array([0.5, 0.5, 0.5])
    for kind in vision.VISIONS:
        assert np.allclose(vision.simulate(grey, kind), grey, atol=2e-3), kind  # Machado rows sum to 1
    assert np.allclose(vision.to_lab(np.array([1.0, 1.0, 1.0])), [100, 0, 0], atol=1e-3)
    assert np.allclose(vision.to_lab(np.array([1.0, 0.0, 0.0])), [53.24, 80.09, 67.20], atol=0.05)
    red, green = vision.simulate(np.array([[1.0, 0, 0], [0, 0.6, 0]]), "deuteranopia")
    assert vision.delta_e_2000(vision.to_lab(red), vision.to_lab(green)) < 15  # red-green collapse


@pytest.mark.parametrize("kind", vision.VISIONS)
def test_device_colors_stay_apart_for_every_vision(kind):
    distance, pair = vision.closest_pair(rgb(DEVICE_COLORS), kind)
    assert distance >= MIN_DELTA_E, f"cpu:{pair[0]} and cpu:{pair[1]} are {distance:.1f} apart under {kind}"
    assert vision.closest_pair(rgb(DEVICE_COLORS), kind, metric=vision.delta_e_76)[0] >= MIN_DELTA_E


@pytest.mark.parametrize("kind", vision.VISIONS)
def test_process_and_memory_colors_stay_apart(kind):
    assert vision.closest_pair(rgb(PROCESS_COLORS), kind)[0] >= MIN_DELTA_E
    assert vision.closest_pair(rgb(MEMORY_COLORS.values()), kind)[0] >= MIN_DELTA_E
    from course_utils.viz.palette import STEP_COLORS

    every_part = rgb([*MEMORY_COLORS.values(), *STEP_COLORS.values()])  # the six parts of a will-it-fit bar
    assert vision.closest_pair(every_part, kind)[0] >= MIN_DELTA_E


def test_the_old_tab10_palette_fails_the_same_check():
    tab10 = np.array(colormaps["tab10"].colors)[:8]
    distance, pair = vision.closest_pair(tab10, "deuteranopia", metric=vision.delta_e_76)
    assert distance < 8 and pair == (2, 3)  # cpu:2 and cpu:3, as a learner with deuteranopia sees them


def test_device_colors_beyond_the_palette_are_refused_not_repeated():
    assert device_color("cpu:3") == device_color(3) == DEVICE_COLORS[3]
    with pytest.raises(ValueError, match="mesh_colors"):
        device_color("cpu:8")
    assert process_color(5) not in PROCESS_COLORS


def test_big_meshes_colour_by_row_and_say_so():
    grid = np.array([f"cpu:{i}" for i in range(64)]).reshape(8, 8)
    colors = mesh_colors(grid, ("data", "model"))
    assert not colors.by_device and "mesh row ('data' index)" in colors.rule
    for i in range(8):
        assert {colors[d] for d in grid[i]} == {DEVICE_COLORS[i]}
    wide = mesh_colors(np.array([f"cpu:{i}" for i in range(512)]).reshape(1, 512), ("data",))
    assert len(set(wide.colors.values())) == 8 and "run of 64 consecutive devices" in wide.rule
    small = mesh_colors(np.array(["cpu:0", "cpu:1"]), ("data",))
    assert small.by_device and small["cpu:1"] == DEVICE_COLORS[1]
