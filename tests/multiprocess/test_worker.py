"""The worker-side helpers, checked in this (one-process, 8-device) test run.

Which rows each process feeds comes from JAX's sharding of the batch; the
planned split over 2 processes must agree with what each process of a real
2-process run computes (tests/multiprocess/test_launcher.py runs that).
"""

import numpy as np
import pytest
from keras import distribution

from course_utils.multiprocess import (
    local_rows,
    planned_batch_slices,
    process_batch_slice,
    process_ownership,
)


def model_parallel(shape):
    mesh = distribution.DeviceMesh(shape, ("data", "model"), distribution.list_devices()[:8])
    return distribution.ModelParallel(layout_map=distribution.LayoutMap(mesh), batch_dim_name="data",
                                      auto_shard_dataset=False)


def test_one_process_feeds_every_row():
    assert process_batch_slice(32, model_parallel((2, 4))) == slice(0, 32)


@pytest.mark.parametrize("shape, processes, expected", [
    ((2, 4), 2, [(0, 16), (16, 32)]),
    ((4, 2), 2, [(0, 16), (16, 32)]),
    ((8, 1), 4, [(0, 8), (8, 16), (16, 24), (24, 32)]),
    ((1, 8), 2, [(0, 32), (0, 32)]),
    ((2, 4), 4, [(0, 16), (0, 16), (16, 32), (16, 32)]),
])
def test_planned_slices(shape, processes, expected):
    slices = planned_batch_slices(32, model_parallel(shape), processes)
    assert [(s.start, s.stop) for s in slices] == expected


def test_local_rows_keep_step_order():
    x = np.arange(64)
    dist = model_parallel((2, 4))
    assert np.array_equal(local_rows(x, 32, dist), x)  # one process: everything, unchanged
    with pytest.raises(ValueError, match="not a multiple of the global batch size 32"):
        local_rows(np.arange(40), 32, dist)


def test_ownership_of_a_2x4_mesh():
    owned = process_ownership((2, 4), processes=2)
    assert owned.owner == ((0, 0, 0, 0), (1, 1, 1, 1))
    assert owned.devices_of(1) == (4, 5, 6, 7)
    assert process_ownership((4, 2), processes=2).owner == ((0, 0), (0, 0), (1, 1), (1, 1))
    with pytest.raises(ValueError, match="do not split over 3 processes"):
        process_ownership((2, 4), processes=3)


@pytest.mark.processes
def test_setup_process_keeps_compiled_programs_where_setup_devices_does(tmp_path):
    import os
    import subprocess
    import sys

    code = ("from course_utils.multiprocess import setup_process\n"
            "setup = setup_process(4)\n"
            "import jax, jax.numpy as jnp\n"
            "print(float(jax.jit(lambda x: (x * 3).sum())(jnp.arange(4.0))), len(setup.global_devices))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERAS_DISTRIBUTION", "COURSE_DEVICES"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "COURSE_COMPILATION_CACHE": str(tmp_path)}).stdout.splitlines()
    assert out == ["18.0 4"]
    assert any(p.name.endswith(".program") for p in tmp_path.iterdir())  # the course's checked entries
