"""compare_runs: the same set-up and every step at float32 rounding, on every instruction set; planted bugs caught."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from keras import distribution

from course_utils import compare_runs, compare_weights, make_layout_map, make_mesh, models, reordered_rows, run_training
from course_utils.xla_settings import instruction_sets

ROWS, BATCH = 128, 32
PLANTED = Path(__file__).parent / "data" / "planted_bugs.py"
# Every instruction set XLA CPU can compile for on this machine older than its newest (XLA's default,
# which this process runs on)
OLDER_INSTRUCTION_SETS = instruction_sets()[:-1]


def in_background(folder):
    """The planted cases judged in a fresh process per older instruction set (`--xla_cpu_max_isa`),
    in the background: a process each, its programs compiled for that instruction set."""
    found = {}
    for isa in OLDER_INSTRUCTION_SETS:
        env = {**os.environ, "XLA_FLAGS": f"--xla_cpu_max_isa={isa}", "PYTHONWARNINGS": "ignore"}
        done = subprocess.run([sys.executable, str(PLANTED)], env=env, capture_output=True, text=True, timeout=600)
        found[isa] = (json.loads(done.stdout.strip().splitlines()[-1])["cases"] if done.returncode == 0
                      else done.stderr[-3000:])
    return found


def build(lr=1e-2):
    model = models.mlp(inputs=16, hidden=32, classes=4)
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="mse")
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(ROWS, 16)).astype("float32"), rng.normal(size=(ROWS, 4)).astype("float32")


@pytest.fixture(scope="module")
def runs(data):
    mp = distribution.ModelParallel(layout_map=make_layout_map(make_mesh((2, 4), ("data", "model")), models.mlp_rules()),
                                    batch_dim_name="data")
    return {"single": run_training(build, data, epochs=2, batch_size=BATCH, label="one device"),
            "mp": run_training(build, data, distribution=mp, epochs=2, batch_size=BATCH, label="2 x 4"),
            "reordered": run_training(build, reordered_rows(data, BATCH), epochs=2, batch_size=BATCH,
                                      label="rows reordered")}


def test_a_sharded_run_is_judged_by_its_steps_and_shows_its_drift(runs):
    comparison = compare_runs(runs["single"], runs["mp"])
    assert comparison.equivalent and comparison.setup_differences == []
    assert list(comparison.replays) == ["2 x 4"] and comparison.steps == 8
    assert [r.name for r in comparison.rows] == ["loss per step", *runs["single"].weights]
    assert all(0 <= r.step <= 2.0**-12 for r in comparison.rows[1:])
    verdict, drift = comparison.notes()
    assert verdict.startswith("EQUIVALENT: the same model, optimizer and initial weights, the same batches; "
                              "each of the 8 steps of 2 x 4, replayed on one device")
    assert "agrees with it to float32 rounding" in verdict and "rounding's bound 2.4e-04" in verdict
    assert drift.startswith("Over the whole run of 8 steps, the weights drift apart by up to ")
    assert comparison.drift == max(r.max_abs for r in comparison.rows[1:]) > 0


def test_the_verdict_shows_in_the_html_a_notebook_displays(runs):
    html = compare_runs(runs["single"], runs["mp"], reference=runs["reordered"])._repr_html_()
    assert '<p class="table-note"><strong>EQUIVALENT</strong>: the same model' in html
    assert "rounding alone: max |a - r|" in html and "rounding alone, rows reordered:" in html


def test_two_one_device_runs_on_reordered_batches_are_the_same_training(runs):
    comparison = compare_runs(runs["single"], runs["reordered"])
    assert comparison.equivalent and comparison.replays == {} and comparison.reordered
    assert "(the rows of each in another order), and both runs trained on one device" in comparison.verdict()
    assert comparison.drift > 0  # the same mathematics, other rounding


def test_a_run_compared_with_itself_is_bit_for_bit_the_same(runs):
    comparison = compare_runs(runs["single"], runs["single"])
    assert comparison.equivalent and comparison.drift == 0 and comparison.notes()[1].endswith("bit for bit the same.")


@pytest.mark.parametrize("change, expected", [
    (dict(build=lambda: build(lr=8e-2)), "their optimizers differ (learning_rate 0.01 vs 0.08)"),
    (dict(seed=1), "they start from other initial weights (mlp/d1/kernel differs by up to"),
    (dict(data="half twice"), "they train on other data (batch 3 holds other rows)"),  # the first half is the same
])
def test_runs_set_up_differently_are_not_equivalent_and_say_how(runs, data, change, expected):
    x, y = data
    if change.get("data") == "half twice":
        x, y = np.concatenate([x[:ROWS // 2]] * 2), np.concatenate([y[:ROWS // 2]] * 2)
    other = run_training(change.get("build", build), (x, y), epochs=2, batch_size=BATCH, seed=change.get("seed", 0))
    comparison = compare_runs(runs["single"], other)
    assert not comparison.equivalent and expected in comparison.verdict()
    assert comparison.verdict().startswith("NOT equivalent: the runs differ before their first step")
    assert len(comparison.notes()) == 1  # no drift is shown for runs that do not train the same model


def test_a_frozen_layer_is_a_set_up_difference(runs, data):
    def frozen():
        model = build()
        model.get_layer("d2").trainable = False
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        return model

    comparison = compare_runs(runs["single"], run_training(frozen, data, epochs=2, batch_size=BATCH, label="frozen"))
    assert not comparison.equivalent and "mlp/d2/kernel trains in one device only" in comparison.verdict()


def test_runs_of_other_shapes_are_refused(runs, data):
    short = run_training(build, data, epochs=1, batch_size=BATCH)
    with pytest.raises(ValueError, match="8 vs 4 steps"):
        compare_runs(runs["single"], short)


def _assert_judged_right(cases):
    assert {name for name, case in cases.items() if case["equivalent"]} == {
        "data parallel", "model parallel", "transformer, data parallel"}
    for name in ("dropped gradient", "lost shard", "summed over devices", "transformer, summed over devices"):
        assert cases[name]["verdict"].startswith(f"NOT equivalent: step 1 of {name}, replayed on one device"), name
        assert cases[name]["worst"] > 0.1, name  # far beyond one example's share (1/32)
    for name in ("data fed twice", "another learning rate", "another seed"):
        assert cases[name]["verdict"].startswith("NOT equivalent: the runs differ before their first step"), name
    right = ("data parallel", "model parallel", "transformer, data parallel")
    assert max(cases[name]["worst"] for name in right) <= 2.0**-12
    # the MLP's every step is judged; the transformer's attention key bias moves by rounding noise alone, and
    # only it (with its two Adam slots) is left unjudged, and named, in the right run and the wrong one
    assert not cases["data parallel"]["noise"] and not cases["summed over devices"]["noise"]
    for name in ("transformer, data parallel", "transformer, summed over devices"):
        assert [path.rsplit("/", 1)[-1] for path in cases[name]["noise"]] == [
            "bias", "attn_key_bias_momentum", "attn_key_bias_velocity"], cases[name]["noise"]
        assert cases[name]["noise"][0] == "attn/key/bias"
    assert "not judged, as rounding noise: attn/key/bias" in cases["transformer, data parallel"]["verdict"]


def test_planted_bugs_are_caught_and_right_runs_pass_on_this_cpu():
    spec = importlib.util.spec_from_file_location("planted_bugs", PLANTED)
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    _assert_judged_right(planted.judge())


@pytest.mark.parametrize("isa", OLDER_INSTRUCTION_SETS)
def test_planted_bugs_are_caught_and_right_runs_pass_on_every_older_instruction_set(isa, in_background):
    """As on this CPU's own instruction set, with XLA compiling for each older one (`--xla_cpu_max_isa`)."""
    cases = in_background[isa]
    assert isinstance(cases, dict), f"the planted cases failed under --xla_cpu_max_isa={isa}:\n{cases}"
    _assert_judged_right(cases)


def test_compare_weights_asks_for_exact_equality_by_default():
    a, b = build(), build()
    b.set_weights(a.get_weights())
    same = compare_weights(a, b)
    assert same.equivalent and repr(same).endswith("EQUIVALENT (rtol=0, atol=0)")
    b.get_layer("d1").kernel.assign(b.get_layer("d1").kernel + 1e-7)
    assert not compare_weights(a, b).equivalent and compare_weights(a, b, atol=1e-6).equivalent
    assert "<strong>NOT equivalent</strong> (rtol=0, atol=0)" in compare_weights(a, b)._repr_html_()
