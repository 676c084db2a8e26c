"""Which mesh and layout for my model on my devices? Every candidate compiled, read, timed and ranked.

`advise(model, devices=..., batch=..., seq=...)` compiles one training step of the model under every
candidate (`candidates`: each mesh shape of the device count x each layout that applies), shape-only,
and reads each program (`program.read_step`): the memory a device needs at the step's peak, its FLOPs
and its collectives. For a TPU slice, `program="tpu"` reads the TPU's own program instead (`tpu`, with
libtpu installed), the FLOPs still from the CPU program. The named hardware (`hardware`) turns those into
seconds (`estimate.step_time`), and the candidates are ranked (`ranking.Advice`): those that fit first, fastest
first.

Derived in lesson 10, which draws one candidate's roofline by hand first.
"""

from __future__ import annotations

from course_utils.advice.arguments import (checked_layouts, checked_only, checked_shapes, efficiency_of, enough_devices,
                                           fsdp_run_of, levers_of, model_of, target_of, whole_number)
from course_utils.advice.candidates import Candidate, candidates, mesh_shapes as every_shape
from course_utils.advice.levers import Levers
from course_utils.advice.own_program import OwnProgramOutOfMemory
from course_utils.advice.ranking import Advice, AdviceRow, rank_key, timed_row
from course_utils.advice.steps import Steps
from course_utils.hardware import device_set
from course_utils.memory.fit import CANNOT, NO, POLICIES, cannot_split  # will_it_fit's words


def advise(model, *, devices, batch: int, seq: int | None = None, dtype: str = "mixed_bfloat16",
           layouts: dict | None = None, mesh_shapes=None, efficiency: float = 1.0, program: str = "cpu",
           attention: str = "as compiled", remat: bool = False, micro_batch: int | None = None,
           regather: bool = True, reduce_dtype: str = "float32", only=None) -> Advice:
    """Every mesh shape x layout for `model` on `devices`, compiled, timed and ranked.

    Args:
        model: A keras-hub preset name ("llama3_8b_en", see `PRESETS`), a keras-hub backbone of a causal language
            model (real or shape-only, `abstract_model`; Llama, Gemma, GPT-2 ...), or a compiled Keras model.
        devices: A named device set ("8xH100-80GB", "v5e-8", see `hardware.DEVICE_SETS`) or your own
            `hardware.DeviceSet`. The course's simulated devices must be as many (`setup_devices(n)`).
        batch: The global batch: sequences for a backbone, examples for another model.
        seq: Tokens per sequence (a backbone only).
        dtype: The dtype policy a preset is built in, one of `POLICIES`.
        layouts: Your own layouts, `{name: rules or function mesh -> LayoutMap}`, tried on every shape.
        mesh_shapes: The (batch, model) shapes to try; by default every one of the device count.
        efficiency: The share of peak FLOP/s the products reach (1.0: the roofline).
        program: "cpu": XLA's CPU program, its bytes corrected for the accelerator (`program`). "tpu", for a TPU
            slice (`DeviceSet.topology`): the TPU's own program, compiled by libtpu (`make tpu-targets`; `tpu`),
            for memory and collectives; slower to compile (a 7B block about 25 s). "gpu", for an H100 set: the
            GPU's own program, compiled by XLA's GPU compiler through JAX's CUDA plugin (`make gpu-targets`; `gpu`):
            with the levers, the memory a real run confirms (llm-foundry's published runs; `levers`), where the
            CPU program keeps about twice a block's activations.
        attention: "as compiled" (XLA's CPU program keeps every score) or "fused" (no score kept, as a fused
            kernel runs attention on GPUs and TPUs; `levers`).
        remat: Rematerialise each block: keep its input, recompute the rest in the backward pass (`levers`).
        micro_batch: Run the batch as micro-batches of this many rows (gradient accumulation): memory at the
            micro-batch, every micro-step timed.
        regather: FSDP as PyTorch runs it (ZeRO-3): each weight gathered in the forward pass is gathered again in
            the backward pass (XLA's CPU program keeps it instead); False counts the program's gathers alone.
        reduce_dtype: The type gradients are summed in over the batch axis: "float32" (FSDP2's and torchtitan's),
            "bfloat16", or "as computed" (the type the program computed them in).
        only: The layouts to try, by name ("FSDP", or several: ("FSDP", "ZeRO-2")); by default every one that
            applies. A run whose layout is settled asks for it alone, on every mesh shape, at a fraction of the cost.

    Example:
        >>> advise("gemma_7b_en", devices="8xH100-80GB", batch=16, seq=2048)
        >>> advise("llama3_8b_en", devices="8xH100-80GB", batch=16, seq=8192, attention="fused", remat=True,
        ...        micro_batch=8)
        >>> advise("llama3_8b_en", devices="v5e-8", batch=8, seq=1024, program="tpu")
    """
    devices = device_set(devices)
    if dtype not in POLICIES:
        raise ValueError(f"dtype must be one of {POLICIES}. Received: dtype={dtype!r}.")
    whole_number("batch", batch, "the global batch")
    efficiency = efficiency_of(efficiency)
    layouts = checked_layouts(layouts)
    only = checked_only(only, layouts)
    built, language = model_of(model, dtype)
    if language:
        whole_number("seq", seq, "the tokens per sequence (e.g. seq=2048)", tokens=batch)
    levers = levers_of(attention, remat, micro_batch, batch=batch, seq=seq, language=language)
    fsdp = fsdp_run_of(regather, reduce_dtype)
    enough_devices(devices)
    shapes = checked_shapes(mesh_shapes, devices.devices) or every_shape(devices.devices, devices.nodes)
    target = target_of(program, devices)
    found = [c for c in candidates(built, devices.devices, layouts, shapes) if only is None or c.layout in only]
    steps = Steps(built, batch, seq, language, levers, fsdp)
    rows = [_row(built, steps, c, devices, batch, seq, efficiency, target) for c in found]
    rows.sort(key=rank_key)
    what = f"{batch} x {seq} tokens" if language else f"a batch of {batch}"
    empty = "" if rows else (f"no layout applies to {getattr(built, 'name', 'this model')} on the mesh shapes "
                             f"{shapes}. Try mesh_shapes=None (every shape), or give "
                             f"your own layouts={{'name': rules}}.")
    return Advice(rows, devices=devices, efficiency=efficiency, program=program, empty=empty, levers=levers, title=(
        f"{getattr(built, 'name', 'model')} on {devices.name}, {what}, {built.dtype_policy.name}"
        f"{'' if levers == Levers() else ', ' + levers.describe(batch)}: {len(rows)} candidates ranked by estimated "
        f"step time"))


