"""Explaining LayoutMaps on a real model: which rule gave each variable which layout.

Which rule a variable matched is Keras's answer (`LayoutMap` lookup and
`distribution.get_variable_layout`); this module only reports it.
`checks` finds what would go wrong with a map before training.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils._table import Table
from course_utils.guards import require_built, require_mesh, require_model, require_valid_keys
from course_utils.keras_internals import layout_map_of
from course_utils.placements import Placement, per_device, placement, planned_placement

UNMATCHED = "replicated: no rule matched"


def make_layout_map(mesh, rules: dict[str, tuple]):
    """A `keras.distribution.LayoutMap` on `mesh` holding `rules` (key -> axes).

    Example:
        >>> layout_map = make_layout_map(mesh, {".*d1/kernel": (None, "model")})
        >>> layout_map[".*d1/kernel"].axes
        (None, 'model')
    """
    from keras.distribution import LayoutMap

    from course_utils.keras_internals import layout_over_axes

    require_mesh(mesh, "make_layout_map")
    layout_map = LayoutMap(mesh)
    for key, axes in rules.items():
        if isinstance(axes, str) or not hasattr(axes, "__iter__"):
            raise TypeError(
                f"The axes of rule {key!r} must be a tuple with one entry per dimension of the variable "
                f"(a mesh axis name or None). Received: {axes!r} ({type(axes).__name__}). Write for example "
                f"({axes!r},) to split the first dimension, or (None, {axes!r}) for a kernel's columns.")
        axes = tuple(axes)
        # an entry naming several mesh axes (one dimension split over ("replica", "batch")): Keras's TensorLayout
        # refuses it, JAX's PartitionSpec takes it
        several = any(isinstance(a, (tuple, list)) for a in axes)
        layout_map[key] = layout_over_axes(tuple(tuple(a) if isinstance(a, list) else a for a in axes), mesh) \
            if several else axes
    return layout_map


@dataclass(frozen=True)
class LayoutRow:
    """How one variable is laid out, and why."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    rule: str
    axes: tuple
    shard_shape: tuple[int, ...]
    bytes_per_device: int
    placement: Placement
    as_planned: bool | None  # None: no array exists, the row was planned from shapes


class LayoutReport(Table):
    """One row per variable: path, shape, the rule that matched, the result.

    The last column says whether the real array already lives as planned; "NO"
    means the variable was created outside the distribution's scope, and "no
    array" that the row was planned from shapes (nothing was built).
    """

    columns = ("path", "shape", "dtype", "rule", "axes", "shard shape", "bytes/device", "array as planned")

    def cells(self, row: LayoutRow) -> list[str]:
        planned = {True: "yes", False: "NO", None: "no array"}[row.as_planned]
        return [row.path, str(row.shape), row.dtype, row.rule, str(row.axes),
                str(row.shard_shape), f"{row.bytes_per_device:,}", planned]

    def row(self, path: str) -> LayoutRow:
        """The row of the variable whose path is `path`."""
        for r in self.rows:
            if r.path == path:
                return r
        raise KeyError(f"No variable with path {path!r}. Paths: {[r.path for r in self.rows]}")

    @property
    def bytes_per_device(self) -> dict[str, int]:
        """Total bytes each device holds for all rows."""
        return per_device(r.placement for r in self.rows)


def explain_layout(model, distribution, *, optimizer: bool = True) -> LayoutReport:
    """Tabulates the layout Keras gives every variable of a model.

    Args:
        model: A built Keras model. Once compiled and built, its optimizer
            variables are listed too.
        distribution: A `keras.distribution.DataParallel` or `ModelParallel`.
        optimizer: False lists the model's own variables only, even once its optimizer is built.

    Returns:
        A `LayoutReport`: a table in a notebook, `.rows` for code.
    """
    if not hasattr(distribution, "get_variable_layout"):
        raise TypeError(
            f"explain_layout needs the distribution the model is laid out by. Received: "
            f"distribution={distribution!r}. Pass a keras.distribution.DataParallel or ModelParallel "
            f"(the one in use now is keras.distribution.distribution())."
        )
    require_built(model, "explain_layout")
    its_optimizer = getattr(model, "optimizer", None)
    slots = its_optimizer.variables if optimizer and its_optimizer is not None and its_optimizer.built else ()
    rows = layout_rows(model, distribution, optimizer_variables=slots)
    misplaced = sum(r.as_planned is False for r in rows)
    warning = (f" - {misplaced} array(s) NOT laid out as planned: build the model inside distribution.scope()"
               if misplaced else "")
    title = f"{model.name} under {type(distribution).__name__} on mesh {tuple(distribution.device_mesh.shape)} {tuple(distribution.device_mesh.axis_names)}{warning}"
    return LayoutReport(rows, title=title)


