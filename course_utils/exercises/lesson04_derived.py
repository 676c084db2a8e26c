"""Exercise checkers for lesson 04's last part: the map `derive_layout_map` derives for a model of the learner's own.

04.4 asks how the derived map splits each kernel of the lesson's `my_model`, 04.5 where the all-reduce that
closes its Megatron pair happens. Keras's own lookup says how the map lays out each kernel, and XLA's compiled
training step where each all-reduce runs.
"""

from __future__ import annotations

from course_utils.exercises.core import exercise
from course_utils.exercises.lesson04 import lesson_mesh

CLASSIFIER_KERNELS = ("wide", "narrow", "classes")
SPLITS = ("columns", "rows", "whole")


def _classifier():
    """The lesson's own model (a functional model named "my_model"): Dense 32 -> 128 -> 32, a residual layer norm,
    then 256 classes."""
    import keras

    features = keras.Input((32,), name="features")
    h = keras.layers.Dense(128, activation="relu", name="wide")(features)
    h = keras.layers.Dense(32, name="narrow")(h)
    h = keras.layers.LayerNormalization(name="norm")(features + h)
    logits = keras.layers.Dense(256, name="classes")(h)
    model = keras.Model(features, logits, name="my_model")
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def architecture(model) -> tuple:
    """What makes two builds of a model the same for these checkers: each layer's class and configuration (the
    names Keras numbers anew aside), each weight's path and shape, the optimizer's and the loss's configurations.
    The lesson claims its `my_model` has the checkers' architecture."""
    layers = [(type(layer).__name__, {k: v for k, v in layer.get_config().items() if k != "name"})
              for layer in model.layers]
    weights = [(v.path, tuple(v.shape)) for v in model.weights]
    unnamed = lambda config: {k: v for k, v in config.items() if k != "name"}  # noqa: E731
    return (layers, weights, unnamed(model.optimizer.get_config()) if model.optimizer else None,
            unnamed(model.loss.get_config()) if hasattr(model.loss, "get_config") else model.loss)


def _derived_classifier():
    """The lesson's model and the map `derive_layout_map` gives it on the 2 x 4 mesh (tensor parallelism only)."""
    from course_utils.layouts.derive import derive_layout_map

    model = _classifier()
    return model, derive_layout_map(model, lesson_mesh(), fsdp=False)


def _split_of(axes) -> str:
    """A kernel's (inputs, outputs) layout in words: which of its dimensions 'model' splits."""
    axes = tuple(axes) + (None,) * (2 - len(axes))
    return "rows" if axes[0] == "model" else "columns" if axes[1] == "model" else "whole"


def derived_splits() -> dict[str, str]:
    """{layer: "columns" | "rows" | "whole"} for each kernel of the lesson's model, as the derived map lays it out
    (Keras's own lookup)."""
    from keras.distribution import ModelParallel

    model, derived = _derived_classifier()
    distribution = ModelParallel(layout_map=derived.layout_map, batch_dim_name="data")
    return {name: _split_of(distribution.get_variable_layout(model.get_layer(name).kernel).axes)
            for name in CLASSIFIER_KERNELS}


def _split_hint(layer, model) -> str:
    """Why a kernel of the lesson's model is split the way the derived map splits it, without saying the answer."""
    inputs, outputs = (int(n) for n in model.get_layer(layer).kernel.shape)
    n = dict(zip(lesson_mesh().axis_names, lesson_mesh().shape))["model"]
    if layer == "wide":
        return (f"wide widens {inputs} to {outputs}, and only narrow reads its result: the first layer of a "
                f"Megatron pair keeps its result split, each of the {n} 'model' devices computing {outputs // n} of "
                f"the {outputs}. Which dimension of its ({inputs}, {outputs}) kernel holds them?")
    if layer == "narrow":
        return (f"narrow reads wide's split result: each of the {n} 'model' devices holds {inputs // n} of "
                f"narrow's {inputs} inputs. Which dimension of its ({inputs}, {outputs}) kernel meets them? One "
                f"all-reduce then sums the partial results.")
    return (f"classes gives the model's result and widens {inputs} to {outputs}, as a language model widens to "
            f"its vocabulary: the map splits it so that no device holds all {outputs} logits. Its {inputs} inputs "
            f"come whole from the layer norm. Which dimension of its ({inputs}, {outputs}) kernel is split?")


