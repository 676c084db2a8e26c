import json
import logging
import os
import subprocess
import sys

import pytest

from course_utils import DeviceSetupError, current_setup, setup_devices


def run_python(code, **env):
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


def test_eight_simulated_cpu_devices():
    setup = setup_devices(8)
    assert setup.devices == tuple(f"cpu:{i}" for i in range(8))
    assert setup.platform == "cpu"
    assert setup.simulated is True
    assert "8 simulated CPU devices" in repr(setup)
    assert os.environ["KERAS_BACKEND"] == "jax"


def test_same_call_again_is_harmless():
    assert setup_devices(8) == setup_devices(8) == current_setup()


def test_xla_flags_are_named_by_a_warning_and_their_absence_by_none(monkeypatch):
    # The lessons' numbers were checked with XLA's defaults: a flag can change them, and the learner is told.
    import warnings

    from course_utils.xla_settings import XlaFlagsWarning

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    with pytest.warns(XlaFlagsWarning, match=r"XLA_FLAGS='--xla_cpu_use_fusion_emitters=false': the lessons' "
                                             r"numbers and verdicts were checked with XLA's defaults"):
        setup_devices(8)
    monkeypatch.delenv("XLA_FLAGS")
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlaFlagsWarning)
        setup_devices(8)


def test_keras_sees_the_same_devices():
    from keras import distribution

    assert distribution.list_devices() == list(setup_devices(8).devices)


def test_fewer_devices_than_jax_started_with_says_what_keras_would_use():
    # Meshes would use 4 while DataParallel() still spread over all 8: refused, the 8 stay set up.
    with pytest.raises(DeviceSetupError, match=r"Received: n=4 after JAX started with 8.*setup_devices\(8\).*restart"):
        setup_devices(4)
    assert len(current_setup()) == 8
    from keras import distribution

    assert distribution.DataParallel().device_mesh.shape == (len(current_setup()),)


def test_more_devices_than_jax_started_with_says_restart():
    with pytest.raises(DeviceSetupError, match="Restart the kernel"):
        setup_devices(16)
    setup_devices(8)


@pytest.mark.parametrize("n", [0, -2, 2.5, "8", True])
def test_bad_count(n):
    with pytest.raises(ValueError, match=f"Received: n={n!r}"):
        setup_devices(n)


def test_bad_platform():
    with pytest.raises(ValueError, match="Received: platform='cuda'"):
        setup_devices(8, platform="cuda")


def test_forced_gpu_without_gpu_says_how_to_fall_back():
    with pytest.raises(DeviceSetupError, match="JAX finds 0.*platform='cpu'"):
        setup_devices(8, platform="gpu")


@pytest.mark.processes
def test_out_of_order_cells_in_a_fresh_process():
    # A learner ran a JAX cell before the set-up cell: JAX started with 1 CPU device.
    result = run_python(
        "import jax; jax.numpy.ones(3)\n"
        "from course_utils import setup_devices\n"
        "setup_devices(8)\n",
        COURSE_PLATFORM="cpu",
    )
    assert result.returncode != 0
    assert "DeviceSetupError" in result.stderr
    assert "only 1 exist" in result.stderr and "Restart the kernel" in result.stderr


