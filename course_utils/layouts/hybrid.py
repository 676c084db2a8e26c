"""The batch split over several mesh axes: HSDP (hybrid sharded data parallelism), and data x FSDP x tensor.

Keras's `ModelParallel` splits the batch over one mesh axis (`batch_dim_name`), and its `TensorLayout` refuses an
entry that names several axes ("Invalid axis names for Layout"), though JAX's `PartitionSpec` takes one. On a mesh
("replica", "batch", "model") HSDP needs the batch split over "replica" and "batch" together, the weights split
over "batch" (FSDP inside a replica: a node) and whole on every replica (each node holds a whole copy, split over
its own devices). `HybridParallel` is `ModelParallel` with the data laid out over `batch_axes`; the weights keep
the layout map's rules, which name "batch" and "model" only. Everything else is Keras's own: `fit`, the layout
map, the layer-output rules.

Where this would be wrong: a future Keras that checks `batch_dim_name` elsewhere (multi-process data loading
asks the replica count: it is the product of `batch_axes`' sizes here).
"""

from __future__ import annotations

import math

from course_utils.keras_internals import layout_over_axes
from course_utils.layout_axes import names_in

REPLICA_AXIS = "replica"


def hybrid_parallel(layout_map, batch_axes: tuple[str, ...] | None = None):
    """A Keras `ModelParallel` that lays `layout_map`'s weights out as its rules say and splits the batch over
    every axis in `batch_axes` (by default every mesh axis but the last: ("replica", "batch") of ("replica",
    "batch", "model")).

    Example:
        >>> mesh = make_mesh((2, 4, 1), ("replica", "batch", "model"))
        >>> hsdp = hybrid_parallel(derive_layout_map(model, mesh, data_axis="batch", model_axis="model").layout_map)
        >>> with hsdp.scope(): ...   # fit as under any distribution
    """
    from keras import distribution

    mesh = layout_map.device_mesh
    names = tuple(mesh.axis_names)
    batch_axes = tuple(batch_axes) if batch_axes is not None else names[:-1]
    unknown = [a for a in batch_axes if a not in names]
    if not batch_axes or unknown or len(set(batch_axes)) != len(batch_axes):
        raise ValueError(f"batch_axes names distinct axes of the mesh {names}, at least one. Received: "
                         f"batch_axes={batch_axes!r}.")

    class HybridParallel(distribution.ModelParallel):
        """`ModelParallel` with the batch split over several mesh axes."""

        def get_data_layout(self, data_shape):
            return layout_over_axes((batch_axes, *[None] * (len(data_shape) - 1)), self.device_mesh)

        @property
        def num_model_replicas(self):
            return math.prod(self.device_mesh.shape[names.index(a)] for a in batch_axes)

        def __repr__(self):
            return f"<HybridParallel batch over {batch_axes} on {dict(zip(names, mesh.shape))}>"

    return HybridParallel(layout_map=layout_map, batch_dim_name=batch_axes[0])


def batch_axes_of(distribution) -> tuple[str, ...]:
    """The mesh axes a distribution splits the batch over: `("batch",)` for `ModelParallel`, several for HSDP."""
    return names_in(distribution.get_data_layout((1, 1)).axes[0])


def over_replicas(layout_map, mesh):
    """`layout_map`'s rules on `mesh` (axes ("replica", "batch", "model")): the weights' rules as they are (whole on
    every replica), every rule that splits a layer's output over "batch" widened to ("replica", "batch"), where
    the batch now lies."""
    from course_utils.layouts.layout_map import make_layout_map

    def widened(key, axes):
        if not key.endswith("/output") or not axes or axes[0] != "batch":
            return axes
        return ((REPLICA_AXIS, "batch"), *axes[1:])

    return make_layout_map(mesh, {key: widened(key, tuple(layout.axes)) for key, layout in layout_map.items()})
