"""What `advise` is given, checked before anything compiles: each argument refused with what was received and what
to give (the device set and its devices, the model, the batch, the layouts, the mesh shapes, the program, the
levers)."""

from __future__ import annotations

from course_utils.advice.candidates import BUILT_IN, MESH_AXES, mesh_shapes as every_shape
from course_utils.advice.levers import ATTENTION, Levers
from course_utils.advice.program import FsdpRun
from course_utils.hardware import DeviceSet
from course_utils.mesh import mesh_shapes as grids

LARGEST = 2**31 - 1  # JAX sizes an array's dimension, and counts its elements here, with a 32-bit integer


def whole_number(name: str, value, what: str, *, tokens: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} is {what}, a whole number above 0. Received: {name}={value!r}.")
    if value * tokens > LARGEST:
        raise ValueError(f"{name}={value:,} makes arrays of {value * tokens:,} elements; JAX counts an array's "
                         f"elements with a 32-bit integer (at most {LARGEST:,}). Give a smaller {name}.")


def efficiency_of(efficiency) -> float:
    """The share of peak FLOP/s, checked before anything compiles: a number above 0 and at most 1."""
    if not isinstance(efficiency, (int, float)) or isinstance(efficiency, bool) or not 0 < efficiency <= 1:
        raise ValueError(f"efficiency is the share of peak FLOP/s the products reach, a number above 0 and at most "
                         f"1 (0.4: 40 % MFU). Received: efficiency={efficiency!r}.")
    return float(efficiency)


def checked_layouts(layouts) -> dict | None:
    """Your layouts, `{name: rules or function}`, checked before anything compiles: a dict whose names are text
    and not the advisor's own, each value a dict of rules naming the axes ("batch", "model") or a function."""
    if layouts is None:
        return None
    if not isinstance(layouts, dict):
        raise TypeError(f"layouts is a dict {{name: rules}}, each rules a dict {{key: axes}} naming {MESH_AXES} or a "
                        f"function mesh -> LayoutMap, e.g. layouts={{'mine': {{'.*kernel': (None, 'model')}}}}. "
                        f"Received a {type(layouts).__name__}: {layouts!r:.60}.")
    for name, rules in layouts.items():
        if not isinstance(name, str) or name in BUILT_IN:
            what = "the name of one of the advisor's own" if name in BUILT_IN else "not text"
            raise ValueError(f"layouts names your own layouts; {name!r} is {what} ({', '.join(BUILT_IN)}), which it "
                             f"would replace. Give it another name, e.g. 'mine'.")
        if isinstance(rules, dict):
            for key, axes in rules.items():
                entries = axes if isinstance(axes, (tuple, list)) else (axes,)
                wrong = [a for e in entries for a in (e if isinstance(e, (tuple, list)) else (e,))
                         if a is not None and a not in MESH_AXES]
                if wrong:
                    raise ValueError(f"layouts[{name!r}][{key!r}] names {wrong}, not axes of the advisor's meshes "
                                     f"{MESH_AXES}. Use those names (or None for a dimension kept whole).")
        elif not callable(rules):
            raise TypeError(f"layouts[{name!r}] is a dict of rules {{key: axes}} naming {MESH_AXES} or a function "
                            f"mesh -> LayoutMap. Received a {type(rules).__name__}.")
    return layouts


def target_of(program: str, devices: DeviceSet):
    """What to compile each candidate's own program for: None (XLA's CPU program alone), ("tpu", the slice) or
    ("gpu", the device set); checks now, not per candidate, that the compiler is there and knows the target."""
    if not isinstance(program, str) or program not in ("cpu", "tpu", "gpu"):
        raise ValueError(f"program is 'cpu' (XLA's CPU program, corrected), 'tpu' (a TPU slice's own, compiled by "
                         f"libtpu) or 'gpu' (a GPU server's own, compiled by XLA's GPU compiler). Received: "
                         f"program={program!r}.")
    if program == "cpu":
        return None
    if program == "gpu":
        from course_utils.advice.gpu import _plugin, target_config

        if devices.kind != "gpu":
            raise ValueError(f"program='gpu' compiles for GPUs; {devices.name} is a {devices.kind.upper()} set. Use "
                             f"program='cpu', or program='tpu' for a TPU slice.")
        target_config(devices)  # a GPU the course can describe to XLA
        _plugin()  # the CUDA plugin installed (make gpu-targets)
        return "gpu", devices
    if devices.topology is None:
        raise ValueError(f"program='tpu' compiles for a TPU slice; {devices.name} is not one (a {devices.kind.upper()} "
                         f"set without a topology). Use program='cpu', or a TPU set such as 'v5e-8'.")
    from course_utils.advice.tpu import topology_devices

    topology_devices(devices.topology)  # libtpu missing or the slice unknown: said now, not per candidate
    return "tpu", devices.topology


