"""The course's JupyterLab settings: kernels stop with their tab, idle ones are culled (course/environment/lab_settings.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.course.environment import lab_settings
from course_utils.course.lesson_parts import lessons

pytestmark = pytest.mark.processes  # starts processes or kernels: left out of the fast lane (pytest --fast)

ROOT = Path(__file__).resolve().parents[3]


def test_both_settings_are_written_and_the_teachers_own_overrides_kept(tmp_path):
    overrides = lab_settings.overrides_path(tmp_path)
    overrides.parent.mkdir(parents=True)
    overrides.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                                     "@jupyterlab/notebook-extension:tracker": {"codeCellConfig": {"lineNumbers": True}}}))
    server = lab_settings.server_config_path(tmp_path)
    server.parent.mkdir(parents=True)
    server.write_text(json.dumps({"ServerApp": {"iopub_data_rate_limit": 1e9},
                                  "MappingKernelManager": {"buffer_offline_messages": False}}))
    lab_settings.write(tmp_path)
    assert json.loads(server.read_text())["ServerApp"] == {"iopub_data_rate_limit": 1e9}
    assert json.loads(server.read_text())["MappingKernelManager"]["buffer_offline_messages"] is False
    settings = json.loads(overrides.read_text())
    assert settings["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert settings["@jupyterlab/notebook-extension:tracker"] == {"codeCellConfig": {"lineNumbers": True},
                                                                   "kernelShutdown": True}
    cull = json.loads(lab_settings.server_config_path(tmp_path).read_text())["MappingKernelManager"]
    assert cull == {"buffer_offline_messages": False, **lab_settings.CULL} and cull["cull_connected"] is False  # a learner's open tab keeps its kernel
    lab_settings.write(tmp_path, binder=True)
    cull = json.loads(lab_settings.server_config_path(tmp_path).read_text())["MappingKernelManager"]
    assert cull["cull_connected"] is True and cull["cull_idle_timeout"] == 900


def test_overrides_that_are_not_settings_are_left_alone_with_a_message(tmp_path):
    overrides = lab_settings.overrides_path(tmp_path)
    overrides.parent.mkdir(parents=True)
    overrides.write_text("{not json")
    with pytest.raises(ValueError, match="is not a JSON object of settings .* it is left as it is"):
        lab_settings.write(tmp_path)
    assert overrides.read_text() == "{not json"


def test_this_environments_jupyterlab_has_them():
    settings = json.loads(lab_settings.overrides_path().read_text())
    assert settings["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True
    code = ("from jupyter_server.serverapp import ServerApp; app = ServerApp(); app.load_config_file(); "  # as it starts
            "import json; print(json.dumps(dict(app.config.MappingKernelManager)))")
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(seen.stdout.splitlines()[-1]) == lab_settings.CULL


def test_make_and_binder_write_them():
    assert "-m course_utils.course lab-settings\n" in (ROOT / "Makefile").read_text()
    assert "python -m course_utils.course lab-settings --binder\n" in (ROOT / "binder" / "postBuild").read_text()


def test_every_lesson_ends_by_saying_to_close_its_tab_and_lesson_00_says_what_to_do_on_binder():
    for path in lessons(ROOT / "notebooks"):
        last = json.loads(path.read_text())["cells"][-1]
        assert "".join(last["source"]).startswith("**Finished with this lesson?** Save it, then close its tab"), path
        minutes = lab_settings.BINDER_CULL["cull_idle_timeout"] // 60
        assert f"(on Binder, a kernel left idle for {minutes} minutes stops too)" in "".join(last["source"]), path
    first = "".join("".join(c["source"]) for c in json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())["cells"])
    assert "### On Binder: memory" in first and "Kernel ▸ Shut Down All Kernels" in first
    assert f"idle for {lab_settings.BINDER_CULL['cull_idle_timeout'] // 60} minutes (the notebook keeps" in " ".join(first.split())
