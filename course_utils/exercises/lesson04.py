"""Exercise checkers for lesson 04: LayoutMap keys, checking a map, a tensor-parallel block (04.1 to 04.3;
the derived map's, 04.4 and 04.5, are in `lesson04_derived`).

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


def lesson_mesh():
    """The lesson's 2 x 4 mesh, axes "data" and "model", on the first 8 devices."""
    import keras

    return keras.distribution.DeviceMesh((2, 4), ("data", "model"), keras.distribution.list_devices()[:8])


def _layout_map(rules: dict):
    """A real LayoutMap on the lesson's 2 x 4 mesh holding `rules`."""
    from course_utils.layouts.layout_map import make_layout_map

    return make_layout_map(lesson_mesh(), rules)


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
