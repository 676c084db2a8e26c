"""Memory: the bytes each device holds to train a model, and whether that fits.

- `state`: weights, gradients and optimizer state per device, from real shards
  (`memory_report`) or planned from shapes (`planned_memory`), one sum for both;
- `presets`: real models' published shapes (keras-hub backbones) built shape-only, nothing
  allocated (`abstract_model`, `training_memory`);
- `activations`: what a training step keeps for its backward pass, traced from shapes;
- `fit` (with `fit_checks`, its arguments checked): will it fit? models by meshes beside
  device sizes, a verdict each.
"""