@dataclass(frozen=True)
class _Variable:
    """What Keras's `get_variable_layout` reads of a variable that has no layout yet: its path and shape."""

    path: str
    shape: tuple[int, ...]


def layout_for(distribution, variable):
    """The `TensorLayout` `distribution` gives `variable`, whatever layout it was created with.

    Keras's `get_variable_layout` returns the layout a variable was created with, if any, before it
    looks at its own map; asked about a variable made under another distribution (or none), it
    would describe the old layout under the new rule. So Keras is asked about a variable of the same
    path and shape that has no layout yet: what the distribution would give it, by its own lookup.
    """
    return distribution.get_variable_layout(_Variable(variable.path, tuple(variable.shape)))


def layout_rows(model, distribution, *, optimizer_variables=(), compare_arrays: bool = True) -> list[LayoutRow]:
    """How Keras lays out every variable of a model and of its optimizer under `distribution`, a row each.

    A weight's layout is `distribution.get_variable_layout(weight)`, with the
    rule Keras's own lookup matched. An optimizer slot takes its weight's
    layout, as Keras's `add_variable_from_reference` gives it (the course's
    one rule for slots: `optimizer_owners`); the optimizer's other variables
    (its step counter, its learning rate) are looked up by their own path.
    Bytes are those JAX stores (`int64` is kept as `int32`).

    Args:
        model: A built Keras model, real or shape-only.
        distribution: The distribution to lay it out by.
        optimizer_variables: The optimizer's variables (built on `model`), if any.
        compare_arrays: Also read each variable's real array and say whether it
            lives as planned; False for variables without arrays (`as_planned` None).
    """
    import jax

    require_model(model, "Laying out a model")
    layout_map = layout_map_of(distribution)
    require_valid_keys(layout_map, "Laying out the model")
    owners = optimizer_owners(optimizer_variables, model.trainable_variables)
    weights = {v.path: v for v in model.trainable_variables}
    rows = []
    for variable in [*model.variables, *optimizer_variables]:
        owner = weights.get(owners.get(variable.path))
        layout = layout_for(distribution, owner if owner is not None else variable)
        rule = f"follows {owner.path}" if owner is not None else matched_rule(layout_map, variable.path)
        shape, axes = tuple(variable.shape), tuple(layout.axes)
        dtype = jax.dtypes.canonicalize_dtype(variable.dtype)  # what JAX really stores
        try:
            planned = planned_placement(shape, layout, dtype=dtype, name=variable.path)
        except ValueError as error:
            raise ValueError(f"{variable.path} {shape} cannot be laid out as {axes} on mesh "
                             f"{tuple(layout.device_mesh.shape)}: {error} Keras would raise IndivisibleError "
                             f"when building it. Change the rule or the mesh.") from None
        if len(axes) < len(shape):  # valid: JAX leaves the trailing dimensions whole
            rule += f" ({len(axes)} of {len(shape)} entries, padded with None)"
            axes += (None,) * (len(shape) - len(axes))
        rows.append(LayoutRow(
            path=variable.path, shape=shape, dtype=str(variable.dtype), rule=rule, axes=axes,
            shard_shape=planned.shard_shape, bytes_per_device=planned.largest_shard_bytes,
            placement=planned,
            as_planned=placement(variable, name=variable.path) == planned if compare_arrays else None,
        ))
    return rows


def matched_rule(layout_map, path: str) -> str:
    """The key Keras's own lookup picks for `path`; `UNMATCHED` when none does (None: DataParallel)."""
    if layout_map is None:
        return "replicated: DataParallel"
    found = layout_map[path]  # Keras's own lookup; raises on two matching keys
    if found is None:
        return UNMATCHED
    return next(key for key, value in layout_map.items() if value is found)


def optimizer_owners(optimizer_variables, model_variables) -> dict[str, str]:
    """Optimizer variable path -> path of the weight it was created from.

    Keras names a slot variable `<weight path with '/' as '_'>_<slot>`.
    """
    prefixes = sorted(((v.path.replace("/", "_") + "_", v.path) for v in model_variables), reverse=True)
    owners = {}
    for ov in optimizer_variables:
        owner = next((path for prefix, path in prefixes if ov.name.startswith(prefix)), None)
        if owner is not None:
            owners[ov.path] = owner
    return owners
