"""The advisor's estimate beside published training throughput: `python -m course_utils.course bench published-rows`.

Two published rows of 8 x H100 runs, each estimated by `advise` from its model's compiled step
(shape-only, FSDP over the 8 GPUs: the official map on a (8, 1) mesh with the batch kept split), at an
MFU the row states (the share of peak FLOP/s the products reach, `advise(..., efficiency=)`):

- torchtitan, Llama 3.1 8B, FSDP, sequences of 8,192 tokens, local batch 2, selective activation
  checkpointing, bf16: 5,762 tokens/s per GPU, 33-39 % MFU (torchtitan's published performance
  figures; 36 % used here). The advisor builds Llama 3 8B (the same shapes) without rematerialisation:
  its memory is not the run's, its time is.
- llm-foundry, MPT-7B, FULL_SHARD, sequences of 2,048 tokens, global batch 48, bf16: 10,643 tokens/s
  per GPU, 46 % MFU (llm-foundry's published throughput table). MPT-7B is not a
  keras-hub model: a Llama backbone of MPT's sizes stands in (32 blocks of width 4,096, 32 heads,
  vocabulary 50,432, a feed-forward of 10,922 x 3 matrices for MPT's 16,384 x 2: the same weights).

Prints the estimate at 100 % of peak and at the row's MFU, the published figure, and their ratio.
"""

from __future__ import annotations

import sys

MPT_7B = dict(vocabulary_size=50432, num_layers=32, num_query_heads=32, num_key_value_heads=32, hidden_dim=4096,
              intermediate_dim=10922)
ROWS = (
    # label, model, global batch, seq, published tokens/s/GPU, MFU the row states
    ("torchtitan Llama 3.1 8B, FSDP, 8 x H100", "llama3_8b_en", 16, 8192, 5762, 0.36),
    ("llm-foundry MPT-7B, FULL_SHARD, 8 x H100", MPT_7B, 48, 2048, 10643, 0.46),
)


def main(argv: list[str] | None = None) -> int:
    """Prints the figures; takes no options."""
    from course_utils import setup_devices

    setup_devices(8)
    import keras_hub

    from course_utils import abstract_model, advise

    print(f"{'row':44} {'at peak':>9} {'at MFU':>9} {'published':>10} {'ratio':>6}  bound")
    for label, model, batch, seq, published, mfu in ROWS:
        built = model if isinstance(model, str) else abstract_model(keras_hub.models.LlamaBackbone, model,
                                                                    dtype="mixed_bfloat16")
        advice = advise(built, devices="8xH100-80GB", batch=batch, seq=seq, mesh_shapes=[(8, 1)])
        row = advice.row("official, batch kept split", (8, 1))
        at_mfu = advice.on("8xH100-80GB", efficiency=mfu).row("official, batch kept split", (8, 1))
        print(f"{label:44} {row.tokens_per_second:9,.0f} {at_mfu.tokens_per_second:9,.0f} {published:10,} "
              f"{at_mfu.tokens_per_second / published:6.2f}  {at_mfu.time.bound} (MFU {mfu:.0%})")
    print("(tokens per second per GPU; estimates from XLA's CPU program of each step, FSDP on a (8, 1) mesh; "
          "the published runs overlap collectives partly and rematerialise: the ratio says how far the roofline is)")
    return 0
