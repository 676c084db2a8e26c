import os
import subprocess
import sys
import sysconfig

import pytest

from course_utils.course.environment import doctor

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)


def run_doctor(**env):
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "course_utils.course", "doctor"], capture_output=True, text=True,
                          env=full, timeout=120)


def test_this_machine_is_ready():
    result = run_doctor(COURSE_PLATFORM="cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[ok ] keras: 3.15.1" in out and "[ok ] jax: 0.10.2" in out
    assert "8 simulated CPU devices" in out and "COURSE_PLATFORM=cpu" in out
    assert "a sharded matmul on 8 devices equals NumPy" in out
    assert "MB available" in out and out.rstrip().endswith("Ready for the course.")
    assert "[ok ] compilation cache: " in out and "compiled programs" in out
    assert "[ok ] Keras internals: all" in out and "behaviours as expected" in out
    assert "[ok ] JAX internals: all 8 parts the course reads as expected" in out
    assert "[ok ] XLA flags: none set: XLA's defaults" in out


def test_a_forced_missing_gpu_is_a_problem_with_a_fix():
    result = run_doctor(COURSE_PLATFORM="gpu")
    assert result.returncode == 1
    assert "[NO ] devices" in result.stdout and "fix:" in result.stdout and "1 problem(s)" in result.stdout


def test_a_platform_jax_cannot_start_is_a_finding_not_a_traceback():
    # as JAX_PLATFORMS=gpu on a machine without GPUs; a platform no machine has, so the test holds on any
    result = run_doctor(JAX_PLATFORMS="nosuchplatform", COURSE_PLATFORM="")
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert "[NO ] devices: JAX cannot start: RuntimeError: Unable to initialize backend" in result.stdout
    assert "fix: unset JAX_PLATFORMS (now 'nosuchplatform')" in result.stdout and "[ok ] free memory" in result.stdout


def test_an_unknown_xla_flag_is_a_finding_and_the_report_goes_on():
    result = run_doctor(XLA_FLAGS="--xla_no_such_flag=1", COURSE_PLATFORM="cpu")
    assert result.returncode == 1  # XLA ends the process that meets the flag: the doctor meets it in a child
    assert "[NO ] devices: JAX cannot start:" in result.stdout and "Unknown flag in XLA_FLAGS" in result.stdout
    assert "fix: remove the flag it names from XLA_FLAGS" in result.stdout
    assert result.stdout.rstrip().endswith("1 problem(s) to fix (see fix: lines).")


def test_xla_flags_that_jax_accepts_are_a_problem_with_a_fix(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    finding = doctor.check_xla_flags()
    assert finding.seen.startswith("XLA_FLAGS='--xla_cpu_use_fusion_emitters=false': the lessons' numbers")
    assert finding.fix.startswith("unset XLA_FLAGS (a flag that changes no result, a dump folder say, may stay")
    monkeypatch.delenv("XLA_FLAGS")
    assert doctor.check_xla_flags().fix is None


def test_another_keras_backend_is_a_problem_with_a_fix():
    result = run_doctor(KERAS_BACKEND="torch")
    assert result.returncode == 1
    assert "KERAS_BACKEND='torch'" in result.stdout and "set it to 'jax'" in result.stdout


def test_a_fresh_process_on_another_backend_is_the_one_problem_and_no_probe_outlives_the_report(monkeypatch):
    """The two fresh processes run beside the device checks; when the bare `import keras` picks another
    backend, the report says so and leaves the devices out, as it did when it checked them one by one."""
    import io

    started = []

    def other_backend(*args, **kwargs):
        started.append(subprocess.Popen([sys.executable, "-c", "print('backend=torch')"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True))
        return started[-1]

    def jax_starts(*args, _real=doctor.start_jax_probe):
        started.append(_real(*args))
        return started[-1]

    monkeypatch.setattr(doctor, "start_backend_probe", other_backend)
    monkeypatch.setattr(doctor, "start_jax_probe", jax_starts)
    out = io.StringIO()
    assert doctor.run(out) == 1
    report = out.getvalue()
    assert "[NO ] Keras backend: a bare `import keras` in a fresh process picks 'torch', not 'jax'" in report
    assert "devices:" not in report and "2 x 4 mesh" not in report and "[ok ] free memory" in report
    assert report.rstrip().endswith("1 problem(s) to fix (see fix: lines).")
    assert len(started) == 2 and all(process.returncode is not None for process in started)


def test_the_cache_turned_off_is_said(monkeypatch):
    from course_utils.devices import DeviceSetup

    monkeypatch.setenv("COURSE_COMPILATION_CACHE", "off")
    finding = doctor.check_compilation_cache(DeviceSetup(("cpu:0",), "cpu", False, compilation_cache=None))
    assert str(finding) == "[ok ] compilation cache: off (COURSE_COMPILATION_CACHE=off): every run compiles again"


def test_a_cache_folder_that_cannot_be_used_is_a_problem_with_its_fix(tmp_path, monkeypatch):
    from course_utils.devices import DeviceSetup

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("COURSE_COMPILATION_CACHE", str(tmp_path / "a-file"))
    finding = doctor.check_compilation_cache(DeviceSetup(("cpu:0",), "cpu", False, compilation_cache=None))
    assert finding.fix is not None and "set COURSE_COMPILATION_CACHE to a folder of your own" in finding.fix
    assert str(finding).startswith(f"[NO ] compilation cache: COURSE_COMPILATION_CACHE='{tmp_path}/a-file': "
                                   f"{tmp_path}/a-file exists and is not a folder")


def test_version_mismatch_and_missing_package():
    findings = {f.check: f for f in doctor.check_packages({"keras": "0.0.1"})}
    assert findings["keras"].fix is not None and "pins 0.0.1" in findings["keras"].seen
    assert findings["jax"].fix is None


def test_usage_without_a_job_or_with_an_unknown_one():
    from course_utils.course.__main__ import JOBS

    for args in ([], ["doctr"]):
        result = subprocess.run([sys.executable, "-m", "course_utils.course", *args], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2 and "Usage: python -m course_utils.course <job>" in result.stderr
        assert all(f"  {job} " in result.stderr for job in JOBS)
    assert "Received: 'doctr'" in result.stderr


def test_requirement_pins_read_exact_pins(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# comment\nkeras==3.15.1\nml_dtypes==0.6.0  # note\nloose>=1\n")
    assert doctor.requirement_pins(path) == {"keras": "3.15.1", "ml-dtypes": "0.6.0"}


def bare_import_keras(**env):
    fresh = {k: v for k, v in {**os.environ, **env}.items() if k != "KERAS_BACKEND"}
    return subprocess.run([sys.executable, "-c", "import keras; print(keras.backend.backend())"],
                          capture_output=True, text=True, env=fresh, timeout=120)


def test_a_bare_import_keras_in_this_environment_picks_jax(tmp_path):
    # A keras.json that says tensorflow (Keras's own default) does not win over the environment's setting.
    (tmp_path / "keras.json").write_text('{"backend": "tensorflow"}')
    result = bare_import_keras(KERAS_HOME=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "jax"
    assert doctor.check_backend().seen == "jax (a bare `import keras` in a fresh process picks it)"


def test_an_environment_without_the_setting_is_a_problem_with_a_fix(tmp_path):
    # -S skips the .pth files, as an environment set up without `make lab` would; KERAS_HOME holds no keras.json.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"], "KERAS_HOME": str(tmp_path)}
    finding = doctor.check_backend(python=(sys.executable, "-S"), env=env)
    assert finding.fix == "run `python -m course_utils.course doctor --set-keras-backend` in the course's environment (make lab does it)"
    assert "a bare `import keras` in a fresh process fails: ModuleNotFoundError: No module named 'tensorflow'" in finding.seen


def test_set_keras_backend_writes_a_start_up_line(tmp_path):
    path = doctor.set_keras_backend(tmp_path)
    assert path.name == "course_utils_keras_backend.pth"
    result = subprocess.run([sys.executable, "-S", "-c", "import os, site, sys; site.addsitedir(sys.argv[1]); "
                             "print(os.environ['KERAS_BACKEND'])", str(tmp_path)],
                            capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"})
    assert result.stdout.strip() == "jax", result.stderr


def test_a_kernel_that_imports_keras_before_setting_up_gets_jax(monkeypatch):
    """A lesson's imports cell run before its set-up cell, in a kernel started without KERAS_BACKEND."""
    import nbclient
    import nbformat

    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("COURSE_PLATFORM", "cpu")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import keras\nprint(keras.backend.backend())"),
        nbformat.v4.new_code_cell("from course_utils import setup_devices\nprint(len(setup_devices(8)))"),
    ])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    printed = [cell.outputs[0]["text"].strip() for cell in notebook.cells]
    assert printed == ["jax", "8"]
