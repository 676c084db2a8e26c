"""The advisor against runs that happened: llm-foundry's MPT runs on 8 x H100 80GB in bf16 (mosaicml/llm-foundry,
scripts/train/benchmarking/README.md, "H100 80GB BF16"), asked with each run's settings (FSDP on (8, 1), fused
attention, its micro-batch, its activation checkpointing) and read from the H100's own program. Every one of those
runs fit in 80 GB; the advisor must say so, and not by counting less than a step must hold. The whole table:
`python -m course_utils.course bench published-rows` (docs/BENCHMARKS.md)."""

import pytest

from course_utils.advice import gpu
from course_utils.course.bench.published_rows import GPUS, MPT, ROWS, VOCABULARY, asked, mpt_stand_in

GIB = 2**30


def _row(size: str, seq: int):
    return next(r for r in ROWS if r[0] == size and r[1] == seq)


def floor_bytes(size: str, seq: int, micro: int) -> float:
    """Bytes a GPU holds at the least in the row's step: its eighth of the weights, gradients and Adam's two moments
    (16 bytes a parameter in mixed precision), each block's input (bf16, all of them kept with or without
    rematerialisation) and the logits of its micro-batch (bf16)."""
    hidden, blocks, _ = MPT[size]
    tokens = micro * seq
    return mpt_stand_in(size).count_params() * 16 / GPUS + blocks * tokens * hidden * 2 + tokens * VOCABULARY * 2


@pytest.mark.skipif(not gpu.available(), reason="the CUDA plugin is not installed (make gpu-targets)")
@pytest.mark.compiles_long  # a 760M block compiled by XLA's GPU compiler at three points (about 110 s cold)
def test_a_published_run_without_checkpointing_fits_as_it_did():
    # 96 sequences of 512 tokens a GPU, no checkpointing: XLA CPU's program, corrected, said 132.0 GiB. Of the 37
    # rows, one is still judged over the device from the GPU's program (3b at 8,192 x 3: 80.3 GiB, docs/BENCHMARKS.md)
    size, seq = "760m", 512
    row = _row(size, seq)
    _, _, micro, _, _, published = row
    fsdp = asked(row)
    assert fsdp.verdict in ("fits", "tight"), (fsdp.memory_gib, fsdp.program.memory.how)
    assert fsdp.program.memory.peak > floor_bytes(size, seq, micro)
    assert "with the step's tokens a device" in fsdp.program.memory.how
    assert published > 0 and fsdp.tokens_per_second > published  # the roofline is above what the run reached
