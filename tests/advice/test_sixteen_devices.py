"""Three mesh axes on 16 devices (two nodes of 8 H100s), in a Python process of its own: the course's kernels have 8."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json
from course_utils import advise, setup_devices
setup_devices(16)
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(256, name="d1"), keras.layers.Dense(4, name="d2")])
model.compile(optimizer="adam", loss="mse")
advice = advise(model, devices="2x8xH100-80GB", batch=64, mesh_shapes=[(16, 1), (2, 8, 1), (2, 4, 2)])
rows = [{"layout": r.layout, "shape": r.mesh_shape, "step": r.time.step, "tokens": r.tokens,
         "transfers": [[t.kind, t.axes, t.pass_] for t in r.program.transfers]} for r in advice]
print(json.dumps({"rows": rows, "links": advice.links((2, 8, 1)), "text": repr(advice)}))
"""


@pytest.mark.processes
def test_hsdp_and_data_x_fsdp_x_tensor_on_two_nodes_of_eight():
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    rows = {(r["layout"], tuple(r["shape"])): r for r in found["rows"]}
    assert {shape for _, shape in rows} == {(16, 1), (2, 8, 1), (2, 4, 2)}
    assert ("FSDP + tensor parallel", (2, 4, 2)) in rows  # data x FSDP x tensor
    hsdp, fsdp = rows["FSDP", (2, 8, 1)], rows["FSDP", (16, 1)]
    assert hsdp["step"] < fsdp["step"] and hsdp["tokens"] == 64 / 16
    across = [t for t in hsdp["transfers"] if "replica" in t[1]]
    assert across and all(kind in ("all-reduce", "reduce-scatter") and pass_ == "backward" for kind, _, pass_ in across)
    assert found["links"] == "replica: InfiniBand, batch: NVLink"
    assert "2 x (8, 1)" in found["text"] and "2 x (4, 2)" in found["text"]
