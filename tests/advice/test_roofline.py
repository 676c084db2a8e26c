"""The advisor's compute = communication crossover, read from compiled programs of a transformer MLP block,
against the critical batch sizes *How to Scale Your Model* derives by hand.

The book's formulas drop the ring's (n-1)/n: on a ring of 8 a collective sends 7/8 of what the book counts,
so the crossover from the compiled program is the book's x 7/8 (12.5 % below it), and within 15 %."""

import pytest
from keras import distribution

from course_utils import make_layout_map, make_mesh
from course_utils.advice.estimate import crossover, step_time
from course_utils.advice.program import read_step
from course_utils.hardware import DeviceSet, device_set
from course_utils.models import mlp_block

D = 512
RING = 7 / 8  # the share of a ring collective's bytes one of 8 devices sends


def _dist(shape, rules):
    mesh = make_mesh(shape, ("batch", "model"))
    return distribution.ModelParallel(layout_map=make_layout_map(mesh, rules), batch_dim_name="batch")


def _critical_batch(rules, devices, shape=(8, 1)):
    """Tokens per device above which no pass is communication-bound (the latest of the passes' crossovers)."""
    dist = _dist(shape, rules)
    model = mlp_block(width=D)  # the book's MLP block in bfloat16, as lesson 10 draws it
    points = {p: [] for p in ("forward", "backward")}
    for per_device in (1024, 4096):
        program = read_step(model, dist, (per_device * shape[0], D))
        time = step_time(program, devices, shape, ("batch", "model"))
        for p in points:
            points[p].append((per_device, time.compute[p], time.communication[p]))
    return max(c for c in (crossover(points[p]) for p in points) if c is not None)


V5P_RING = DeviceSet("v5p, one axis with wraparound", "TPU v5p", 8, 4.59e14, 96e9, device_set("v5p-128").inside,
                     per_node=8, kind="tpu")
H100_NODE = device_set("8xH100-80GB")
# two nodes of 4 GPUs: on (8, 1) the batch axis spans both, so its collectives cross InfiniBand, 4 GPUs of each
# node in each group: 4 NICs of 50 GB/s, C / W = 9.9e14 / 2e11 = 4,950 tokens
H100_TWO_NODES = DeviceSet("2x4xH100", "NVIDIA H100 SXM", 8, 9.9e14, 80e9, H100_NODE.inside, per_node=4,
                           between=device_set("2x8xH100-80GB").between)
FSDP = {".*kernel": ("batch", None), "(norm|up|down)/output": ("batch", None)}  # the batch kept split


@pytest.mark.parametrize("devices, book", [(V5P_RING, 2550), (H100_NODE, 2200), (H100_TWO_NODES, 4950)],
                         ids=["v5p axis", "H100 node", "between nodes"])
@pytest.mark.parametrize("rules", [{}, FSDP], ids=["data parallel", "FSDP"])
def test_data_parallel_and_fsdp_become_compute_bound_at_the_books_critical_batch(devices, book, rules):
    critical = _critical_batch(rules, devices)
    assert critical == pytest.approx(book * RING, rel=0.03)
    assert abs(critical - book) / book < 0.15


def test_the_accelerator_sends_bf16_and_a_reduce_scatter_where_the_cpu_program_does_not():
    dist = _dist((8, 1), FSDP)
    program = read_step(mlp_block(width=D), dist, (8 * 1024, D))
    kinds = {(t.kind, t.pass_): t for t in program.transfers}
    weights = 2 * D * 2048  # the two kernels' elements
    # forward: each kernel gathered, 7/8 of it sent, in bf16 (the CPU program moves f32: twice as much)
    assert kinds["all-gather", "forward"].sent == pytest.approx(RING * weights * 2, rel=0.01)
    assert kinds["all-gather", "forward"].cpu_sent == 2 * kinds["all-gather", "forward"].sent
    # backward: the gradients summed and kept as shards: a reduce-scatter (the CPU's all-reduce sends 4x: f32, twice)
    scatter = kinds["reduce-scatter", "backward"]
    assert scatter.sent == pytest.approx(RING * weights * 2, rel=0.01) and scatter.cpu_sent > 3.9 * scatter.sent


def test_tensor_parallelism_is_compute_bound_while_the_model_axis_is_under_f_w_over_c():
    """The book: Y < F·W/C. With Y = 8 on one H100 node, the crossover in F is near 8 C/W = 17,600."""
    megatron = {"up/kernel": (None, "model"), "down/kernel": ("model", None)}
    dist = _dist((1, 8), megatron)
    points = []
    for hidden in (4096, 16384):
        program = read_step(mlp_block(width=D, hidden=hidden), dist, (4096, D))
        time = step_time(program, H100_NODE, (1, 8), ("batch", "model"))
        points.append((hidden, time.compute["forward"], time.communication["forward"]))
    book = 8 * H100_NODE.flops_per_second / H100_NODE.inside.bytes_per_second
    found = crossover(points)
    assert found == pytest.approx(book * RING, rel=0.05) and abs(found - book) / book < 0.15


def test_fsdp_as_it_runs_gathers_each_weight_again_in_the_backward_pass_and_sums_gradients_in_float32():
    from course_utils.advice.program import FsdpRun

    dist = _dist((8, 1), FSDP)
    as_written = read_step(mlp_block(width=D), dist, (8 * 1024, D))
    as_run = read_step(mlp_block(width=D), dist, (8 * 1024, D), fsdp=FsdpRun(regather=True, reduce_bytes=4))
    written, run = ({(t.kind, t.pass_): t for t in p.transfers} for p in (as_written, as_run))
    assert ("all-gather", "backward") not in written  # XLA's CPU program keeps each gathered weight
    assert run["all-gather", "backward"].sent == run["all-gather", "forward"].sent == written["all-gather", "forward"].sent
    # the gradients (bf16 as the program computes them) summed in float32, as FSDP2 and torchtitan do: twice the bytes
    assert run["reduce-scatter", "backward"].sent == pytest.approx(2 * written["reduce-scatter", "backward"].sent, rel=1e-3)
    # the book's FSDP critical batch still holds: the backward pass's gather and scatter meet twice the compute
    assert _critical_batch(FSDP, H100_NODE) == pytest.approx(2200 * RING, rel=0.03)


def test_a_step_waiting_longer_on_the_optimizers_collectives_than_it_computes_is_communication_bound():
    from course_utils.advice.estimate import StepTime

    compute = {"forward": 1.0, "backward": 2.0}
    hidden = StepTime(compute, {"forward": 0.5, "backward": 1.5, "other": 2.0})  # waits 2.0 s, computes 3.0 s
    waiting = StepTime(compute, {"forward": 0.5, "backward": 1.5, "other": 3.5})  # ZeRO's gathers after the update
    assert (hidden.bound, hidden.step) == ("compute", 5.0)
    assert (waiting.bound, waiting.exposed) == ("communication", 3.5)
