"""Checkers for lesson 09: experts as an axis role, the activations of "will it fit", FSDP's whole cycle.

Each checker asks the real tools: Keras's lookup of a LayoutMap on a shape-only QwenMoe, `will_it_fit`
on a shape-only Gemma 7B, and the compiled step of the lesson's tiny mixture of experts.
"""

from __future__ import annotations

import functools
import re

from course_utils.exercises.core import exercise

# The lesson's tiny mixture of experts, its very config (a claim of the lesson checks it): the checkers
# build the same shapes as the lesson, so they reuse the programs its run compiled.
MOE = dict(vocabulary_size=256, num_layers=1, num_query_heads=4, num_key_value_heads=4, hidden_dim=32,
           intermediate_dim=64, moe_intermediate_dim=32, shared_expert_intermediate_dim=32, num_experts=4,
           top_k=2, decoder_sparse_step=1)
EXPERT_KERNELS = ("expert_feedforward_gate_dense", "expert_feedforward_output_dense")
BATCHES = (32, 64, 72, 96)  # exercise 09.2's choices


@functools.cache
def _moe_backbone():
    import keras_hub

    from course_utils.memory.presets import abstract_model

    return abstract_model(keras_hub.models.QwenMoeBackbone, MOE)


def _mesh():
    from course_utils.mesh import make_mesh
    from course_utils.memory.presets import MESH_AXES

    return make_mesh((2, 4), MESH_AXES)


@exercise("09.1", "A rule (key, axes) that splits both expert kernels of QwenMoe over 'model', along the expert dimension.",
          form='a pair (key, axes), e.g. (".*some/path", ("model", None, None))')
def expert_rule(answer) -> str | None:
    """Adds the rule to QwenMoe's official map, runs check_layout_map and asks Keras for the expert kernels' layouts."""
    import keras_hub

    from course_utils.layouts.checks import check_layout_map

    key, axes = answer
    if not isinstance(key, str):
        return f"The key is a string (a regular expression); this is a {type(key).__name__}."
    layout_map = keras_hub.models.QwenMoeBackbone.get_layout_map(_mesh())
    layout_map[key] = tuple(axes)
    backbone = _moe_backbone()
    problems = check_layout_map(layout_map, backbone)
    if problems:
        return " ".join(p.message for p in problems)
    kernels = [v for v in backbone.weights if v.path.rsplit("/", 1)[-1] in EXPERT_KERNELS]
    found = {v.path.rsplit("/", 1)[-1]: tuple(layout_map[v.path].axes) if layout_map[v.path] is not None else None
             for v in kernels}
    missed = [name for name, got in found.items() if got is None]
    if missed:
        return (f"Your key matches {', '.join(n for n in found if n not in missed) or 'neither kernel'} but not "
                f"{', '.join(missed)}: the two kernels are "
                f"{[v.path for v in kernels]}. One key can match both (a '.*' where they differ).")
    wrong = {name: got for name, got in found.items() if (got + (None,) * 3)[:3] != ("model", None, None)}
    if wrong:
        name, got = next(iter(wrong.items()))
        return (f"{name} gets {got}: an expert kernel is (experts, hidden, width), and expert parallelism "
                f"puts whole experts on devices. Which entry of the axes should name 'model'?")
    return None


@functools.cache
def _gemma_mixed():
    from course_utils.memory.presets import abstract_model

    return abstract_model("gemma_7b_en", dtype="mixed_bfloat16")


@functools.cache
def _fit(batch: int):
    from course_utils.memory.fit import will_it_fit

    return will_it_fit({"gemma_7b_en": _gemma_mixed()}, ((8, 1),), batch=batch, seq=2048, remat=True,
                       dtype="mixed_bfloat16").rows[0]


@exercise("09.2", "Gemma 7B, mixed_bfloat16, rematerialised, sequence 2,048, on (8, 1) devices of 80 GiB: the largest "
          "global batch of 32, 64, 72 and 96 that still fits.", form="one of the whole numbers 32, 64, 72, 96")
def largest_batch(answer) -> str | None:
    """Runs will_it_fit for the answer and the batches around it; right is the largest whose verdict is "fits"."""
    if answer not in BATCHES:
        return f"Answer one of {list(BATCHES)}."
    verdicts = {batch: _fit(batch).verdict(80) for batch in BATCHES}
    best = max(batch for batch, verdict in verdicts.items() if verdict == "fits")
    if answer == best:
        return None
    row = _fit(answer)
    if verdicts[answer] != "fits":
        return (f"At {answer} the step needs {row.total:.1f} GiB: {verdicts[answer]} on 80 GiB (\"fits\" keeps 10 % of "
                f"the device free). Run will_it_fit for the other choices and compare.")
    return (f"At {answer} it fits ({row.total:.1f} GiB); the task asks for the largest of the choices that fits. "
            f"Run will_it_fit for the others and compare.")


@exercise("09.3", "With the experts split over 'model', which collective combines the experts' outputs, and over "
          "which axis?", form='a pair (kind, axis), e.g. ("all-to-all", "batch")')
def expert_combine(answer) -> str | None:
    """Compiles a step of the lesson's mixture of experts with the experts split over 'model' and reads the
    collective that sums the experts' outputs in the forward pass."""
    kind, axis = answer
    if (kind, axis) == experts_combined():
        return None
    if kind == "all-to-all":
        return ("That is what systems that send each token to its expert's device compile. keras-hub's QwenMoe "
                "computes every expert on every token and masks the ones not chosen: read the kind of the "
                "moe block's forward collective in the report.")
    if axis == "batch":
        return "The experts are split over 'model': their partial outputs are combined over that axis."
    return f"Read the report's row for the moe block in the forward pass: its kind and axis. Received: {(kind, axis)}."


def experts_with_their_rule():
    """The lesson's LayoutMap: QwenMoe's official map and the rule that splits the experts over 'model'."""
    import keras_hub

    layout_map = keras_hub.models.QwenMoeBackbone.get_layout_map(_mesh())
    layout_map[".*experts/expert_feedforward_.*"] = ("model", None, None)
    return layout_map


@functools.cache
def experts_combined() -> tuple[str, str]:
    """(kind, axis) of the forward collective of the moe block that sums its experts' outputs, compiled for real."""
    import keras
    import keras_hub
    import numpy as np
    from keras import distribution

    from course_utils.communication.report import communication_report

    dist = distribution.ModelParallel(layout_map=experts_with_their_rule(), batch_dim_name="batch")
    with dist.scope():
        keras.utils.set_random_seed(0)
        backbone = keras_hub.models.QwenMoeBackbone(**MOE)
        backbone.compile(optimizer="adam", loss="mse")
    x = {"token_ids": np.zeros((8, 16), "int32"), "padding_mask": np.ones((8, 16), "int32")}
    report = communication_report(backbone, dist, (x, np.zeros((8, 16, MOE["hidden_dim"]), "float32")))
    activations = 8 * 16 * MOE["hidden_dim"] * 4  # the block's output, float32: what the sum carries
    row = next(r for r in report.collectives if re.search(r"qwen_sparse_moe_block(_\d+)?$", r.layer.split(" + ")[0])
               and r.pass_ == "forward" and r.op == "reduce_sum" and r.bytes >= activations // 2)
    return row.kind, row.axes[0]
