"""Layouts: which rule of a LayoutMap lays out each variable, and what is wrong with a map.

- `layout_map`: LayoutMaps made from rules, and explained on a real model (`explain_layout`:
  Keras's own lookup names the rule of every variable, JAX's sharding the block of every device);
- `checks`: a map checked before training (`check_layout_map`: keys that match nothing,
  dimensions that do not divide, large weights left whole, layer outputs);
- `layer_outputs`: the output of every layer call, traced from shapes (what an output
  layout applies to, and which name scope each layer opens in a compiled program).
"""
