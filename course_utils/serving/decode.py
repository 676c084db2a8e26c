"""A decode step of a real model's size, compiled shape-only, and its two clocks on named hardware.

A decode step makes one token for every sequence of the batch. It reads every weight a device holds and the
whole of its cache once, and does about two FLOPs per weight for each sequence. So it takes at least the bytes
it reads over the memory bandwidth (`hardware.DeviceSet.memory_bytes_per_second`), and at least the FLOPs of its
products over the peak rate (`decode_time`); for small batches the first is longer: the step is
**memory-bound**. `read_decode` compiles the step of a shape-only model (nothing allocated) and reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from course_utils.serving.cache import DEFAULT_CACHE_AXES, cache_bytes, kv_cache_shape
from course_utils.serving.programs import decode_step, read_program


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
        flops: FLOPs of its matrix products per device (`programs.product_flops`).
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
    from course_utils.memory.presets import causal_lm_of, shape_only_backbone

    name, backbone_class, config = _backbone_of(model)
    axes = DEFAULT_CACHE_AXES if cache_layout is None else tuple(cache_layout)
    depth = config["num_layers"]
    one, two = (_read_one(causal_lm_of(shape_only_backbone(backbone_class, {**config, "num_layers": n, "dtype": dtype})),
                          distribution, batch, tokens, axes) for n in (1, 2 if depth > 1 else 1))

    def grow(a, b):  # the whole depth: the first block, and the second block's share for every further one
        return a + (depth - 1) * (b - a)

    how = "compiled whole" if depth <= 2 else f"compiled with 1 and 2 of its {depth} blocks, each further one as the second"
    cache = kv_cache_shape({**config, "num_layers": depth}, batch=batch, tokens=tokens)
    return DecodeProgram(name, tuple(distribution.device_mesh.shape), batch, tokens, int(grow(one[0], two[0])),
                         cache_bytes(cache, _layout(axes, distribution), dtype=_compute_dtype(dtype)),
                         float(grow(one[2], two[2])), _grown(one[3], two[3], grow), how)


def _backbone_of(model) -> tuple:
    """(name, backbone class, config) of a preset name or a keras-hub backbone."""
    from course_utils.memory.presets import PRESETS

    if isinstance(model, str) and model in PRESETS:
        return model, PRESETS[model].backbone_class(), dict(PRESETS[model].config)
    if hasattr(model, "get_config") and "num_layers" in model.get_config():
        return type(model).__name__, type(model), model.get_config()
    raise ValueError(f"model is a preset name ({', '.join(sorted(PRESETS))}) or a keras-hub backbone. "
                     f"Received: {model!r}.")


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
