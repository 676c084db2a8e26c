"""Several processes, one mesh: the launcher and the worker's side of a multi-process run.

`launcher` starts N local processes joined by `keras.distribution.initialize()`
(`python -m course_utils.launch`); `worker` is what each process calls first;
`ownership` plans which process owns which device. This package never imports
matplotlib or the course machinery, so a worker starts quickly and small; its
figure, `draw_process_mesh`, lives in `course_utils.viz`.
"""

from course_utils.multiprocess.ownership import ProcessOwnership, process_ownership
from course_utils.multiprocess.worker import (
    ProcessSetup,
    local_rows,
    planned_batch_slices,
    process_batch_slice,
    setup_process,
)

__all__ = ["ProcessOwnership", "ProcessSetup", "local_rows", "planned_batch_slices", "process_batch_slice",
           "process_ownership", "setup_process"]
