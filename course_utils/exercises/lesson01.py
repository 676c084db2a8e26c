"""Checkers for lesson 01: mesh grids."""

from course_utils.exercises.core import exercise


@exercise("01.1", "Which device sits at coordinate (2, 1) of a 4 x 2 mesh with axes ('data', 'model')?",
          form='a device string such as "cpu:0"')
def device_at_coordinate(answer):
    """Compares the answer with the device a real 4 x 2 DeviceMesh holds at (2, 1)."""
    from course_utils.mesh import make_mesh

    devices = make_mesh((4, 2), ("data", "model")).devices
    expected = str(devices[2, 1])
    if not isinstance(answer, str):
        return f"Give the device as a string, like {str(devices[0, 0])!r}."
    if answer == expected:
        return None
    if answer in (str(devices[1, 0]), str(devices[1, 1])):
        return "Coordinates start at 0: (2, 1) is the third row and the second column."
    if answer == str(devices.reshape(-1).reshape(4, 2, order="F")[2, 1]):
        return "The device list fills the grid row by row (row-major): each row of a 4 x 2 mesh holds 2 devices."
    return "Row i, column j of a 4 x 2 mesh holds device number i * 2 + j of the device list."


@exercise("01.2", "Build a 4 x 2 DeviceMesh with axes named 'data' and 'model'.",
          form='a keras.distribution.DeviceMesh, built with DeviceMesh(shape, axis_names, devices=...) or make_mesh')
def four_by_two_mesh(answer):
    """Checks the learner's DeviceMesh: its type, shape, axis names and device order."""
    import numpy as np
    from keras import distribution

    from course_utils.mesh import make_mesh

    if not isinstance(answer, distribution.DeviceMesh):
        return f"Build a keras.distribution.DeviceMesh; this is a {type(answer).__name__}."
    if tuple(answer.shape) == (2, 4):
        return "That is a 2 x 4 mesh; the first number is the size of the first axis, 'data'."
    if tuple(answer.shape) != (4, 2):
        return f"The mesh has shape {tuple(answer.shape)}; a 4 x 2 mesh has shape (4, 2)."
    if tuple(answer.axis_names) != ("data", "model"):
        return f"The axes are named {tuple(answer.axis_names)}; name them ('data', 'model'), in that order."
    expected = make_mesh((4, 2), ("data", "model")).devices
    if not np.array_equal(np.asarray(answer.devices).astype(str), expected):
        return "Use the course's 8 devices in their usual order (distribution.list_devices())."
    return None


@exercise("01.3", "List every 3-D mesh shape of 8 devices whose first axis has size 2.",
          form="a list of mesh shapes, each a tuple of three whole numbers, e.g. [(1, 2, 4), ...]")
def three_d_shapes(answer):
    """Compares the set of shapes with mesh_shapes(8, ndim=3) filtered on the first axis.

    The hints say what is off and where to look, never which shapes are missing.
    """
    from course_utils.mesh import mesh_shapes

    expected = {s for s in mesh_shapes(8, ndim=3) if s[0] == 2}
    if isinstance(answer, tuple) and answer and all(isinstance(n, int) for n in answer):
        return f"{answer} is one shape; give a list of every such shape, each a tuple of three sizes."
    try:
        given = {tuple(int(n) for n in s) for s in answer}
    except TypeError:
        return "Give a list of shapes: a list whose items are tuples of three whole numbers."
    wrong = sorted(given - expected)
    if wrong:
        more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
        return f"Not a 3-D shape of 8 devices starting with 2: {'; '.join(_why_not(s) for s in wrong[:3])}{more}."
    missing = expected - given
    if not given:
        return "The list is empty: give every 3-D shape of 8 devices whose first size is 2."
    if missing:
        count = f"{len(missing)} shape{'s are' if len(missing) > 1 else ' is'} missing."
        if any(1 in s for s in missing) and not any(1 in s for s in given):
            return f"{count} Axes of size 1 count too: along such an axis nothing is split, but it is still an axis."
        swapped = next((s for s in sorted(given) if (s[0], s[2], s[1]) in missing), None)
        if swapped:
            return f"{count} You have {swapped}; the same sizes in another order make a different mesh."
        return f"{count} The second and third sizes multiply to 4: try each whole number that divides 4 as the second."
    return None


def _why_not(shape: tuple[int, ...]) -> str:
    """Why one shape is not a 3-D mesh of 8 devices starting with 2."""
    import math

    if len(shape) != 3:
        return f"{shape} has {len(shape)} size{'s' * (len(shape) != 1)}, not 3"
    if shape[0] != 2:
        return f"{shape} starts with {shape[0]}, not 2"
    return f"{shape} uses {math.prod(shape)} devices, not 8"