@pytest.mark.processes
def test_callable_after_importing_keras_and_env_platform():
    result = run_python(
        "import keras\n"
        "from course_utils import setup_devices\n"
        "s = setup_devices(4)\n"
        "import jax\n"
        "print(keras.backend.backend(), len(jax.devices('cpu')), s.platform, s.simulated)\n",
        COURSE_PLATFORM="cpu", KERAS_BACKEND="jax",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["jax", "4", "cpu", "True"]


@pytest.mark.processes
def test_bad_environment_platform():
    result = run_python("from course_utils import setup_devices; setup_devices(8)", COURSE_PLATFORM="quantum")
    assert result.returncode != 0
    assert "COURSE_PLATFORM='quantum'" in result.stderr


_TRAIN_ONCE = (
    "import json, os, logging\n"
    "from course_utils import setup_devices\n"
    "setup = setup_devices(4, platform='cpu')\n"
    "import keras, numpy as np\n"
    "from course_utils import run_training\n"
    "def build():\n"
    "    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name='d1'), keras.layers.Dense(2)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "    return model\n"
    "rng = np.random.default_rng(0)\n"
    "x, y = rng.normal(size=(64, 8)).astype('float32'), rng.normal(size=(64, 2)).astype('float32')\n"
    "dp = keras.distribution.DataParallel(devices=setup.devices)\n"
    "run = run_training(build, (x, y), distribution=dp, epochs=2, batch_size=16)\n"
    "print(json.dumps({'cache': setup.compilation_cache, 'losses': [float(v) for v in run.losses],\n"
    "                  'weights': [w.tolist() for w in run.weights.values()]}))\n"
)


@pytest.mark.processes
def test_compiled_programs_are_cached_on_disk_and_change_no_result(tmp_path):
    cache = tmp_path / "cache"
    env = {"COURSE_COMPILATION_CACHE": str(cache), "COURSE_PLATFORM": "cpu"}
    first = run_python(_TRAIN_ONCE, **env)
    assert first.returncode == 0, first.stderr
    written = sorted(p.name for p in cache.iterdir())
    assert len([n for n in written if n.endswith(".program")]) >= 2  # the training step and more
    second = run_python(_TRAIN_ONCE + "print(sorted(os.listdir(setup.compilation_cache)) == %r)" % written, **env)
    assert second.returncode == 0, second.stderr
    cold, warm = (json.loads(r.stdout.splitlines()[0]) for r in (first, second))
    assert cold["cache"] == warm["cache"] == str(cache)
    assert second.stdout.splitlines()[1] == "True"  # every program came from the cache: nothing new written
    assert cold["losses"] == warm["losses"] and cold["weights"] == warm["weights"]  # bit for bit


_REPORT_LAYERS = (
    "import json, sys\n"
    "from course_utils import setup_devices, communication_report, make_layout_map, make_mesh\n"
    "setup_devices(8, platform='cpu')\n"
    "import keras\n"
    "from keras import distribution\n"
    "first, second = sys.argv[1:]\n"
    "mp = distribution.ModelParallel(layout_map=make_layout_map(make_mesh((2, 4), ('data', 'model')), {\n"
    "    f'.*{first}/kernel': (None, 'model'), f'.*{second}/kernel': ('model', None)}), batch_dim_name='data')\n"
    "with mp.scope():\n"
    "    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, name=first),\n"
    "                              keras.layers.Dense(4, name=second)], name='net')\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "print(json.dumps(sorted({r['layer'] for r in communication_report(model, mp, (8, 16)).by_layer().rows})))\n"
)


@pytest.mark.processes
def test_a_cached_program_never_lends_another_models_layer_names_to_a_report(tmp_path):
    env = {"COURSE_COMPILATION_CACHE": str(tmp_path), "COURSE_PLATFORM": "cpu"}
    run = lambda *names: subprocess.run([sys.executable, "-c", _REPORT_LAYERS, *names], capture_output=True,
                                        text=True, env={**os.environ, **env}, timeout=300)
    alpha = run("alpha_in", "alpha_out")
    beta = run("beta_in", "beta_out")  # the same program but for its names
    assert alpha.returncode == 0 and beta.returncode == 0, alpha.stderr + beta.stderr
    assert any("alpha_in" in layer for layer in json.loads(alpha.stdout.splitlines()[-1]))
    layers = json.loads(beta.stdout.splitlines()[-1])
    assert any("beta_in" in layer for layer in layers) and not any("alpha" in layer for layer in layers)


@pytest.mark.processes
def test_the_cache_can_be_turned_off_and_lives_per_environment_outside_the_repository(tmp_path):
    code = "from course_utils import setup_devices; print(setup_devices(2, platform='cpu').compilation_cache)"
    off = run_python(code, COURSE_COMPILATION_CACHE="off")
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == "None"
    default = run_python(code, COURSE_COMPILATION_CACHE="", XDG_CACHE_HOME=str(tmp_path))
    assert default.returncode == 0, default.stderr
    folder = default.stdout.strip()
    assert folder.startswith(str(tmp_path / "course_utils" / "jax-compilation-cache")) and os.path.isdir(folder)
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert not folder.startswith(repository)


def test_a_model_built_on_one_device_shares_its_compiled_initializers_with_a_distribution(caplog):
    # scope_for(None) adds no device scope when JAX's default device is already the first course
    # device: a scope would key JAX's compiled programs apart, and every initializer would compile twice.
    import jax
    from keras import distribution

    from course_utils import make_mesh, models
    from course_utils.devices import scope_for

    def build():
        return models.mlp(inputs=13, hidden=27, classes=5)  # shapes no other test compiles

    with scope_for(None):
        build()
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles(True):
        with distribution.DataParallel(device_mesh=make_mesh((8,), ("data",))).scope():
            build()
    assert not [r.message for r in caplog.records if "XLA compilation" in r.message]


@pytest.mark.processes
def test_thousands_of_simulated_devices_are_refused_before_jax_starts():
    result = run_python("from course_utils import setup_devices; setup_devices(10_000)")
    assert result.returncode != 0
    assert "simulates at most 512 CPU devices" in result.stderr and "Received: n=10000" in result.stderr
