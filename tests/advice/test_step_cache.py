"""The advisor's read steps kept in the checked cache: read back alike, keyed by everything that decides them."""

import pickle

import pytest

from course_utils import advise
from course_utils.advice import step_cache
from course_utils.advice.candidates import candidates
from course_utils.advice.program import FsdpRun


def _compiled(model):
    model.compile(optimizer="adam", loss="mse")
    return model


@pytest.fixture
def cache():
    from course_utils.program_cache import installed

    found = installed()
    if found is None:
        pytest.skip("the compilation cache is off")
    return found


def test_a_step_read_before_is_read_back_without_tracing_and_alike(mlp, cache, monkeypatch):
    model = _compiled(mlp(hidden=48))
    first = advise(model, devices="8xH100-80GB", batch=64)

    def traced(*args, **kwargs):
        raise AssertionError("a kept step was traced and compiled again")

    monkeypatch.setattr("course_utils.advice.program.compile_train_step", traced)
    again = advise(model, devices="8xH100-80GB", batch=64)
    assert [(r.layout, r.mesh_shape, r.program, r.time) for r in again] == \
           [(r.layout, r.mesh_shape, r.program, r.time) for r in first]
    with pytest.raises(RuntimeError, match="traced and compiled again"):  # a batch not read before is traced
        advise(model, devices="8xH100-80GB", batch=128)


def test_the_key_changes_with_each_thing_that_decides_the_step(mlp):
    import jax

    model = _compiled(mlp(hidden=48))
    found = candidates(model, 8)
    tokens = (jax.ShapeDtypeStruct((64, 16), "float32"), jax.ShapeDtypeStruct((64, 4), "float32"))
    key = step_cache.step_key(model, found[0], tokens, FsdpRun())
    assert key == step_cache.step_key(model, found[0], tokens, FsdpRun())
    others = [step_cache.step_key(model, c, tokens, FsdpRun()) for c in found[1:]]
    others.append(step_cache.step_key(model, found[0], tokens, FsdpRun(regather=False)))
    others.append(step_cache.step_key(model, found[0], (jax.ShapeDtypeStruct((32, 16), "float32"), tokens[1]), FsdpRun()))
    others.append(step_cache.step_key(_compiled(mlp(hidden=64)), found[0], tokens, FsdpRun()))
    assert key not in others and len(set(others)) == len(others)


def test_an_entry_that_cannot_be_read_back_is_read_again(mlp, cache):
    import jax

    model = _compiled(mlp(hidden=40))
    candidate = candidates(model, 8)[0]
    tokens = (jax.ShapeDtypeStruct((64, 16), "float32"), jax.ShapeDtypeStruct((64, 4), "float32"))
    key = step_cache.PREFIX + step_cache.step_key(model, candidate, tokens, FsdpRun())
    cache.put(key, b"not a pickle")
    read = []
    found = step_cache.read_kept(model, candidate, tokens, FsdpRun(), lambda: read.append(1) or "the step")
    assert found == "the step" and read == [1]
    assert pickle.loads(cache.get(key)) == "the step"
