"""The figures the lessons draw, drawn the lessons' way, saved to test-artifacts/figures/ to be looked at.

Each is checked for the marks that matter (legible when projected, no layout
warning, every mark named in the figure, no two of its texts drawn over each other:
titles, labels, ticks, legends and notes, measured with matplotlib's own text boxes)
and saved as the notebook shows it. The will-it-fit figures of lessons 08 and 09 are
drawn from the same shape-only models and arguments as the lessons'.
"""

import warnings
from pathlib import Path

import jax
import keras
import numpy as np
import pytest
from keras import distribution
from keras.distribution import DeviceMesh, TensorLayout

from course_utils import make_mesh, planned_placement, process_ownership
from course_utils.layouts.layout_map import explain_layout, make_layout_map
from course_utils.models import transformer_block, transformer_rules
from course_utils.viz import (draw_batch_split, draw_memory, draw_mesh, draw_model, draw_placement,
                              draw_process_mesh, figure_png, projected_sizes)
from course_utils.viz.figures import MIN_PROJECTED_PT

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "figures"
MESH = make_mesh((2, 4), ("data", "model"))


def _mlp_rules():
    return {".*d1/kernel": (None, "model"), ".*d1/bias": ("model",), ".*d2/kernel": ("model", None)}


def _tensor_parallel_mlp():
    mp = distribution.ModelParallel(layout_map=make_layout_map(MESH, _mlp_rules()), batch_dim_name="data")
    with mp.scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu", name="d1"),
                                  keras.layers.Dense(10, name="d2")], name="mlp")
        model.compile(optimizer="adam", loss="mse")
        model.optimizer.build(model.trainable_variables)
    return model, mp


def _figures():
    """name -> a function drawing one figure as a lesson does."""
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    mp_empty = distribution.ModelParallel(layout_map=distribution.LayoutMap(MESH), batch_dim_name="data")
    x = np.arange(16 * 32, dtype="float32").reshape(16, 32)
    return {
        "01-mesh-2x4": lambda: draw_mesh(MESH),
        "01-mesh-8": lambda: draw_mesh(make_mesh((8,), ("data",))),
        "01-mesh-1x8": lambda: draw_mesh(make_mesh((1, 8), ("data", "model"))),
        "01-mesh-2x2x2": lambda: draw_mesh(make_mesh((2, 2, 2), ("host", "data", "model"))),
        "01-mesh-512-planned": lambda: draw_mesh(DeviceMesh((8, 64), ("data", "model"),
                                                            [f"cpu:{i}" for i in range(512)])),
        "02-split-rows-cols": lambda: draw_placement(planned_placement((16, 32), TensorLayout(("data", "model"), MESH))),
        "02-batch-data-parallel": lambda: draw_batch_split((16, 10), dp),
        "02-batch-model-parallel": lambda: draw_batch_split((16, 10), mp_empty),
        "02-dense-kernel": lambda: draw_placement(planned_placement((32, 64), TensorLayout((None, "model"), MESH),
                                                                    name="dense kernel")),
        "02-replicated-kernel": lambda: draw_placement(planned_placement((64, 128), TensorLayout((None, None), MESH))),
        "02-real-array": lambda: draw_placement(jax.device_put(x, TensorLayout((None, "model"), MESH).backend_layout),
                                                title="x with its columns split over model"),
        "03-model-mlp": lambda: draw_model(explain_layout(*_tensor_parallel_mlp(), optimizer=False)),
        "03-collectives": _collectives_03,
        "04-variable": lambda: draw_placement(_tensor_parallel_mlp()[0].get_layer("d1").kernel),
        "04-model-transformer": _transformer_figure,
        "05-batch-64": lambda: draw_batch_split((64, 64), dp),
        "05-memory": _memory_figure,
        "06-processes": lambda: draw_process_mesh(process_ownership((2, 4), processes=2)),
        "06-processes-4": lambda: draw_process_mesh(process_ownership((2, 4), processes=4)),
        "08-will-it-fit": _fit_08,
        "09-will-it-fit-activations": _fit_09,
        "11-ring-attention": _ring_11,
        "11-sequence-placement": lambda: draw_placement(planned_placement(
            (16, 32, 64), TensorLayout(("batch", "model", None), make_mesh((2, 4), ("batch", "model")))),
            title="decoder_block_0/output: 16 sequences x 32 tokens x 64, split ('batch', 'model', None)"),
        "12-gpipe-4x4": lambda: _schedules_12(("GPipe", 4, 4)),
        "12-gpipe-vs-1f1b-4x8": lambda: _schedules_12(("GPipe", 4, 8), ("1F1B", 4, 8)),
    }