def model_of(model, dtype: str):
    """(the model to lay out, whether it is a keras-hub backbone trained as a causal language model)."""
    import keras

    from course_utils.memory.presets import PRESETS, Preset, abstract_model

    if isinstance(model, (str, Preset)):
        if str(getattr(model, "name", model)) not in PRESETS:
            raise ValueError(f"model is a preset name, one of {sorted(PRESETS)}, a keras-hub backbone or a compiled "
                             f"Keras model. Received: model={model!r}.")
        return abstract_model(model, dtype=dtype), True
    if isinstance(model, keras.Model) and language_backbone(model):
        return model, True
    if isinstance(model, keras.Model):
        from course_utils.guards import require_compiled

        require_compiled(model, "advise")
        if not model.inputs:
            raise ValueError(f"advise reads the shape of what {model.name!r} takes from its inputs, and it has none: "
                             f"a subclassed model. Build it as a functional or Sequential model (keras.Input first).")
        return model, False
    raise TypeError(f"model is a preset name, a keras-hub backbone or a compiled Keras model. Received a "
                    f"{type(model).__name__}.")


def language_backbone(model) -> bool:
    """Whether `model` is a keras-hub backbone that keras-hub trains as a causal language model (a `...CausalLM`
    of its name, or of the keras-hub backbone it derives from, exists: Gemma, Llama, GPT-2, OPT ...); with an
    official layout map or without one."""
    import keras_hub

    from course_utils.memory.presets import causal_lm_class

    return isinstance(model, keras_hub.models.Backbone) and causal_lm_class(type(model)) is not None


def enough_devices(devices: DeviceSet) -> None:
    import jax

    have = len(jax.devices())
    if have != devices.devices:
        raise ValueError(f"{devices.name} has {devices.devices} devices and the advisor compiles for all of them; this "
                         f"kernel has {have}. Call setup_devices({devices.devices}) in a fresh kernel, or choose a set "
                         f"of {have}.")


def checked_shapes(mesh_shapes, devices: int):
    if mesh_shapes is None:
        return None
    valid = every_shape(devices)
    shapes = [tuple(s) if isinstance(s, (tuple, list)) else s for s in mesh_shapes]
    valid_hybrid = grids(devices, 3)  # (replica, batch, model)
    wrong = [s for s in shapes if s not in valid and s not in valid_hybrid]
    if wrong or not shapes:
        raise ValueError(f"mesh_shapes are (batch, model) shapes of {devices} devices: {valid}, or (replica, batch, "
                         f"model) shapes for HSDP, e.g. {(2, devices // 2, 1)}. Received: mesh_shapes={mesh_shapes!r}.")
    return shapes


def checked_only(only, layouts: dict | None) -> tuple[str, ...] | None:
    """The layouts to try, by name (the advisor's own, `BUILT_IN`, or yours in `layouts`), checked: None tries all."""
    if only is None:
        return None
    names = (only,) if isinstance(only, str) else tuple(only) if isinstance(only, (tuple, list)) else None
    known = (*BUILT_IN, *(layouts or {}))
    unknown = [n for n in names or () if n not in known]
    if not names or unknown:
        raise ValueError(f"only names the layouts to try, some of {known}. Received: only={only!r}"
                         f"{f' ({unknown[0]!r} is none of them)' if unknown else ''}.")
    return names


def levers_of(attention, remat, micro_batch, *, batch: int, seq: int | None, language: bool) -> Levers:
    """The levers a run pulls, checked: `attention` one of `ATTENTION`, `remat` True or False, `micro_batch` a
    whole number that divides the batch; the first two need a language model's blocks and a sequence that divides
    by 4 (the fits compile at s/4 and shorter)."""
    if attention not in ATTENTION:
        raise ValueError(f"attention is one of {ATTENTION}: 'fused' counts no score kept (a fused kernel, as GPUs and "
                         f"TPUs run attention). Received: attention={attention!r}.")
    if not isinstance(remat, bool):
        raise ValueError(f"remat is True (each block rematerialised) or False. Received: remat={remat!r}.")
    if micro_batch is not None:
        whole_number("micro_batch", micro_batch, "the rows of one micro-step")
        if batch % micro_batch:
            raise ValueError(f"micro_batch={micro_batch} does not divide the batch of {batch}: give one that does "
                             f"(gradient accumulation runs batch / micro_batch micro-steps).")
    levers = Levers(attention, remat, micro_batch)
    if levers.memory and not language:
        raise ValueError("attention='fused' and remat=True act on a language model's blocks and sequence: give a "
                         "keras-hub backbone or preset (any model takes micro_batch=).")
    if levers.memory and (seq < 16 or seq % 4):
        raise ValueError(f"attention='fused' and remat=True fit the step's memory from compiles at seq/4, seq/2 and "
                         f"seq: give a seq that divides by 4, at least 16. Received: seq={seq}.")
    return levers


REDUCE = {"float32": 4, "bfloat16": 2, "as computed": 0}


def fsdp_run_of(regather, reduce_dtype) -> FsdpRun:
    """How the run sends what FSDP sends: `regather` True (ZeRO-3, PyTorch FSDP's default) or False, and
    `reduce_dtype` one of `REDUCE`."""
    if not isinstance(regather, bool):
        raise ValueError(f"regather is True (ZeRO-3: each weight gathered again in the backward pass) or False. "
                         f"Received: regather={regather!r}.")
    if reduce_dtype not in REDUCE:
        raise ValueError(f"reduce_dtype is the type gradients are summed in over the batch axis, one of "
                         f"{tuple(REDUCE)}. Received: reduce_dtype={reduce_dtype!r}.")
    return FsdpRun(regather, REDUCE[reduce_dtype])
