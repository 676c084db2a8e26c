"""Checkers for lesson 05: sharded training on real data."""

from course_utils.exercises.core import exercise

SHAPES = ((8, 1), (4, 2), (2, 4), (1, 8))
BUDGET = 400_000  # bytes of training state each device has room for, in exercise 05.2
# The lesson's tensor-parallel layout: d1 by columns, d2 by rows.
LESSON_LAYOUT = {"d1/kernel": (None, "model"), "d1/bias": ("model",), "d2/kernel": ("model", None)}
# Exercise 05.3: d2 by columns, d3 by rows.
SHIFTED_LAYOUT = {"d1/kernel": (None, None), "d1/bias": (None,), "d2/kernel": (None, "model"),
                  "d2/bias": ("model",), "d3/kernel": ("model", None), "d3/bias": (None,)}


def _digits_mlp():
    """The lesson's model: 64 -> 256 relu "d1" -> 256 relu "d2" -> 10 "d3", compiled with Adam."""
    import keras

    inputs = keras.Input(shape=(64,))
    hidden = keras.layers.Dense(256, activation="relu", name="d1")(inputs)
    hidden = keras.layers.Dense(256, activation="relu", name="d2")(hidden)
    outputs = keras.layers.Dense(10, name="d3")(hidden)
    model = keras.Model(inputs, outputs, name="digits_mlp")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _model_parallel(shape):
    from keras import distribution

    from course_utils.layouts.layout_map import make_layout_map
    from course_utils.mesh import make_mesh

    mesh = make_mesh(shape, ("data", "model"))
    return distribution.ModelParallel(layout_map=make_layout_map(mesh, LESSON_LAYOUT), batch_dim_name="data")


def _memory(shape):
    """The real memory report of the lesson's model under ModelParallel on `shape`."""
    from course_utils.memory.state import memory_report

    dist = _model_parallel(shape)
    with dist.scope():
        model = _digits_mlp()
    return memory_report(model, dist)


@exercise("05.1", "Predict the Adam optimizer-state bytes per device of the digits MLP under ModelParallel (4, 2).",
          form='a whole number of bytes, e.g. 123_456')
def adam_state_bytes(answer):
    """Compares the answer with memory_report of the real model on (4, 2); a few bytes of scalars are forgiven."""
    row = max(_memory((4, 2)).rows, key=lambda r: r.optimizer)
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return "Give a number of bytes, like 123_456."
    if abs(answer - row.optimizer) <= 16:
        return None
    if abs(answer - row.weights) <= 16:
        return "That is one copy of the weight shards. Adam keeps two moments per weight (m and v)."
    if abs(answer - max(r.optimizer for r in _memory((2, 4)).rows)) <= 16:
        return ("That is the 2 x 4 mesh's figure, from reports. On (4, 2) the 'model' axis has size 2: "
                "each split weight is cut in 2, not 4.")
    if abs(answer - 2 * _memory((8, 1)).rows[0].weights) <= 16:
        return "That is Adam's state for the whole model. Each device holds only its shards' moments."
    return (f"Add up each weight's shard on one device (d1/kernel is (64, 128) there, d3 is whole), "
            f"times 4 bytes, times 2 moments. You are {answer - row.optimizer:+,.0f} bytes off.")


@exercise("05.2", "Each device has room for 400,000 bytes of training state: which ModelParallel mesh shape fits and splits the batch the most?",
          form='a mesh shape as a tuple (data size, model size), e.g. (8, 1)')
def fits_the_budget(answer):
    """Reads memory_report of the real model for every mesh shape and picks the best that fits."""
    try:
        given = tuple(int(n) for n in answer)
    except TypeError:
        return "Give a mesh shape (data size, model size) as a tuple, like (4, 2)."
    if given not in SHAPES:
        return f"Pick one of the 2-D shapes {list(SHAPES)}."
    totals = {shape: _memory(shape).max_total for shape in SHAPES}
    fitting = [s for s in SHAPES if totals[s] <= BUDGET]
    expected = max(fitting, key=lambda s: s[0])
    if given == expected:
        return None
    if totals[given] > BUDGET:
        return (f"{given} needs {totals[given]:,} bytes per device, more than {BUDGET:,}: "
                f"split the model over more devices.")
    return (f"{given} fits ({totals[given]:,} bytes), but another shape that fits has a larger "
            f"'data' axis, so more devices share the batch.")


