"""Exercise checkers for lesson 04: LayoutMap keys, checking a map, a tensor-parallel block.

Every checker asks Keras: the learner's keys go into a real `LayoutMap` and
are looked up against the variable paths of real models.
"""

from __future__ import annotations

import re

from course_utils.exercises.core import Correct, exercise

# The tensor-parallel rules of the lesson's transformer block, except the one
# exercise 04.3 asks for.
BLOCK_RULES = {
    ".*attn/(query|key|value)/kernel": (None, "model", None),
    ".*attn/(query|key|value)/bias": ("model", None),
    ".*attn/attention_output/kernel": ("model", None, None),
    ".*mlp_in/kernel": (None, "model"),
    ".*mlp_in/bias": ("model",),
}

# Exercise 04.2: the lesson's tensor-parallel pair moved one layer on (d2 on its output
# units, d3 on its input rows; d1 and the rest replicated), and the lesson's own pair.
SHIFTED_PAIR = {"mlp/d2/kernel": (None, "model"), "mlp/d2/bias": ("model",), "mlp/d3/kernel": ("model", None)}
LESSON_PAIR = {"mlp/d1/kernel": (None, "model"), "mlp/d1/bias": ("model",), "mlp/d2/kernel": ("model", None)}


def _mlp(kind: str):
    """The lesson's MLP (layers d1, d2, d3), as a Sequential named `kind` or functional."""
    import keras

    def layers():
        return [keras.layers.Dense(32, activation="relu", name="d1"),
                keras.layers.Dense(32, activation="relu", name="d2"),
                keras.layers.Dense(8, name="d3")]

    if kind != "functional":
        return keras.Sequential([keras.Input((16,)), *layers()], name=kind)
    inputs = keras.Input((16,))
    x = inputs
    for layer in layers():
        x = layer(x)
    return keras.Model(inputs, x, name="mlp_functional")


def _block():
    """The lesson's transformer block (a functional model named "block")."""
    import keras

    tokens = keras.Input((16, 64), name="tokens")
    attended = keras.layers.MultiHeadAttention(num_heads=4, key_dim=16, name="attn")(tokens, tokens)
    h = keras.layers.LayerNormalization(name="ln1")(tokens + attended)
    m = keras.layers.Dense(256, activation="gelu", name="mlp_in")(h)
    m = keras.layers.Dense(64, name="mlp_out")(m)
    out = keras.layers.LayerNormalization(name="ln2")(h + m)
    return keras.Model(tokens, out, name="block")


def _mesh():
    import keras

    return keras.distribution.DeviceMesh((2, 4), ("data", "model"), keras.distribution.list_devices()[:8])


def _layout_map(rules: dict):
    """A real LayoutMap on the lesson's 2 x 4 mesh holding `rules`."""
    from course_utils.layouts.layout_map import make_layout_map

    return make_layout_map(_mesh(), rules)


def _layouts(model, layout_map) -> dict:
    """Path -> axes, as Keras's ModelParallel lays out each variable of `model`.

    A layout shorter than the variable's rank is padded with None, as JAX does.
    """
    from keras.distribution import ModelParallel

    distribution = ModelParallel(layout_map=layout_map, batch_dim_name="data")
    layouts = {}
    for v in model.variables:
        axes = tuple(distribution.get_variable_layout(v).axes)
        layouts[v.path] = axes + (None,) * (len(v.shape) - len(axes))
    return layouts


def _as_rules(answer) -> dict:
    """A learner's map (a dict or a LayoutMap) as {key: axes}."""
    from keras.distribution import LayoutMap

    if isinstance(answer, LayoutMap):
        return {key: tuple(answer[key].axes) for key in answer}
    if isinstance(answer, dict):
        return {key: tuple(axes) for key, axes in answer.items()}
    raise TypeError(f"give a dict {{key: axes}} or a keras.distribution.LayoutMap; received {type(answer).__name__}")


def _regex_error(key) -> str | None:
    if not isinstance(key, str):
        return f"A key is a string (a regular expression). Received: {key!r}."
    try:
        re.compile(key)
    except re.error as error:
        return f"{key!r} is not a valid regular expression: {error}."
    return None


def _matches(key: str, path: str) -> bool:
    """Keras's own lookup: does `key` alone give `path` a layout?"""
    from course_utils.layouts.problems import key_matches

    return key_matches(key, path)


@exercise("04.1", "Write one LayoutMap key that matches the kernel of layer d2, and nothing else, "
                  "in a Sequential model of any name and in a functional model.",
          form='one LayoutMap key as a string, e.g. ".*something/kernel"')
