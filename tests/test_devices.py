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


def test_bad_environment_platform():
    result = run_python("from course_utils import setup_devices; setup_devices(8)", COURSE_PLATFORM="quantum")
    assert result.returncode != 0
    assert "COURSE_PLATFORM='quantum'" in result.stderr


def test_quick_compile_asks_xla_for_plain_cpu_code_before_jax_starts():
    code = ("import os\n"
            "from course_utils import setup_devices\n"
            "setup = setup_devices(4, platform='cpu', quick_compile=True)\n"
            "import jax, jax.numpy as jnp\n"
            "print(os.environ['XLA_FLAGS'])\n"
            "print(float(jax.jit(lambda x: (x * 2).sum())(jnp.arange(4.0))), len(setup.devices))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "XLA_FLAGS": "--xla_dump_to=/dev/null"}).stdout.splitlines()
    flags = out[0].split()
    assert flags[0] == "--xla_dump_to=/dev/null"
    assert {"--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0",
            "--xla_llvm_disable_expensive_passes=true"} <= set(flags)
    assert out[1] == "12.0 4"
