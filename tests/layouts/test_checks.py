"""check_layout_map: every problem a LayoutMap can have is found, named and explained."""

import os

import keras
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keras import distribution

from course_utils import LayoutMapError, check_layout_map, explain_layout, make_layout_map, make_mesh


def test_check_layout_map_clean(mesh, mlp, good_map):
    assert check_layout_map(good_map(mesh), mlp()) == []


def test_fullmatch_trap_is_found(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    problems = check_layout_map(layout_map, mlp())
    assert [p.kind for p in problems] == ["unmatched_key"]
    assert "'d1/kernel' matches no variable" in problems[0].message
    assert "'mlp/d1/kernel'" in problems[0].message and "'.*d1/kernel'" in problems[0].message


def test_two_keys_one_variable(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map[".*kernel"] = (None, None)
    problems = check_layout_map(layout_map, mlp())
    two = [p for p in problems if p.kind == "two_keys"]
    assert {p.path for p in two} == {"mlp/d1/kernel", "mlp/d2/kernel"}
    assert "'.*kernel'" in two[0].message


def test_divisibility_and_rank(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d2/bias"] = ("model", None)
    problems = check_layout_map(layout_map, mlp(hidden=30))
    messages = " ".join(p.message for p in problems)
    assert {p.kind for p in problems} == {"bad_layout"}
    assert "size 30" in messages and "4 equal parts" in messages
    assert "2 entries but the tensor has 1" in messages


def test_axis_name_not_in_mesh(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    other = make_mesh((4, 2), ("batch", "tensor"))
    layout_map[".*d1/kernel"] = distribution.TensorLayout((None, "tensor"), other)
    problems = check_layout_map(layout_map, mlp())
    assert problems and "not an axis of the mesh ('data', 'model')" in problems[0].message


def test_strict_raises(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    with pytest.raises(LayoutMapError, match="1 problem"):
        check_layout_map(layout_map, mlp(), strict=True)


def test_unbuilt_model_is_refused(mesh, good_map):
    unbuilt = keras.Sequential([keras.layers.Dense(4)])
    with pytest.raises(ValueError, match="check_layout_map needs a built model; .* has no variables yet. Build it first"):
        check_layout_map(good_map(mesh), unbuilt)


def test_layer_output_keys_count_as_matched(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map[".*d2/output"] = ("data", None)  # Keras looks up "<layer path>/output" in Layer.__call__
    assert check_layout_map(layout_map, mlp()) == []


def test_a_short_layout_is_valid_and_padded(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = ("model",)  # one entry for a 2-D kernel: JAX pads with None
    assert check_layout_map(layout_map, mlp()) == []
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with dist.scope():
        model = mlp()
    row = explain_layout(model, dist).row("mlp/d1/kernel")
    assert row.axes == ("model", None) and row.shard_shape == (4, 32) and row.as_planned
    assert row.rule == ".*d1/kernel (1 of 2 entries, padded with None)"


def test_an_output_layout_longer_than_the_output_is_a_problem(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map[".*d2/output"] = ("data", None, "model")
    problems = check_layout_map(layout_map, mlp())
    assert [(p.kind, p.path) for p in problems] == [("bad_layout", "mlp/d2/output")]
    assert "output 'mlp/d2/output' (rank 2)" in problems[0].message
    assert "3 entries but the tensor has 2" in problems[0].message


def test_the_models_own_output_path_counts(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map["mlp/output"] = ("data",)  # looked up when the model is called as model(x)
    assert check_layout_map(layout_map, mlp()) == []


def test_an_invalid_regex_key_is_a_problem_naming_it(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map[".*d2/kernel["] = ("model", None)
    problems = check_layout_map(layout_map, mlp())
    assert [(p.kind, p.key) for p in problems] == [("bad_key", ".*d2/kernel[")]
    assert "is not a valid regular expression" in problems[0].message and "re.escape" in problems[0].message


def test_a_non_string_key_is_a_problem_naming_it(mesh, mlp, good_map):
    layout_map = good_map(mesh)
    layout_map[("d2", "kernel")] = ("model", None)
    (problem,) = check_layout_map(layout_map, mlp())
    assert problem.kind == "bad_key"
    assert "Key ('d2', 'kernel') is a tuple" in problem.message and "Write it as a string" in problem.message


def test_a_plain_dict_is_refused_with_the_fix(mesh, mlp):
    with pytest.raises(TypeError, match=r"Received: dict \['.\*d1/kernel'\]\. Build one with make_layout_map"):
        check_layout_map({".*d1/kernel": (None, "model")}, mlp())


# Property: check_layout_map finds a problem (other than an unused key, which breaks nothing) exactly
# when Keras and JAX refuse to build and call the model under the map.
MESHES = [(1,), (2,), (4,), (8,), (1, 2), (2, 1), (2, 2), (1, 4), (4, 1), (2, 4), (4, 2), (1, 8), (8, 1)]
# Not "mlp/output": the model's own output is looked up only in eager calls, where Keras skips a layout
# equivalent to the array's current one, so whether a bad one fails depends on the array.
KEYS = [".*d1/kernel", ".*d1/bias", ".*d2/kernel", ".*d2/bias", ".*kernel", ".*d1.*", ".*d1/output",
        ".*d2/output", "mlp/d1/kernel"]
ENTRIES = [None, "data", "model"]  # Keras refuses names outside the mesh (and tuples) at insertion


def builds_and_runs(layout_map, dims, batch) -> bool:
    """Keras builds and calls the model under the map (eagerly and compiled), and JAX accepts every variable's layout.

    On a one-device mesh Keras leaves variables unplaced, so JAX is asked directly (jax.device_put).
    """
    import jax

    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name=layout_map.device_mesh.axis_names[0])
    try:
        with dist.scope():
            model = dense_model(dims)
            model(batch)  # eager, as a learner calls it
            forward = jax.jit(lambda values, x: model.stateless_call(values, [], x)[0])
            forward.lower([v.value for v in model.trainable_variables], batch)  # traced as in fit: constraints
        for variable in model.variables:
            jax.device_put(variable.value, dist.get_variable_layout(variable).backend_layout)
    except Exception:  # whatever Keras or JAX raise: the map cannot be used
        return False
    return True


def dense_model(dims):
    inputs, hidden, outputs = dims
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(hidden, name="d1"),
                             keras.layers.Dense(outputs, name="d2")], name="mlp")


def in_mesh(axes, names):
    """`axes` with the entries naming axes outside the mesh dropped."""
    return tuple(e for e in axes if e is None or set((e,) if isinstance(e, str) else e) <= set(names))


@settings(max_examples=int(os.environ.get("LAYOUT_EXAMPLES", 25)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(MESHES),
    dims=st.tuples(*[st.sampled_from([1, 2, 3, 4, 6, 8])] * 3),
    rules=st.dictionaries(st.sampled_from(KEYS), st.lists(st.sampled_from(ENTRIES), max_size=3).map(tuple),
                          min_size=1, max_size=3),
)
def test_check_layout_map_finds_a_problem_exactly_when_the_model_cannot_be_built(shape, dims, rules):
    import math

    import numpy as np

    names = ("data", "model")[:len(shape)]
    devices = distribution.list_devices()[:math.prod(shape)]
    layout_map = distribution.LayoutMap(make_mesh(shape, names, devices=devices))
    for key, axes in rules.items():
        layout_map[key] = in_mesh(axes, names)
    batch = np.ones((8, dims[0]), "float32")
    problems = [p for p in check_layout_map(layout_map, dense_model(dims), inputs=batch)
                if p.kind != "unmatched_key"]
    assert (problems == []) == builds_and_runs(layout_map, dims, batch), problems


def test_a_sound_map_warns_about_large_weights_it_leaves_whole(mlp, mesh):
    model = mlp(hidden=32)
    layout_map = make_layout_map(mesh, {".*d1/kernel": (None, "model")})
    checked = check_layout_map(layout_map, model)
    assert checked == []  # nothing is wrong...
    warned = {w.path: w for w in checked.warnings}  # ...but d2's kernel stays whole on all 8 devices
    assert set(warned) == {"mlp/d2/kernel"}  # 19 % of the parameters; d1's bias (5 %) is a vector: never worth splitting
    assert warned["mlp/d2/kernel"].severity == "warning"
    assert warned["mlp/d2/kernel"].message == ("mlp/d2/kernel (32, 4), 19% of the parameters, matches no rule and is "
                                              "whole on all 8 devices: 512 bytes on each (its gradient as much "
                                              "again, Adam's moments twice)")
    assert "[], and 1 warning(s), large weights left whole:" in repr(checked)
    assert check_layout_map(make_layout_map(mesh, {}), model).warnings == []  # no rule at all: replication meant


def test_an_unmatched_key_says_misspelling_or_no_such_part(mlp, mesh):
    model = mlp(hidden=32)
    typo, = check_layout_map(make_layout_map(mesh, {".*d1/kernal": (None, "model")}), model)
    assert "The nearest path is 'mlp/d1/kernel'" in typo.message
    absent, = check_layout_map(make_layout_map(mesh, {".*experts/gate": ("model",)}), model)
    assert "No path of this model is spelled like it: the model has no such part" in absent.message


@pytest.mark.parametrize("name, whole", [
    ("QwenMoeBackbone", "experts/expert_feedforward_gate_dense"),
    ("Llama3Backbone", "token_embedding/reverse_embeddings"),
])
def test_official_maps_warn_about_the_expert_kernels_and_untied_output_projections_they_leave_whole(name, whole):
    keras_hub = pytest.importorskip("keras_hub")
    from course_utils import make_mesh
    from course_utils.memory.presets import abstract_model

    config = dict(vocabulary_size=512, num_layers=1, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
                  intermediate_dim=128)
    if name == "QwenMoeBackbone":
        config.update(moe_intermediate_dim=32, shared_expert_intermediate_dim=64, num_experts=8, top_k=2)
    cls = getattr(keras_hub.models, name)
    checked = check_layout_map(cls.get_layout_map(make_mesh((2, 4), ("batch", "model"))), abstract_model(cls, config))
    assert checked == []
    assert any(whole in w.path and "bytes on each" in w.message for w in checked.warnings), checked.warnings