def key_for_d2_kernel(answer):
    """Checks a key against the real paths of three models with layers d1, d2, d3."""
    problem = _regex_error(answer)
    if problem:
        return problem
    for kind in ("mlp", "tower", "functional"):
        paths = [v.path for v in _mlp(kind).variables]
        target = next(p for p in paths if p.endswith("d2/kernel"))
        extra = [p for p in paths if p != target and _matches(answer, p)]
        if extra:
            return (f"{answer!r} also matches {extra}; those weights would get the same layout. "
                    f"Make the key name the layer and the variable.")
        if not _matches(answer, target):
            if kind == "functional" and answer.startswith(".*/"):
                return (f"{answer!r} misses {target!r}: a functional model's paths have no model "
                        f"prefix, so there is no '/' before 'd2'. Drop the slash.")
            return (f"{answer!r} does not match the whole path {target!r} (Keras uses re.fullmatch). "
                    f"Let the key start with '.*' so any model prefix fits.")
    return None


@exercise("04.2", "Correct the second buggy LayoutMap: d2's kernel and bias split over 'model' along "
                  "d2's output units, d3's kernel split over 'model' along its input rows, the rest replicated.",
          form='a dict {key: axes} or a keras.distribution.LayoutMap')
def fixed_layout_map(answer):
    """Runs check_layout_map and Keras's lookup on the lesson's MLP (d1, d2, d3)."""
    from course_utils.layouts.checks import check_layout_map

    rules = _as_rules(answer)
    for key in rules:
        problem = _regex_error(key)
        if problem:
            return problem
    model = _mlp("mlp")
    layout_map = _layout_map(rules)
    problems = check_layout_map(layout_map, model)
    if problems:
        return f"check_layout_map still finds {len(problems)} problem(s); the first: {problems[0].message}"
    layouts = _layouts(model, layout_map)
    split = {path: axes for path, axes in layouts.items() if any(axes)}
    if split == LESSON_PAIR:
        return ("That is the lesson's map for d1 and d2 (megatron_mlp). This one moves the split one "
                "layer on: d2 on its output units, d3 on its input rows, d1 replicated.")
    for variable in model.variables:
        got = layouts[variable.path]
        expected = SHIFTED_PAIR.get(variable.path, (None,) * len(variable.shape))
        if got != expected:
            return (f"The map is clean, but {variable.path!r} gets the layout {got}, not the one the task "
                    f"describes. check_layout_map cannot see that: the layout is valid, only not what you "
                    f"meant. A kernel is (inputs, outputs): which of its dimensions does the task split?")
    return None


@exercise("04.3", "Write the rule (key, axes) that splits the transformer block's second Dense, "
                  "mlp_out, over 'model' along its input dimension.",
          form='a pair (key, axes), e.g. (".*name/kernel", (None, \'model\'))')
def mlp_out_rule(answer):
    """Adds the learner's rule to the block's other rules and asks Keras where mlp_out lands."""
    from course_utils.layouts.checks import check_layout_map

    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        return "Give a pair: (key, axes), e.g. ('.*some/kernel', ('model', None))."
    key, axes = answer
    problem = _regex_error(key)
    if problem:
        return problem
    if key in BLOCK_RULES:
        return f"{key!r} is already a rule of the map; write the one for mlp_out."
    model = _block()
    layout_map = _layout_map({**BLOCK_RULES, key: tuple(axes)})
    problems = check_layout_map(layout_map, model)
    if problems:
        return f"With your rule, check_layout_map finds: {problems[0].message}"
    layouts = _layouts(model, layout_map)
    before = _layouts(model, _layout_map(BLOCK_RULES))
    changed = [p for p in layouts if p != "mlp_out/kernel" and layouts[p] != before[p]]
    if changed:
        return f"Your key also changes the layout of {changed}; it should name only mlp_out's kernel."
    got = layouts["mlp_out/kernel"]
    if got == (None, "model"):
        return ("That splits mlp_out's output columns. Its input rows are mlp_in's output columns: where "
                "does mlp_in's rule put 'model'?")
    if got != ("model", None):
        return (f"mlp_out/kernel (shape (256, 64)) gets {got}. A kernel is (inputs, outputs): which of its "
                f"dimensions is the input the task splits?")
    note = prefix_note(key)
    return None if note is None else Correct(note)


def prefix_note(key: str) -> str | None:
    """Why a key without `.*` in front works for the functional block; None when it also fits a prefix.

    Keras decides: the key is looked up against the path `mlp_out`'s kernel has
    in a real Sequential model named "block".
    """
    import keras

    sequential = keras.Sequential([keras.Input((256,)), keras.layers.Dense(64, name="mlp_out")], name="block")
    path = sequential.get_layer("mlp_out").kernel.path
    if _matches(key, path):
        return None
    return (f"{key!r} is right here: the block is a functional model, whose paths carry no model "
            f"name, so the kernel's path is exactly 'mlp_out/kernel'. In a Sequential model named "
            f"'block' the same layer's kernel is {path!r}, which {key!r} misses; '.*mlp_out/kernel' "
            f"matches both.")


# Exercises 04.4 and 04.5: a model of the learner's own, its map derived from its graph.
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
    return model, derive_layout_map(model, _mesh(), fsdp=False)


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
    n = dict(zip(_mesh().axis_names, _mesh().shape))["model"]
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
