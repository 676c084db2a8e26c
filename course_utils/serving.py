"""Serving a sharded model: the KV cache's shape and bytes per device, what a load holds at its peak, and the
time a decode step must take on named hardware.

Derived in notebook 13, whose cells write the serving step by hand (`decode_step` is the same step) and run it
on a tiny keras-hub Gemma; these functions ask the same questions of a real model's size, shape-only.

A keras-hub language model keeps its KV cache as one array, `(batch, layers, 2, tokens, key/value heads,
head_dim)` (the 2: keys and values; `kv_cache_shape`). A decode step makes one token for every sequence of the
batch: it reads every weight a device holds and the whole of its cache once, and does about two FLOPs per
weight for each sequence. So its time is at least the bytes it reads over the device's memory bandwidth
(`hardware.DeviceSet.memory_bytes_per_second`), and at least its FLOPs over the peak rate (`decode_time`): for
small batches the first is longer, the step is **memory-bound**. `read_decode` compiles the step of a shape-only
model (nothing allocated) and reads what it reads and computes per device.

Loading (`loading_peaks`): the bytes the fullest device holds at the peak of three ways to bring a checkpoint
into a layout, from shapes and layouts alone, each route as Keras 3.15 and keras-hub 0.32 take it (the tests
check each against a real load).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from course_utils.placements import per_device, planned_placement

CACHE_DIMS = ("batch", "layers", "key/value", "tokens", "kv_heads", "head_dim")
DEFAULT_CACHE_AXES = ("batch", None, None, None, "model", None)  # sequences over batch, heads over model


def cache_dims(model) -> tuple[int, int, int]:
    """(layers, key/value heads, head_dim) of a keras-hub language model, its backbone, or a config dict.

    A config names `num_layers` and `num_key_value_heads`, and `head_dim` (Gemma) or `hidden_dim` and
    `num_query_heads` (Llama, Qwen: head_dim = hidden_dim // num_query_heads).
    """
    config = model if isinstance(model, dict) else getattr(model, "backbone", model).get_config()
    try:
        head_dim = config.get("head_dim") or config["hidden_dim"] // config["num_query_heads"]
        return int(config["num_layers"]), int(config["num_key_value_heads"]), int(head_dim)
    except (KeyError, TypeError):
        raise ValueError("Pass a keras-hub language model, its backbone, or a config with num_layers, "
                         "num_key_value_heads and head_dim (or hidden_dim and num_query_heads). Received a config "
                         f"with keys {sorted(config)}.") from None


def kv_cache_shape(model, *, batch: int, tokens: int) -> tuple[int, ...]:
    """The shape of keras-hub's KV cache for `batch` sequences of `tokens`: (batch, layers, 2, tokens, kv_heads,
    head_dim), as `GemmaCausalLM._build_cache` (and Llama's, Qwen's) makes it.

    Example:
        >>> kv_cache_shape({"num_layers": 80, "num_key_value_heads": 8, "head_dim": 128}, batch=1, tokens=8192)
        (1, 80, 2, 8192, 8, 128)
    """
    for name, value in (("batch", batch), ("tokens", tokens)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} is a whole number of at least 1. Received: {name}={value!r}.")
    layers, heads, head_dim = cache_dims(model)
    return (batch, layers, 2, tokens, heads, head_dim)


def cache_bytes_per_token(model, dtype="bfloat16") -> int:
    """Bytes of KV cache one token of one sequence adds: 2 (keys and values) x layers x kv_heads x head_dim
    x the dtype's size (*How to Scale Your Model*'s 2 * K * H * L, in bytes)."""
    layers, heads, head_dim = cache_dims(model)
    return 2 * layers * heads * head_dim * np.dtype(dtype).itemsize


def cache_bytes(shape, layout, *, dtype="bfloat16") -> int:
    """Bytes of the cache the fullest device holds under `layout` (a TensorLayout or a JAX sharding); JAX
    decides which block each device holds (`planned_placement`), and refuses a layout that does not divide."""
    return planned_placement(tuple(shape), layout, dtype=dtype, name="KV cache").largest_shard_bytes


@dataclass(frozen=True)
class LoadingPeaks:
    """Bytes the fullest device holds at the peak of each way to load a model into a layout.

    Attributes:
        blocks: Its blocks of every weight: what it holds once the load is over.
        largest: The largest weight, whole.
        largest_path: That weight's path.
    """

    blocks: int
    largest: int
    largest_path: str

    @property
    def whole_then_split(self) -> int:
        """`from_preset` (a `.weights.h5` file): the model is built under the layout (its blocks), then each
        weight is read whole and made a whole array on the default device before `device_put` splits it: that
        device holds its blocks and the largest weight whole at once."""
        return self.blocks + self.largest

    @property
    def blocks_into_a_built_model(self) -> int:
        """`model.load_weights(<Orbax folder>)`: each device reads only its blocks, but into new arrays while
        the built model still holds its initial values: its blocks twice."""
        return 2 * self.blocks

    @property
    def blocks_into_shape_only(self) -> int:
        """Orbax reading each device's blocks into the arrays a stateless serving step takes, the model shape-only
        (no initial values): its blocks once."""
        return self.blocks

    def rows(self) -> list[tuple[str, int]]:
        return [("whole, then split (from_preset, .weights.h5)", self.whole_then_split),
                ("blocks, into a built model (load_weights of an Orbax folder)", self.blocks_into_a_built_model),
                ("blocks, into shape-only weights (Orbax, stateless step)", self.blocks_into_shape_only)]


def loading_peaks(model, distribution) -> LoadingPeaks:
    """The peak bytes per device of three ways to load `model`'s weights under `distribution`, from shapes.

    Args:
        model: A Keras model, real or shape-only (`abstract_model`): its weights' paths, shapes and dtypes.
        distribution: The distribution that lays the weights out (Keras's `get_variable_layout`).
    """
    placements = [planned_placement(tuple(v.shape), distribution.get_variable_layout(v), dtype=v.dtype, name=v.path)
                  for v in model.weights]
    largest = max(placements, key=lambda p: p.total_bytes)
    return LoadingPeaks(max(per_device(placements).values()), largest.total_bytes, largest.name)


def decode_step(causal_lm, cache_layout=None):
    """The serving step of notebook 13, jitted: `step(weights, token_ids, cache, index) -> (logits of the last
    token, cache)`. The model's own `call_with_cache` runs statelessly on `weights` (arrays in the order of
    `causal_lm.weights`), as keras-hub's `generate` runs it; `cache_layout` (a TensorLayout), when given, pins the
    cache it returns. The cache is donated: XLA may write the new cache where the old one was."""
    import jax
    import keras

    def step(weights, token_ids, cache, index):
        with keras.StatelessScope(state_mapping=zip(causal_lm.weights, weights)):
            logits, _, cache = causal_lm.call_with_cache(token_ids, cache, index)
        if cache_layout is not None:
            cache = keras.distribution.distribute_tensor(cache, cache_layout)
        return logits[:, -1], cache

    return jax.jit(step, donate_argnums=2)


@dataclass(frozen=True)
class DecodeProgram:
    """What the fullest device reads and computes in one compiled decode step (one token for every sequence).

    Attributes:
        model: The model's name.
        mesh_shape: The mesh it is laid out on.
        batch: Sequences decoded together.
        tokens: Tokens the cache holds for each sequence (the context).
        weight_bytes: Bytes of weights one device holds, each read once per step.
        cache_bytes: Bytes of KV cache one device holds, read once per step.
        flops: Floating-point operations per device (`cost_analysis()["flops"]`).
        collectives: `communication.hlo.Collective`s of one step, summed by kind and mesh axes.
        how: How it was found ("compiled whole", or from one and two blocks).
    """

    model: str
    mesh_shape: tuple[int, ...]
    batch: int
    tokens: int
    weight_bytes: int
    cache_bytes: int
    flops: float
    collectives: tuple = ()
    how: str = "compiled whole"

    @property
    def bytes_read(self) -> int:
        """Weights and cache: what the step reads from the device's memory for each token it makes."""
        return self.weight_bytes + self.cache_bytes