@exercise("05.3", "Write a LayoutMap on the 2 x 4 mesh that splits d2 by columns and d3 by rows (Megatron-style).",
          form="a keras.distribution.LayoutMap on the lesson's 2 x 4 mesh")
def shifted_megatron(answer):
    """Runs check_layout_map and explain_layout on the learner's LayoutMap and the real model."""
    from keras import distribution

    from course_utils.layouts.layout_map import explain_layout
    from course_utils.layouts.checks import check_layout_map

    if not isinstance(answer, distribution.LayoutMap):
        return f"Build a keras.distribution.LayoutMap; this is a {type(answer).__name__}."
    mesh = answer.device_mesh
    if tuple(mesh.shape) != (2, 4) or tuple(mesh.axis_names) != ("data", "model"):
        return "Build the LayoutMap on the 2 x 4 mesh with axes ('data', 'model')."
    if _kernels_swapped(answer):
        return _SWAPPED
    model = _digits_mlp()
    problems = check_layout_map(answer, model)
    if problems:
        return " ".join(p.message for p in problems)
    report = explain_layout(model, distribution.ModelParallel(layout_map=answer, batch_dim_name="data"))
    wrong = {path: tuple(report.row(path).axes) for path, expected in SHIFTED_LAYOUT.items()
             if tuple(report.row(path).axes) != expected}
    return _shifted_hint(wrong) if wrong else None


_SWAPPED = ("d2/kernel and d3/kernel are swapped: d2/kernel gets ('model', None) and d3/kernel "
            "(None, 'model'), so d3's 10 output columns would have to split 4 ways. Split d2 by columns, "
            "(None, 'model'), and d3 by rows, ('model', None).")


def _kernels_swapped(layout_map) -> bool:
    """Keras's own lookup gives d2's kernel d3's rule and d3's kernel d2's."""
    try:
        found = {path: layout_map[path] for path in ("d2/kernel", "d3/kernel")}
    except ValueError:  # two keys match one path: check_layout_map explains it
        return False
    return all(layout is not None for layout in found.values()) and (
        tuple(found["d2/kernel"].axes), tuple(found["d3/kernel"].axes)) == (
        SHIFTED_LAYOUT["d3/kernel"], SHIFTED_LAYOUT["d2/kernel"])


def _shifted_hint(wrong: dict) -> str:
    """One message naming every variable laid out wrongly."""
    lines = []
    for path, got in wrong.items():
        if path == "d3/bias":
            lines.append("d3/bias is added after the partial sums of d3 are combined: keep it whole.")
        elif path == "d2/bias":
            lines.append("d2/bias must follow d2's columns: split it over 'model' too.")
        elif path.startswith("d1"):
            lines.append(f"{path} gets {got}; this map leaves d1 whole (replicated).")
        else:
            lines.append(f"{path} gets {got}; it should be {SHIFTED_LAYOUT[path]}.")
    return " ".join(lines)


@exercise("05.4", "Make mp the global distribution, build the digits MLP without a with block, then unset it.",
          form="the Keras model you built")
def global_distribution(answer):
    """Reads the real layout of the learner's model and the distribution in force now."""
    import keras
    from keras import distribution

    from course_utils.placements import placement

    if not isinstance(answer, keras.Model):
        return f"Give the model you built with build_digits_mlp(); this is a {type(answer).__name__}."
    try:
        kernel = answer.get_layer("d1").kernel
    except ValueError:
        return "Build the lesson's model, build_digits_mlp(): it has a layer named d1."
    if not placement(kernel).axis_names:
        return ("Its d1/kernel sits whole on one device: call distribution.set_distribution(mp) before "
                "you build the model, since variables are laid out when they are created.")
    axes = tuple(a[0] if a else None for a in placement(kernel).dim_axes)
    if axes != LESSON_LAYOUT["d1/kernel"]:
        return f"d1/kernel is split as {axes}; build it under mp, whose map gives it (None, 'model')."
    if distribution.distribution() is not None:
        return ("The model is laid out right, but a global distribution is still set: every model you build "
                "next would be laid out by it too. Unset it with distribution.set_distribution(None).")
    return None
