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


def test_setup_process_can_ask_for_quick_compiles():
    import os
    import subprocess
    import sys

    code = ("import os\n"
            "from course_utils.multiprocess import setup_process\n"
            "setup = setup_process(4, quick_compile=True)\n"
            "print(os.environ['XLA_FLAGS'])\n"
            "print(len(setup.global_devices), setup.process_count)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERAS_DISTRIBUTION", "COURSE_DEVICES"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "XLA_FLAGS": ""}).stdout.splitlines()
    assert {"--xla_cpu_use_fusion_emitters=false", "--xla_llvm_disable_expensive_passes=true"} <= set(out[0].split())
    assert out[1] == "4 1"