def read_decode(model, distribution, *, batch: int, tokens: int, dtype="bfloat16", cache_layout=None
                ) -> DecodeProgram:
    """Compiles the decode step of a keras-hub language model, shape-only, and reads it per device.

    Args:
        model: A preset name of `memory.presets.PRESETS` ("gemma_7b_en") or a keras-hub backbone (built shape-only
            by `abstract_model`, or real: only its config is read).
        distribution: The `ModelParallel` it is served under (its mesh names the cache's axes).
        batch: Sequences decoded together.
        tokens: Tokens of context the cache holds for each sequence.
        dtype: The weights' and the cache's dtype policy.
        cache_layout: The cache's mesh axes, one per cache dimension (`CACHE_DIMS`); defaults to
            `DEFAULT_CACHE_AXES`, sequences over "batch" and heads over "model".

    A model of several alike blocks is compiled with one and with two, and the second block's share counted for
    every further one (seconds instead of minutes); nothing is allocated.
    """
    from course_utils.memory.presets import PRESETS, causal_lm_of, shape_only_backbone

    name = model if isinstance(model, str) else type(model).__name__
    backbone_class, config = ((PRESETS[model].backbone_class(), dict(PRESETS[model].config)) if model in PRESETS
                              else (type(model), model.get_config()) if hasattr(model, "get_config") else (None, None))
    if backbone_class is None:
        raise ValueError(f"model is a preset name ({', '.join(sorted(PRESETS))}) or a keras-hub backbone. "
                         f"Received: {model!r}.")
    axes = DEFAULT_CACHE_AXES if cache_layout is None else tuple(cache_layout)
    depth = config["num_layers"]
    programs = [_read_one(causal_lm_of(shape_only_backbone(backbone_class, {**config, "num_layers": n, "dtype": dtype})),
                          distribution, batch, tokens, axes) for n in sorted({1, min(2, depth)})]
    one, two = programs[0], programs[-1]
    grow = (lambda a, b: a + (depth - 1) * (b - a))
    collectives = _grown(one[3], two[3], grow)
    how = "compiled whole" if depth <= 2 else f"compiled with 1 and 2 of its {depth} blocks, each further one as the second"
    cache = kv_cache_shape({**config, "num_layers": depth}, batch=batch, tokens=tokens)
    return DecodeProgram(name, tuple(distribution.device_mesh.shape), batch, tokens,
                         int(grow(one[0], two[0])) if depth > 2 else two[0],
                         cache_bytes(cache, _layout(axes, distribution), dtype=_compute_dtype(dtype)),
                         float(grow(one[2], two[2])) if depth > 2 else two[2], collectives, how)


