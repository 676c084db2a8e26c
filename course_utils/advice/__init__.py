"""Which mesh and layout: every candidate's training step compiled, read (memory, FLOPs, collectives as an
accelerator sends them), timed on named hardware and ranked (`advise`)."""
