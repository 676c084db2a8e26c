"""The advisor against runs that happened: `python -m course_utils.course bench published-rows [--rows N]`.

llm-foundry's published table of MPT training runs on 8 x H100 80GB in bf16 (mosaicml/llm-foundry,
scripts/train/benchmarking/README.md, "H100 80GB BF16": 37 rows, MPT 760m to 30b, sequences of 512 to 65,536
tokens, FSDP FULL_SHARD, each row's micro-batch, gradient accumulation and activation checkpointing). Each row
is asked of the advisor with the settings the run used: FSDP over the 8 GPUs on a (8, 1) mesh, attention fused
(MPT runs FlashAttention), its micro-batch, its rematerialisation, and the H100's own program (`--program gpu`, the
default: XLA's GPU compiler through JAX's CUDA plugin, `make gpu-targets`; `--program cpu` reads XLA's CPU program,
corrected, which keeps about twice the activations). MPT is not a keras-hub model: a Llama backbone of MPT's sizes
stands in (its width, depth, heads and vocabulary; a gated feed-forward of 8/3 the width, three matrices for MPT's
two of 4x: the same weights), so its activations are a Keras Llama's, not MPT's: on the GPU's program about 31
bytes a token and unit of width per block (30.9 for 760m, `advice.levers`; 38.3 for 3b at 8,192 x 3), where
Korthikanti et al. (2022) count 34 for a GPT block in 16 bits, 32 without dropout's masks. `--stand-in mpt` asks
MPT's own block written with Keras layers instead (`bench.mpt`): XLA's GPU program keeps more of it (41.5 for 3b),
so no Keras model here keeps what PyTorch kept of MPT's.

It prints, per row: the advisor's GiB per device and verdict for FSDP,
its tokens per second per GPU at the roofline, and a prediction: the roofline scaled by one factor calibrated on
a single row (`--calibrate`, 7b at 2,048 tokens by default: the share of the roofline that run reached), set
beside the published figure. Nothing of a row but its settings is given to the advisor, so the errors are the
advisor's: median and largest, and Spearman's rank correlation of predicted and published throughput.
"""

from __future__ import annotations

import argparse
import statistics
import time

# model: (hidden, blocks, heads); MPT's vocabulary is the same for every size
VOCABULARY = 50368
MPT = {"760m": (1536, 24, 12), "1b": (2048, 24, 16), "3b": (2560, 32, 20), "7b": (4096, 32, 32),
       "13b": (5120, 40, 40), "30b": (7168, 48, 56)}
# model, sequence, micro-batch per GPU, gradient accumulation, activation checkpointing, published tokens/s/GPU
ROWS = (
    ("30b", 8192, 1, 21, True, 1384), ("30b", 4096, 1, 21, True, 1802), ("30b", 2048, 3, 21, True, 2002),
    ("30b", 1024, 6, 21, True, 2084), ("13b", 32768, 1, 3, True, 1976), ("13b", 16384, 3, 3, True, 2985),
    ("13b", 4096, 10, 3, True, 4717), ("13b", 2048, 2, 1, False, 4792), ("13b", 1024, 40, 3, True, 5502),
    ("7b", 65536, 1, 2, True, 1956), ("7b", 32768, 2, 2, True, 3318), ("7b", 8192, 8, 2, True, 6935),
    ("7b", 4096, 16, 2, True, 8611), ("7b", 2048, 6, 1, False, 10643), ("7b", 1024, 64, 2, True, 10203),
    ("3b", 65536, 1, 2, True, 3262), ("3b", 32768, 3, 6, True, 5873), ("3b", 16384, 1, 6, False, 11152),
    ("3b", 8192, 3, 6, False, 16578), ("3b", 4096, 5, 6, False, 20964), ("3b", 1024, 20, 6, False, 27046),
    ("3b", 512, 40, 6, False, 27965), ("1b", 65536, 1, 2, True, 5506), ("1b", 32768, 1, 4, False, 12025),
    ("1b", 16384, 2, 4, False, 19649), ("1b", 8192, 3, 4, False, 29157), ("1b", 4096, 7, 4, False, 38535),
    ("1b", 2048, 14, 1, False, 45455), ("1b", 1024, 18, 4, False, 48910), ("1b", 512, 56, 4, False, 52275),
    ("760m", 32768, 1, 2, False, 16291), ("760m", 16384, 3, 2, False, 27815), ("760m", 8192, 6, 2, False, 41825),
    ("760m", 4096, 12, 2, False, 55459), ("760m", 2048, 24, 2, False, 63147), ("760m", 1024, 48, 2, False, 78581),
    ("760m", 512, 96, 2, False, 83749),
)
GPUS = 8


