"""Checkers for lesson 10: choosing a mesh from compute and communication time.

Each checker compiles the lesson's MLP block (`models.mlp_block`) under the layout the task names and
times it on one H100 node with the advisor's own functions (`advice.program.read_step`,
`advice.estimate.step_time`): the answer is what the programs say, not a formula typed here.
"""

from __future__ import annotations

import functools

from course_utils.exercises.core import exercise

WIDTH = 512
DEVICES = 8
HIDDEN_CHOICES = (4096, 8192, 16384, 32768)  # exercise 10.2's choices


@functools.cache
def _data_parallel_crossover() -> float:
    from keras import distribution

    from course_utils.advice.estimate import crossover, step_time
    from course_utils.advice.program import read_step
    from course_utils.hardware import device_set
    from course_utils.mesh import make_mesh
    from course_utils.models import mlp_block

    mesh = make_mesh((DEVICES, 1), ("batch", "model"))
    data_parallel = distribution.ModelParallel(layout_map=distribution.LayoutMap(mesh), batch_dim_name="batch")
    block = mlp_block(width=WIDTH, hidden=2048)
    points = []
    for tokens in (1024, 4096):
        time = step_time(read_step(block, data_parallel, (DEVICES * tokens, WIDTH)), device_set("8xH100-80GB"),
                         (DEVICES, 1), ("batch", "model"))
        points.append((tokens, time.compute["backward"], time.communication["backward"]))
    return crossover(points)


@exercise("10.1", "The tokens per device above which data parallel's backward pass is compute-bound, on one H100 node.",
          form="a number of tokens per device, e.g. 3000")
def data_parallel_critical_batch(answer) -> str | None:
    """Compiles the block's data-parallel step at two batch sizes and finds where compute meets the all-reduce."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not answer > 0:
        return f"Answer a number of tokens per device above 0. Received: {answer!r}."
    found = _data_parallel_crossover()
    if abs(answer - found) <= 0.05 * found:
        return None
    if abs(answer - 2200) <= 0.05 * 2200:
        return ("That is the book's C / W = 9.9e14 / 4.5e11. The ring all-reduce of 8 devices sends 2 x 7/8 of "
                "the gradients' bytes, not 2 x all of them: what does that do to the crossover?")
    return (f"At {answer:,.0f} tokens per device the backward pass is "
            f"{'communication' if answer < found else 'compute'}-bound: it computes 4 x 2 x width x hidden FLOPs "
            f"a token and all-reduces the 2 x width x hidden bf16 gradients once. Compare the two clocks.")


@functools.cache
def _tensor_parallel_bound(hidden: int) -> tuple[float, float]:
    """(forward compute, forward communication) seconds of the block tensor-parallel over 8 devices."""
    from keras import distribution

    from course_utils.advice.estimate import step_time
    from course_utils.advice.program import read_step
    from course_utils.hardware import device_set
    from course_utils.layouts.layout_map import make_layout_map
    from course_utils.mesh import make_mesh
    from course_utils.models import mlp_block

    mesh = make_mesh((1, DEVICES), ("batch", "model"))
    rules = {"up/kernel": (None, "model"), "down/kernel": ("model", None)}
    megatron = distribution.ModelParallel(layout_map=make_layout_map(mesh, rules), batch_dim_name="batch")
    time = step_time(read_step(mlp_block(width=WIDTH, hidden=hidden), megatron, (4096, WIDTH)),
                     device_set("8xH100-80GB"), (1, DEVICES), ("batch", "model"))
    return time.compute["forward"], time.communication["forward"]


@exercise("10.2", "The smallest hidden width F of the block whose tensor-parallel forward pass over 8 H100s is compute-bound.",
          form=f"one of {list(HIDDEN_CHOICES)}")
def tensor_parallel_width(answer) -> str | None:
    """Compiles the block tensor-parallel at each width and reads which forward passes wait for their all-reduce."""
    if answer not in HIDDEN_CHOICES:
        return f"Answer one of {list(HIDDEN_CHOICES)}. Received: {answer!r}."
    compute, communication = _tensor_parallel_bound(answer)
    if communication > compute:
        return (f"At F = {answer} the forward pass computes for {compute * 1e3:.3f} ms and all-reduces for "
                f"{communication * 1e3:.3f} ms: communication-bound. The all-reduce does not grow with F; what does?")
    smaller = [h for h in HIDDEN_CHOICES if h < answer]
    if smaller and _tensor_parallel_bound(smaller[-1])[0] >= _tensor_parallel_bound(smaller[-1])[1]:
        return "Compute-bound, yes; the task asks for the smallest width that is: try the next one down."
    return None
