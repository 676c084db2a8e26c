"""Communication: what one training step sends between devices, read from the compiled program.

- `train_step`: one real Keras training step, laid out as `fit` lays it out, compiled by XLA;
- `hlo`: the collectives of a compiled program's text, as plain data (kind, mesh axes, bytes,
  the operation each was inserted for);
- `attribution`: why each collective is there (its layer, its pass, the weight it moves);
- `expectation`: what the layout predicts the step must send, and what that leaves out;
- `report`: `communication_report`, the four together, with a verdict.
"""