def mpt_stand_in(size: str):
    """A shape-only Llama backbone of MPT-`size`'s width, depth, heads and vocabulary, in mixed bf16."""
    import keras_hub

    from course_utils.memory.presets import abstract_model

    hidden, blocks, heads = MPT[size]
    return abstract_model(keras_hub.models.LlamaBackbone, dict(
        vocabulary_size=VOCABULARY, num_layers=blocks, num_query_heads=heads, num_key_value_heads=heads,
        hidden_dim=hidden, intermediate_dim=round(8 * hidden / 3)), dtype="mixed_bfloat16")


def mpt_itself(size: str):
    """A shape-only MPT-`size` (`bench.mpt.MptBackbone`: MPT's own block written with Keras layers), in mixed bf16."""
    from course_utils.course.bench.mpt import MptBackbone
    from course_utils.memory.presets import abstract_model

    hidden, blocks, heads = MPT[size]
    return abstract_model(MptBackbone, dict(vocabulary_size=VOCABULARY, num_layers=blocks, num_heads=heads,
                                            hidden_dim=hidden), dtype="mixed_bfloat16")


STAND_INS = {"llama": mpt_stand_in, "mpt": mpt_itself}


def asked(row, program: str = "gpu", stand_in: str = "llama"):
    """The advisor's answer for one published row, asked with the run's settings: its FSDP row."""
    from course_utils import advise

    size, seq, micro, accumulation, remat, _ = row
    advice = advise(STAND_INS[stand_in](size), devices=f"{GPUS}xH100-80GB", batch=GPUS * micro * accumulation, seq=seq,
                    mesh_shapes=[(GPUS, 1)], attention="fused", remat=remat, micro_batch=GPUS * micro,
                    program=program, only="FSDP")
    return advice.row("FSDP", (GPUS, 1))


def spearman(a, b) -> float:
    def ranks(values):
        order = sorted(range(len(values)), key=values.__getitem__)
        found = [0.0] * len(values)
        for rank, i in enumerate(order):
            found[i] = float(rank)
        return found

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course bench published-rows",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=len(ROWS), help="only the first N rows (all by default)")
    parser.add_argument("--program", choices=("gpu", "cpu"), default="gpu", help="the program read for memory "
                        "and collectives: the H100's own (make gpu-targets) or XLA's CPU program, corrected")
    parser.add_argument("--stand-in", choices=sorted(STAND_INS), default="llama", help="the model asked for each "
                        "row: keras-hub's Llama of MPT's sizes (a gated feed-forward of 8/3 the width), or MPT's own "
                        "block written with Keras layers (bench/mpt.py)")
    parser.add_argument("--calibrate", default="7b:2048", help="the row whose reached share of the roofline "
                        "scales every prediction, model:sequence")
    args = parser.parse_args(argv)
    from course_utils import setup_devices

    setup_devices(GPUS)
    rows = ROWS[:args.rows]
    found, started = [], time.perf_counter()
    print(f"FSDP on (8, 1), memory and collectives from the {args.program.upper()}'s program, "
          f"{'MPT written in Keras' if args.stand_in == 'mpt' else 'a Llama of MPT sizes'} for each row")
    print(f"{'row':25} {'GiB':>6} {'verdict':8} {'roofline':>9} {'published':>9}")
    for row in rows:
        chosen = asked(row, args.program, args.stand_in)
        found.append(chosen)
        print(f"{row[0]:>5} {row[1]:>6} x{row[2]:<3} {'remat' if row[4] else '':6} "
              f"{chosen.memory_gib:6.1f} {chosen.verdict:8} {chosen.tokens_per_second:9,.0f} {row[5]:9,}", flush=True)
    model, seq = args.calibrate.split(":")
    anchor = next((i for i, row in enumerate(rows) if row[0] == model and row[1] == int(seq)), None)
    if anchor is None:
        raise SystemExit(f"--calibrate {args.calibrate}: no such row among the {len(rows)} asked (give --rows that "
                         f"reaches it, or another model:sequence)")
    share = rows[anchor][5] / found[anchor].tokens_per_second
    predicted = [r.tokens_per_second * share for r in found]
    errors = [p / row[5] for p, row in zip(predicted, rows)]
    others = [e for i, e in enumerate(errors) if i != anchor]
    fit = sum(r.verdict in ("fits", "tight") for r in found)
    print(f"\nFSDP fits or fits tight in {fit} of {len(rows)} rows (the runs all fit 80 GB)."
          f"\nCalibrated on {model} at {seq} tokens (the run reached {share:.0%} of the roofline); predicted / "
          f"published over the other {len(others)} rows: median {statistics.median(others):.2f}, from "
          f"{min(others):.2f} to {max(others):.2f}; Spearman's rank correlation "
          f"{spearman(predicted, [row[5] for row in rows]):.3f}. ({time.perf_counter() - started:.0f} s)")
    return 0
