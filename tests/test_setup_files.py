"""The set-up files agree with each other: Binder installs what the README's commands install."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

ROOT = Path(__file__).resolve().parents[1]


def pins(path):
    found = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path}: {line!r} is not an exact pin"
            found[name.lower().replace("_", "-")] = version
    return found


def test_binder_pins_equal_requirements():
    assert pins("binder/requirements.txt") == pins("requirements.txt")


def test_binder_installs_the_no_deps_pins_like_make():
    assert pins("binder/requirements-nodeps.txt") == pins("requirements-nodeps.txt")
    assert pins("requirements-nodeps.txt")["keras-hub"] == "0.32.0"
    makefile = (ROOT / "Makefile").read_text()
    stamp = next(line for line in makefile.splitlines() if line.startswith("$(BIN)/.installed:"))
    assert "requirements-nodeps.txt" in stamp
    assert "pip install --quiet --no-deps -r requirements-nodeps.txt" in makefile
    assert "pip install --no-deps -r binder/requirements-nodeps.txt" in (ROOT / "binder/postBuild").read_text()
    # keras-hub's imports that its --no-deps install leaves out come from requirements.txt
    assert {"absl-py", "packaging", "regex", "rich"} <= set(pins("requirements.txt"))


def test_core_stack_is_pinned():
    required = pins("requirements.txt")
    assert required["keras"].startswith("3.15.")
    assert required["jax"] == required["jaxlib"]
    assert required["jupyterlab"].startswith("4.") and required["ipywidgets"].startswith("8.")
    assert "matplotlib" in required


def test_binder_python_supports_the_pins():
    runtime = (ROOT / "binder/runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.(1[1-9])", runtime), runtime


def test_binder_makes_course_utils_importable():
    post_build = (ROOT / "binder/postBuild").read_text()
    assert "pip install" in post_build and "-e ." in post_build


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme
    assert "make test" in (ROOT / ".ci/run").read_text()


def test_make_installs_the_libtpu_the_advisor_names():
    from course_utils.advice.tpu import LIBTPU

    pinned = re.search(r"^LIBTPU := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and pinned.group(1) == LIBTPU


def test_the_makefiles_cuda_plugin_pin_is_the_advisors_and_jaxs():
    from course_utils.advice.gpu import PLUGIN

    pinned = re.search(r"^GPU_PLUGIN := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and tuple(pinned.group(1).split()) == PLUGIN
    jax = re.search(r"^jax==(.+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert all(pin.endswith(f"=={jax}") for pin in PLUGIN)


def test_live_slides_extension_is_enabled_in_jupyterlab():
    import subprocess
    import sys

    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    lines = (listed.stdout + listed.stderr).splitlines()
    rise = [line for line in lines if "jupyterlab-rise" in line]
    assert rise and "enabled" in rise[0] and "OK" in rise[0], "\n".join(lines)


def _planned(venv: Path, python: str) -> str:
    """What `make lab` would run (make -n) with this environment folder and interpreter."""
    import subprocess

    run = subprocess.run(["make", "-n", "lab", f"VENV={venv}", f"PYTHON={python}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    return run.stdout + run.stderr


def test_naming_another_python_makes_the_environment_again(tmp_path):
    import stat
    import sys

    version = "%d.%d.%d" % sys.version_info[:3]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / f".made-with-python-{version}").touch()
    (venv / "bin" / ".installed").touch()
    assert "-m venv" not in _planned(venv, sys.executable)  # the same interpreter: the environment is kept
    other = tmp_path / "python3.99"
    other.write_text("#!/bin/sh\necho 3.99.0\n")
    other.chmod(other.stat().st_mode | stat.S_IEXEC)
    planned = _planned(venv, str(other))
    assert f"{other} -m venv --clear {venv}" in planned  # once kept the old interpreter without a word
    assert "making it again with" in planned


def test_the_package_license_is_an_spdx_string():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "Apache-2.0"$', text, re.M)  # the table form stops building in 2027
    assert re.search(r'requires = \["setuptools>=(\d+)"\]', text) and int(
        re.search(r'setuptools>=(\d+)', text).group(1)) >= 77
