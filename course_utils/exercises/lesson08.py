"""Checkers for lesson 08: a real model's mesh (FSDP beside tensor parallelism), and will it fit?

Also the readers the lesson's claims use to say what each compiled collective moves (`recorded`,
`operand_sources`).
"""

from __future__ import annotations

import functools

from course_utils.exercises.core import exercise

GATING = "decoder_block_0/ffw_gating/kernel"
GATING_SHAPE = (64, 128)  # the lesson's tiny Gemma: hidden 64, feed-forward 128
DEVICE_GIB = 16


@functools.cache
def _shape_only(preset: str):
    """A preset's shape-only backbone, built once per session (a few seconds each)."""
    from course_utils.memory.presets import abstract_model

    return abstract_model(preset)


def _official_layout(shape):
    import keras_hub

    from course_utils.mesh import make_mesh
    from course_utils.memory.presets import MESH_AXES

    return keras_hub.models.GemmaBackbone.get_layout_map(make_mesh(shape, MESH_AXES))[GATING]


@exercise("08.1", "The shard shape of decoder_block_0/ffw_gating/kernel (64, 128) under Gemma's own map on the (2, 4) mesh.",
          form='a shard shape as a tuple of whole numbers, e.g. (64, 128)')
def gating_shard_shape(answer) -> str | None:
    """Asks Keras's lookup of the official map for the layout, and JAX for the shard shape."""
    from course_utils.placements import planned_placement

    try:
        answer = tuple(int(n) for n in answer)
    except TypeError:
        return "Give a shape as a tuple of two numbers, like (64, 128)."
    expected = planned_placement(GATING_SHAPE, _official_layout((2, 4))).shard_shape
    if answer == expected:
        return None
    if answer == (64, 32):
        return ("That is tensor parallelism alone: columns over 'model'. The map's first entry is 'batch': "
                "the rows are split too, over the 2 devices of 'batch'.")
    if answer == (32, 128):
        return "Rows over 'batch', yes; the columns are split over 'model' (4 devices) as well."
    if answer in ((16, 64), (128, 16)):
        return "Look at the order of the map's entries: the first dimension goes with 'batch' (size 2)."
    return f"The layout is {tuple(_official_layout((2, 4)).axes)} on a (2, 4) mesh: divide each dimension."


def _verdicts(preset: str = "gemma_7b_en", mesh_shape=(2, 4), device_gib: float = DEVICE_GIB) -> dict[str, tuple]:
    """`{layout: (GiB on the fullest device, will_it_fit's verdict)}` for a preset under every layout."""
    from course_utils.memory.fit import will_it_fit
    from course_utils.memory.presets import LAYOUTS

    found = {}
    for layout in LAYOUTS:
        (row,) = will_it_fit({preset: _shape_only(preset)}, (tuple(mesh_shape),), device_gib=(device_gib,),
                             layout=layout).rows
        found[layout] = (row.total, row.verdict(device_gib))
    return found


@exercise("08.2", "Gemma 7B, Adam, float32, on a 2 x 4 mesh of 16 GiB devices: under which layout does the "
          "training state fit in a device at all (before activations)?",
          form='one of the strings "replicated", "tensor_parallel" or "official"')
def layout_that_fits(answer) -> str | None:
    """Plans Gemma 7B's training state from shapes under every layout; right is the one whose verdict is not "no"."""
    from course_utils.memory.fit import NO
    from course_utils.memory.presets import LAYOUTS

    if answer not in LAYOUTS:
        return f"Answer one of {list(LAYOUTS)}."
    found = _verdicts()
    if found[answer][1] != NO:
        return None
    total = found[answer][0]
    if answer == "replicated":
        return (f"Every device would hold all of it: {total:.0f} GiB, so no. Sixteen bytes a parameter "
                f"(weights, gradients, two Adam moments) times 8.5 billion parameters.")
    return (f"Tensor parallelism alone splits each weight over the 4 devices of 'model' only: "
            f"{total:.1f} GiB per device, so no. Which layout splits it over all 8?")


@exercise("08.3", "Llama 3 8B under its official map: the path of the largest weight that stays whole on every device.",
          form='a variable path as a string, e.g. "token_embedding/embeddings"')
def largest_replicated(answer) -> str | None:
    """Asks the official map (Keras's lookup) for every shape-only Llama 3 8B weight's layout."""
    import math

    from course_utils.mesh import make_mesh
    from course_utils.memory.presets import MESH_AXES, distribution_for

    if not isinstance(answer, str):
        return "Give a variable path as a string, like 'token_embedding/embeddings'."
    llama = _shape_only("llama3_8b_en")
    dist = distribution_for(type(llama), make_mesh((2, 4), MESH_AXES), "official")
    whole = {v.path: math.prod(v.shape) for v in llama.weights
             if all(a is None for a in dist.get_variable_layout(v).axes)}
    expected = max(whole, key=whole.get)
    if answer == expected:
        return None
    if answer in whole:
        return f"{answer} stays whole, but it is small ({whole[answer]:,} numbers). Look for a bigger one."
    if answer == "token_embedding/embeddings":
        return ("That one is split (vocabulary over 'model', hidden over 'batch'). Llama does not tie its "
                "output projection to its input embedding: look for the embedding's second weight.")
    return f"{answer!r} is not a weight that stays whole. Loop over llama.weights and ask dist.get_variable_layout(v)."


# For the lesson's claims: what each collective of a compiled step moves, array by array (`hlo`).


def _ops(report) -> dict:
    return {op.name: op for op in report.ops()}


def recorded(report) -> dict[str, tuple]:
    """Each collective of a compiled step -> what XLA recorded for each array it moves (`CollectiveOp.parts`).

    Example:
        >>> arrays = recorded(step)[step.collectives[0].name]
        >>> [(s.scope, s.op, s.backward) for sources in arrays for s in sources]
    """
    return {name: op.parts for name, op in _ops(report).items()}


def operand_sources(report, name: str) -> tuple:
    """What XLA recorded for the instruction that computes collective `name`'s (first) operand."""
    return _ops(report)[name].operand_sources