def _compute_dtype(dtype) -> str:
    import keras

    return keras.DTypePolicy(dtype).compute_dtype


def _layout(axes, distribution):
    from keras.distribution import TensorLayout

    return TensorLayout(tuple(axes), distribution.device_mesh)


def _read_one(causal_lm, distribution, batch, tokens, axes) -> tuple:
    """(weight bytes, cache bytes, FLOPs, collectives) per device of one compiled decode step."""
    import jax

    def shaped(shape, dtype, layout):
        return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=layout.backend_layout)

    weights = [shaped(v.shape, v.dtype, distribution.get_variable_layout(v)) for v in causal_lm.weights]
    cache = shaped(kv_cache_shape(causal_lm, batch=batch, tokens=tokens), causal_lm.compute_dtype,
                   _layout(axes, distribution))
    token_ids = shaped((batch, 1), "int32", distribution.get_data_layout((batch, 1)))
    with distribution.scope():
        program = read_program(decode_step(causal_lm, _layout(axes, distribution)), weights, token_ids, cache,
                               tokens - 1, mesh=distribution.device_mesh)
    held = [_shard_bytes(a) for a in (*weights, cache)]
    return sum(held[:-1]), held[-1], program.flops, program.collectives


@dataclass(frozen=True)
class ProgramReading:
    """One compiled program, read per device: its collectives (summed by kind and mesh axes) and the FLOPs of its
    matrix products."""

    collectives: tuple
    flops: float

    def __str__(self) -> str:
        return ", ".join(f"{c.count} {c.kind} over {'+'.join(c.axes)} ({c.bytes:,} B)" for c in self.collectives) \
            or "no collectives"


def read_program(step, *args, mesh) -> ProgramReading:
    """Compiles one call of a jitted `step` on `args` (arrays, or `jax.ShapeDtypeStruct`s with their shardings)
    to be read, never run (`xla_settings.READING_COMPILE`), and reads, per device, its collectives over the axes
    of `mesh` (a Keras `DeviceMesh`) and the FLOPs of its matrix products (`product_flops`)."""
    from course_utils.communication.hlo import collective_ops, summed
    from course_utils.xla_settings import READING_COMPILE

    text = step.lower(*args).compile(READING_COMPILE).as_text()
    ops = summed(collective_ops(text, tuple(mesh.axis_names), tuple(mesh.shape)))
    return ProgramReading(tuple(ops), product_flops(text))


_DIMS = re.compile(r"\[([0-9,]*)\]")


def product_flops(hlo: str) -> float:
    """FLOPs of the matrix products (`dot`) of a compiled program, per device: 2 x each result's elements x
    the size of its contracted dimensions, times the runs of its computation.

    Only the products run at a chip's peak rate. XLA's `cost_analysis()` also counts one FLOP per element of
    every elementwise operation, and XLA CPU updates a decode step's cache with selects over the whole cache:
    counted so, 4,096 tokens of context would double Gemma 7B's FLOPs, for work that is memory traffic.
    """
    from course_utils.communication.runs import read_computations, runs_of

    order, instructions, roots, entry = read_computations(hlo.splitlines())
    runs = runs_of(order, instructions, roots, entry)
    total = 0.0
    for computation, found in instructions.items():
        for opcode, operands, line in found.values():
            if opcode != "dot" or not operands or operands[0] not in found:
                continue
            result = _dims(line.split("=", 1)[1])
            lhs = _dims(found[operands[0]][2].split("=", 1)[1])
            contracted = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", line)
            size = math.prod(lhs[int(d)] for d in contracted.group(1).split(",") if d) if contracted else 1
            total += 2 * math.prod(result) * size * runs.get(computation, 1)
    return total


