"""Serving a sharded model: the KV cache's shape and bytes per device, what a load holds at its peak, a
compiled serving program read per device, and the time a decode step must take on named hardware.

Derived in notebook 13, whose cells write the serving step by hand and run it on a tiny keras-hub Gemma; these
functions ask the same questions of a real model's size, shape-only.

- `cache`: keras-hub's KV cache, `(batch, layers, 2, tokens, key/value heads, head_dim)` (`kv_cache_shape`),
  its bytes per token, and the bytes the fullest device holds under a layout (`cache_bytes`);
- `loading`: the bytes the fullest device holds at the peak of three ways to load a checkpoint
  (`loading_peaks`): whole then split (`from_preset`), blocks into a built model, blocks into shape-only weights;
- `programs`: the serving step (`decode_step`), and one compiled program's collectives and products' FLOPs
  (`read_program`);
- `decode`: a real model's decode step, compiled shape-only (`read_decode`), and its two clocks on named
  hardware, reading memory and computing (`decode_time`, `decode_points`, `catch_up`).
"""

from course_utils.serving.cache import (CACHE_DIMS, DEFAULT_CACHE_AXES, cache_bytes, cache_bytes_per_token, cache_dims,
                                        kv_cache_shape)
from course_utils.serving.decode import DecodeProgram, DecodeTime, catch_up, decode_points, decode_time, read_decode
from course_utils.serving.loading import LoadingPeaks, loading_peaks
from course_utils.serving.programs import ProgramReading, decode_step, product_flops, read_program

__all__ = ["CACHE_DIMS", "DEFAULT_CACHE_AXES", "DecodeProgram", "DecodeTime", "LoadingPeaks", "ProgramReading",
           "cache_bytes", "cache_bytes_per_token", "cache_dims", "catch_up", "decode_points", "decode_step",
           "decode_time", "kv_cache_shape", "loading_peaks", "product_flops", "read_decode", "read_program"]
