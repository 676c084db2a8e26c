"""Checkers for lesson 02: axis roles."""

from course_utils.exercises.core import exercise


def _mesh_2x4():
    from course_utils.mesh import make_mesh

    return make_mesh((2, 4), ("data", "model"))


def _model_parallel():
    from keras import distribution

    mesh = _mesh_2x4()
    return distribution.ModelParallel(layout_map=distribution.LayoutMap(mesh), batch_dim_name="data")


@exercise("02.1", "Predict the shard shape of a (16, 10) batch under ModelParallel on a 2 x 4 mesh, batch_dim_name='data'.",
          form='a shard shape as a tuple of two whole numbers, e.g. (4, 10)')
def batch_shard_shape(answer):
    """Compares the answer with the shard shape of Keras's own data layout for that batch."""
    from course_utils.placements import planned_placement

    layout = _model_parallel().get_data_layout((16, 10))
    expected = planned_placement((16, 10), layout).shard_shape
    try:
        given = tuple(int(n) for n in answer)
    except TypeError:
        return "Give a shape: a tuple of two sizes, like (4, 10)."
    if given == expected:
        return None
    if given == (2, 10):
        return "That splits the batch over all 8 devices; it is split only along 'data' (size 2)."
    if given == (16, 10):
        return "Under ModelParallel the batch is still split along its batch axis, 'data'."
    if len(given) == 2 and given[1] != 10:
        return "Only the batch dimension (the first) is split; each example keeps its 10 features."
    return "The batch dimension splits into as many parts as the 'data' axis has devices."


@exercise("02.2", "Choose the TensorLayout axes that split a (32, 64) kernel's columns over 'model' on a 2 x 4 mesh.",
          form="a tuple with one entry per kernel dimension, each an axis name or None, e.g. (None, 'data')")
def kernel_columns(answer):
    """Builds the learner's layout and compares its blocks with the column split's.

    A layout shorter than the kernel's rank is valid: JAX leaves the missing trailing dimensions
    whole, so ("model",) is judged as the ("model", None) it becomes, and the hint says so.
    """
    from keras import distribution

    from course_utils.layout_axes import layout_errors
    from course_utils.placements import planned_placement

    if isinstance(answer, str) or not isinstance(answer, (tuple, list)):
        return "Give a tuple with one entry per kernel dimension, each an axis name or None."
    mesh = _mesh_2x4()
    errors = layout_errors((32, 64), tuple(answer), dict(zip(mesh.axis_names, mesh.shape)))
    if errors:
        return f"{tuple(answer)} cannot lay out a (32, 64) kernel: {errors[0]}"
    given = planned_placement((32, 64), distribution.TensorLayout(tuple(answer), mesh))
    expected = planned_placement((32, 64), distribution.TensorLayout((None, "model"), mesh))
    if given.blocks == expected.blocks:
        return None
    hint = _columns_hint(given.dim_axes)
    if len(answer) < 2:
        padded = tuple(a[0] if len(a) == 1 else (a or None) for a in given.dim_axes)
        return (f"{tuple(answer)} has {len(answer)} entr{'y' if len(answer) == 1 else 'ies'} for a 2-D kernel. That is "
                f"allowed: Keras and JAX pad a short layout with None at the end, so yours reads {padded}. {hint}")
    return hint


def _columns_hint(dim_axes) -> str:
    """What a (32, 64) kernel's layout does with its rows and columns, and what to change."""
    if dim_axes[0]:
        return f"Your layout splits the rows (dimension 0) over '{'+'.join(dim_axes[0])}'; columns are dimension 1."
    if not dim_axes[1]:
        return "Your layout leaves the columns (dimension 1) whole; split them over 'model'."
    if dim_axes[1] != ("model",):
        return f"Your layout splits the columns over '{'+'.join(dim_axes[1])}'; split them over 'model'."
    return "Split dimension 1 over 'model' and leave dimension 0 whole (None)."


@exercise("02.3", "Over which mesh axis must the gradients be summed when the batch is split along 'data'?",
          form="one mesh axis name as a string, e.g. 'model'")
def gradient_axis(answer):
    """Compares the answer with the batch axis of a real ModelParallel distribution."""
    expected = _model_parallel().batch_dim_name
    if not isinstance(answer, str):
        return "Give the axis name as a string."
    if answer == expected:
        return None
    if answer == "model":
        return ("Devices along 'model' saw the same sub-batch; the gradients that differ, and must be "
                "summed, come from devices that saw different examples.")
    if answer == "batch":
        return "'batch' is Keras's default name; in this mesh the batch axis is called 'data'."
    return "Name one of the mesh's axes: 'data' or 'model'."