def _row(model, steps, candidate: Candidate, devices, batch, seq, efficiency, target) -> AdviceRow:
    shape, split = candidate.mesh_shape, candidate.batch_split
    axis = "replica and batch axes" if len(shape) == 3 else "batch axis"
    if batch % split:
        return AdviceRow(candidate.layout, shape, None, None, CANNOT,
                         f"the batch of {batch} does not split over {split} devices of the {axis}")
    micro = steps.levers.micro_batch
    if micro and micro % split:
        return AdviceRow(candidate.layout, shape, None, None, CANNOT,
                         f"a micro-batch of {micro} does not split over {split} devices of the {axis}")
    try:
        program = steps.read(candidate, target)
    except OwnProgramOutOfMemory as error:  # an accelerator's compiler refuses a step that does not fit
        return AdviceRow(candidate.layout, shape, None, None, NO, str(error))
    except Exception as error:
        # the weight, its dimension and the mesh axis, in words, where a weight does not divide; anything else is
        # what it is, the candidate named
        why = cannot_split(model, candidate.distribution())
        if why is None:
            raise RuntimeError(f"advise: the candidate {candidate.layout!r} on {shape} failed while its step was "
                               f"compiled, and no weight fails to divide on that mesh: {type(error).__name__}: "
                               f"{str(error)[:600]}") from error
        return AdviceRow(candidate.layout, shape, None, None, CANNOT, str(why))
    tokens = batch * (seq or 1) / (split * shape[-1])
    return timed_row(AdviceRow(candidate.layout, shape, program, None, "", tokens=tokens,
                            micro_steps=steps.levers.steps(batch)), devices, efficiency)


