"""Checkers for lesson 03: the 2 x 4 example."""

from course_utils.exercises.core import exercise

SHAPES = ((8, 1), (4, 2), (2, 4), (1, 8))
# The lesson's Megatron-style layout of the MLP 64 -> Dense 128 "d1" -> Dense 10 "d2".
LAYOUT = {"d1/kernel": (None, "model"), "d1/bias": ("model",), "d2/kernel": ("model", None), "d2/bias": (None,)}
SHAPE_OF = {"d1/kernel": (64, 128), "d1/bias": (128,), "d2/kernel": (128, 10), "d2/bias": (10,)}


def _mesh(shape):
    from course_utils.devices import current_setup
    from course_utils.mesh import make_mesh

    setup = current_setup()
    return make_mesh(shape, ("data", "model"), devices=list(setup.devices) if setup else None)


def _planned(path, mesh):
    from keras.distribution import TensorLayout

    from course_utils.placements import planned_placement

    return planned_placement(SHAPE_OF[path], TensorLayout(LAYOUT[path], mesh), name=path)


def _as_device_set(answer):
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return None
    return {str(d) for d in answer}


@exercise("03.1", "Which device(s) receive rows 0:8 of a (16, 64) batch AND hold columns 32:64 of d1/kernel on the 2 x 4 mesh?",
          form='a set of device strings, e.g. {"cpu:0", "cpu:1"}')
def rows_and_columns(answer):
    """Intersects the real planned placements of the batch and of d1/kernel."""
    from keras.distribution import TensorLayout

    from course_utils.placements import planned_placement

    mesh = _mesh((2, 4))
    batch = planned_placement((16, 64), TensorLayout(("data", None), mesh))
    kernel = _planned("d1/kernel", mesh)
    has_rows = {d for d, ranges in batch.device_index if ranges[0] == (0, 8)}
    has_cols = {d for d, ranges in kernel.device_index if ranges[1] == (32, 64)}
    expected = has_rows & has_cols
    given = _as_device_set(answer)
    if given is None:
        return 'Give a set of device strings, like {"cpu:0"}.'
    if given == expected:
        return None
    if given == has_cols:
        return (f"{sorted(has_cols)} all hold columns 32:64 of d1/kernel, but only one of them "
                f"sits in data row 0, which receives batch rows 0:8.")
    if given == has_rows:
        return (f"{sorted(has_rows)} all receive rows 0:8, but each holds a different quarter "
                f"of d1's columns. Which model position holds columns 32:64?")
    return ("Rows 0:8 go to data row 0 of the mesh; columns 32:64 are the second quarter of 128, "
            "so model position 1. Which device sits at (0, 1)?")


@exercise("03.2", "Predict the shard shape of d2/kernel (128, 10), laid out ('model', None), on a (4, 2) mesh.",
          form='a shard shape as a tuple of two whole numbers, e.g. (128, 10)')
def d2_shard_shape_4x2(answer):
    """Compares the answer with planned_placement of d2/kernel on a real (4, 2) mesh."""
    expected = _planned("d2/kernel", _mesh((4, 2))).shard_shape
    try:
        given = tuple(int(n) for n in answer)
    except TypeError:
        return "Give the shard shape as a tuple of two numbers, like (128, 10)."
    if given == expected:
        return None
    if given == _planned("d2/kernel", _mesh((2, 4))).shard_shape:
        return "That is the shard on the 2 x 4 mesh. On (4, 2) the 'model' axis has size 2, not 4."
    if given[0] == 128 and given[1] < 10:
        return "The layout ('model', None) splits the first dimension (the 128 rows), not the 10 columns."
    return "Divide each dimension by the size of the mesh axis named for it; None keeps it whole."


@exercise("03.3", "Which mesh shape of 8 devices gives the fewest weight bytes per device, while still splitting the batch over at least 2 devices?",
          form='a mesh shape as a tuple (data size, model size), e.g. (4, 2)')
def fewest_weight_bytes(answer):
    """Sums the real planned bytes per device of every weight for each mesh shape."""
    bytes_per = {}
    for shape in SHAPES:
        mesh = _mesh(shape)
        bytes_per[shape] = sum(_planned(p, mesh).largest_shard_bytes for p in LAYOUT)
    allowed = {s: n for s, n in bytes_per.items() if s[0] >= 2}
    expected = min(allowed, key=allowed.get)
    try:
        given = tuple(int(n) for n in answer)
    except TypeError:
        return "Give a mesh shape as a tuple (data size, model size), like (4, 2)."
    if given == expected:
        return None
    if given not in bytes_per:
        return f"Pick one of the 2-D shapes {list(SHAPES)}."
    if given[0] < 2:
        return (f"{given} holds the fewest bytes ({bytes_per[given]:,}), but its 'data' axis has size 1: "
                f"every device sees the whole batch.")
    return (f"{given} holds {bytes_per[given]:,} weight bytes per device; another shape with a 'data' "
            f"axis of 2 or more holds fewer. More devices along 'model' means smaller shards.")