def _dims(text: str) -> tuple[int, ...]:
    """The dimensions of the first array type written in `text` ("f32[16,512]{1,0} dot(...)" -> (16, 512))."""
    found = _DIMS.search(text)
    return tuple(int(d) for d in found.group(1).split(",") if d) if found else ()


def _shard_bytes(array) -> int:
    return math.prod(array.sharding.shard_shape(array.shape)) * np.dtype(array.dtype).itemsize


def _grown(one, two, grow) -> tuple:
    """Collectives of the whole depth: each (kind, axes) count and bytes grown from one and two blocks."""
    from dataclasses import replace

    first, second = {(c.kind, c.axes): c for c in one}, {(c.kind, c.axes): c for c in two}
    found = []
    for key in dict.fromkeys([*first, *second]):
        a = first.get(key) or replace(second[key], count=0, bytes=0)
        b = second.get(key) or replace(a, count=0, bytes=0)
        found.append(replace(a, count=int(grow(a.count, b.count)), bytes=int(grow(a.bytes, b.bytes))))
    return tuple(c for c in found if c.count)


@dataclass(frozen=True)
class DecodeTime:
    """The two clocks of one decode step on named hardware: reading memory and computing.

    Attributes:
        devices: The device set's name.
        bytes_read: Bytes one device reads (weights and KV cache).
        flops: FLOPs one device computes.
        memory: Seconds to read them: bytes_read / the memory bandwidth.
        compute: Seconds to compute: flops / (peak FLOP/s x efficiency).
    """

    devices: str
    bytes_read: int
    flops: float
    memory: float
    compute: float

    @property
    def seconds(self) -> float:
        """The step at best: the longer of the two clocks (each overlapping the other completely)."""
        return max(self.memory, self.compute)

    @property
    def bound(self) -> str:
        return "memory" if self.memory >= self.compute else "compute"


def decode_time(bytes_read: float, flops: float, devices, *, efficiency: float = 1.0) -> DecodeTime:
    """The time a decode step takes at best on a named device set: bytes over memory bandwidth, FLOPs over peak.

    Args:
        bytes_read: Bytes one device reads per step (`DecodeProgram.bytes_read`).
        flops: FLOPs one device computes per step (`DecodeProgram.flops`).
        devices: A name of `hardware.DEVICE_SETS` ("8xH100-80GB") or a `DeviceSet` with a memory bandwidth.
        efficiency: The share of the peak FLOP/s the products reach (1.0: the peak).

    Example:
        >>> decode_time(16e9, 0.0, "v5e-8").memory  # the book's 16 GB / 8.2e11 B/s
        0.0195...
    """
    from course_utils.hardware import device_set

    chosen = device_set(devices)
    if chosen.memory_bytes_per_second is None:
        raise ValueError(f"{chosen.name} gives no memory bandwidth: make a DeviceSet with memory_bytes_per_second=.")
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency is a share of the peak, above 0 and at most 1. Received: {efficiency!r}.")
    return DecodeTime(chosen.name, int(bytes_read), float(flops), bytes_read / chosen.memory_bytes_per_second,
                      flops / (chosen.flops_per_second * efficiency))


def decode_points(programs, devices) -> list[tuple[int, float, float, float]]:
    """(batch, compute seconds, memory seconds, memory seconds of the weights alone) of decode programs on a
    device set, in order of batch: what `viz.draw_decode` draws and `catch_up` reads."""
    points = []
    for program in sorted(programs, key=lambda p: p.batch):
        time = decode_time(program.bytes_read, program.flops, devices)
        points.append((program.batch, time.compute, time.memory, decode_time(program.weight_bytes, 0.0, devices).memory))
    return points


def catch_up(points, *, with_cache: bool = False) -> float | None:
    """The batch at which computing takes as long as reading the weights (`with_cache`: the weights and the
    cache), from two or more `decode_points`, each clock a line through the first and last point; None when
    computing never catches up."""
    from course_utils.advice.estimate import crossover

    return crossover([(b, compute, memory if with_cache else weights) for b, compute, memory, weights in points])