def _schedules_12(*plans):
    """Lesson 12's schedule figures: (kind, stages, micro-batches) each."""
    from course_utils import draw_schedule, schedule

    return draw_schedule(*[schedule(kind, stages=s, micro_batches=m) for kind, s, m in plans])


def _ring_11():
    """Lesson 11's ring attention over 8 devices, causal."""
    from course_utils import draw_ring, ring_schedule

    return draw_ring(ring_schedule(8), title="Ring attention over 8 devices, causal: the key/value block each device holds")


def _collectives_03():
    """Lesson 03's all-reduce bytes of a 1024-row step on each (data, model) mesh of its MLP."""
    from course_utils import communication_report, draw_collectives_by
    from course_utils.models import mlp, mlp_rules
    from course_utils.widgets.model import built_under

    steps = {}
    for shape in ((8, 1), (4, 2), (2, 4), (1, 8)):
        dist = distribution.ModelParallel(layout_map=make_layout_map(make_mesh(shape, ("data", "model")), mlp_rules()),
                                          batch_dim_name="data")
        model = built_under(mlp(hidden=128), dist)  # lesson 03's MLP: d1 (64, 128), d2 (128, 10)
        steps[str(shape)] = communication_report(model, dist, (1024, 64))
    return draw_collectives_by(steps, title="All-reduce bytes per device, one step of a 1024-row batch",
                               labels={"data": "gradients, over 'data'", "model": "partial sums of\nd2's output,\nover 'model'"})


def _fit_08():
    """Lesson 08's figure: three models in float32, three meshes, devices of 16 and 80 GiB."""
    from course_utils import abstract_model, draw_fit, will_it_fit

    return draw_fit(will_it_fit({name: abstract_model(name) for name in ("gemma_2b_en", "gemma_7b_en", "llama3_8b_en")}))


def _fit_09():
    """Lesson 09's figure: Gemma 7B in mixed_bfloat16, rematerialised, a batch of 8 sequences of 2,048 tokens."""
    from course_utils import abstract_model, draw_fit, will_it_fit

    mixed = abstract_model("gemma_7b_en", dtype="mixed_bfloat16")
    return draw_fit(will_it_fit({"gemma_7b_en": mixed}, ((2, 4), (8, 1)), batch=8, seq=2048, dtype="mixed_bfloat16",
                                remat=True))


def _transformer_figure():
    tp = distribution.ModelParallel(layout_map=make_layout_map(MESH, transformer_rules()), batch_dim_name="data")
    with tp.scope():
        model = transformer_block(heads=4)  # lesson 04's block: attn/query/kernel (64, 4, 16)
    return draw_model(explain_layout(model, tp), per_page=16)


def _memory_figure():
    from course_utils import memory_report

    model, mp = _tensor_parallel_mlp()
    return draw_memory(memory_report(model, mp))


@pytest.mark.parametrize("name", list(_figures()))
def test_lesson_figure(name, overlapping_texts):
    fig = _figures()[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = figure_png(fig)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(png)
    text, size = min(projected_sizes(fig), key=lambda pair: pair[1])
    assert size >= MIN_PROJECTED_PT, f"{text!r} shows at {size:.1f} pt on a 1280 px projector"
    assert fig.get_size_inches()[0] <= 13.0 + 1e-9
    assert overlapping_texts(fig) == []
