"""Exercise checkers for lesson 06: processes, local and global devices, the rows each process feeds.

The expected answers come from the course's planning helpers: device
ownership from `process_ownership`, and the rows of a batch from JAX's real
sharding of it under a Keras `ModelParallel` distribution (`planned_batch_slices`).
"""

from __future__ import annotations

from course_utils.exercises.core import exercise


def _planned_rows(mesh_shape: tuple[int, int], processes: int, global_batch_size: int, process: int):
    """(start, stop) of the rows `process` feeds, from JAX's sharding of the batch."""
    from keras import distribution

    from course_utils.multiprocess import planned_batch_slices

    mesh = distribution.DeviceMesh(mesh_shape, ("data", "model"), distribution.list_devices()[:8])
    dist = distribution.ModelParallel(layout_map=distribution.LayoutMap(mesh), batch_dim_name="data",
                                      auto_shard_dataset=False)
    rows = planned_batch_slices(global_batch_size, dist, processes)[process]
    return rows.start, rows.stop


def _as_pair(answer) -> tuple[int, int] | None:
    if isinstance(answer, slice):
        return answer.start or 0, answer.stop
    try:
        start, stop = answer
        return int(start), int(stop)
    except (TypeError, ValueError):
        return None


@exercise("06.1", "4 processes x 2 devices form a 2 x 4 mesh: (jax.local_device_count(), jax.device_count()) in process 3?",
          form="a pair of whole numbers (local devices, global devices), e.g. (1, 4)")
def device_counts(answer):
    """Local devices are those a process owns; global devices are every process's."""
    from course_utils.multiprocess import process_ownership

    ownership = process_ownership((2, 4), processes=4)
    expected = (len(ownership.devices_of(3)), len(ownership.devices_of(3)) * 4)
    pair = _as_pair(answer)
    if pair == expected:
        return None
    if pair == expected[::-1]:
        return "Swapped: the local count (this process's devices) comes first, the global count second."
    if pair is not None and pair[1] != expected[1]:
        return "jax.device_count() counts the devices of every process: the whole mesh."
    return "Each of the 4 processes owns the same number of the mesh's 8 devices."


@exercise("06.2", "2 x 4 mesh over 2 processes, global batch 64: (start, stop) of the rows process 1 feeds?",
          form='a pair of whole numbers (start, stop), e.g. (0, 10)')
def rows_of_process_one(answer):
    """Process 1 owns mesh row data=1, which holds the second half of every global batch."""
    expected = _planned_rows((2, 4), 2, 64, 1)
    pair = _as_pair(answer)
    if pair == expected:
        return None
    if pair == _planned_rows((2, 4), 2, 64, 0):
        return "Those are process 0's rows: process 1 owns the mesh row data=1."
    if pair == (0, 64):
        return ("The 'data' axis splits the batch over its 2 rows, and each process owns one row: "
                "a process feeds only its part.")
    if pair == (16, 32) or pair == (8, 16):
        return "Count rows of a batch of 64, not 32; and the model axis does not split the batch."
    return "Give (start, stop), e.g. (0, 10): the rows of every global batch of 64 that process 1 passes to fit."


@exercise("06.3", "(1, 8) mesh ('data', 'model') over 2 processes, global batch 32: (start, stop) of the rows process 1 feeds?",
          form='a pair of whole numbers (start, stop), e.g. (0, 10)')
def rows_without_a_data_split(answer):
    """A 'data' axis of size 1 does not split the batch: both processes feed the whole batch."""
    expected = _planned_rows((1, 8), 2, 32, 1)
    pair = _as_pair(answer)
    if pair == expected:
        return None
    if pair == (16, 32):
        return ("Those are the rows of a batch split in two, but the 'data' axis has size 1 here. What do "
                "the two processes hold: two replicas of the model, or parts of one?")
    return "Give (start, stop). How many parts does a 'data' axis of size 1 cut the batch into?"


def _example_step():
    """The collectives of one training step of the example's model on its 2 x 4 mesh (for the lesson's claims).

    Compiled in one process on 8 devices: the same program each process of the 2 x 4 run takes its part of.
    """
    from course_utils.communication.report import communication_report
    from course_utils.examples import train_2x4

    dist = train_2x4.make_distribution()
    with dist.scope():
        model = train_2x4.build_model()
    return model, communication_report(model, dist, (32, 16))