@exercise("04.4", "Predict how the map derived for my_model splits the kernels of wide, narrow and classes over "
                  "'model': columns, rows or whole.",
          form='a dict {"wide": ..., "narrow": ..., "classes": ...}, each "columns", "rows" or "whole"')
def predicted_splits(answer):
    """Derives the map for the lesson's model and asks Keras how it lays out each kernel."""
    if not isinstance(answer, dict) or set(answer) != set(CLASSIFIER_KERNELS):
        got = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        return (f"Give a dict with one entry for each of the layers {list(CLASSIFIER_KERNELS)}. "
                f"Received: {got}.")
    for layer, split in answer.items():
        if split not in SPLITS:
            return f"{split!r} for {layer}: say 'columns' (its outputs), 'rows' (its inputs) or 'whole'."
    truth = derived_splits()
    wrong = [layer for layer in CLASSIFIER_KERNELS if answer[layer] != truth[layer]]
    if not wrong:
        return None
    right = len(CLASSIFIER_KERNELS) - len(wrong)
    return f"{right} of {len(CLASSIFIER_KERNELS)} right. {_split_hint(wrong[0], _classifier())}"


def pair_all_reduces() -> dict[str, int]:
    """{layer: count} of the all-reduces over 'model' in the forward pass of one compiled training step of the
    lesson's model under its derived map, by the layer XLA's program names (the loss's own under "(loss)")."""
    from keras.distribution import ModelParallel

    from course_utils.communication.report import communication_report

    _, derived = _derived_classifier()
    distribution = ModelParallel(layout_map=derived.layout_map, batch_dim_name="data")
    with distribution.scope():
        model = _classifier()
    counts: dict[str, int] = {}
    for row in communication_report(model, distribution, (16, 32)).by_layer().rows:
        if row["kind"] == "all-reduce" and row["axes"] == ("model",) and row["pass"] == "forward":
            counts[row["layer"]] = counts.get(row["layer"], 0) + row["count"]
    return counts


@exercise("04.5", "Predict where the all-reduce over 'model' that closes my_model's Megatron pair happens: the "
                  "layer whose forward pass ends with it.",
          form='the name of a layer of my_model as a string, e.g. "wide"')
def pair_all_reduce_layer(answer):
    """Compiles one training step under the derived map and finds the forward all-reduce over 'model' of a layer."""
    names = [layer.name for layer in _classifier().layers]
    if not isinstance(answer, str):
        return f"Give a layer's name as a string, one of {names}. Received: {answer!r}."
    name = answer.strip().strip("()")
    if name == "loss":
        return ("The loss's all-reduces over 'model' (a maximum and a sum for each example, for the softmax) are "
                "there because the logits are split; they close no pair. Which layer sums over the pair's "
                "split hidden units?")
    if name not in names:
        return f"{answer!r} is no layer of my_model; its layers are {names}."
    if name == names[0]:
        return f"{name} is the model's input: no weight, nothing summed. Which layer sums over split hidden units?"
    layers = [layer for layer in pair_all_reduces() if not layer.startswith("(")]
    if layers == [name]:
        return None
    if name == "wide":
        return ("wide's result stays split: each 'model' device keeps its share of the hidden units, and the "
                "relu works on each share alone. Where is a sum over all of them needed?")
    if name == "classes":
        return ("classes's result, the logits, stays split over 'model' (its columns): its forward pass sums "
                "nothing across devices. Which layer's inputs are split, so that each device computes a partial "
                "sum?")
    return (f"{name} is not where it happens: by {name} the activation is whole again on every 'model' device. "
            f"Which layer reads the pair's split hidden units and sums over them?")
