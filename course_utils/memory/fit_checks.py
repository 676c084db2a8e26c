"""`will_it_fit`'s arguments, checked before anything is built: each refusal says what was received and what to do.

Friendly forms are accepted and documented: one preset name (`"gemma_7b_en"`) for a tuple of names, one mesh
shape (`(2, 4)`) for a tuple of shapes, one device size (`80`) for a tuple of sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from course_utils.memory.presets import LAYOUTS, MESH_AXES, PRESETS, Preset

_NUMBER = (int, float, np.integer, np.floating)


def checked_models(models) -> dict:
    """Label -> preset name, `Preset` or built model; one name or `Preset` alone is a tuple of one."""
    if isinstance(models, (str, Preset)):
        models = (models,)
    if isinstance(models, Mapping):
        named = dict(models)
    elif isinstance(models, Sequence):
        named = {m if isinstance(m, str) else getattr(m, "name", None) or repr(m): m for m in models}
    else:
        raise ValueError(f"Received: models={models!r}. Give preset names, e.g. models=('gemma_7b_en',), or a "
                         f"dict of label -> backbone, e.g. models={{'gemma_7b_en': abstract_model('gemma_7b_en')}}.")
    if not named:
        raise ValueError(f"Received: models={models!r}, no model. Name one, e.g. models=('gemma_7b_en',).")
    for label, model in named.items():
        if isinstance(model, str) and model not in PRESETS:
            raise ValueError(f"Received: models={models!r}; {model!r} is not a preset. Known: {sorted(PRESETS)}; "
                             f"or pass a dict of label -> backbone built by abstract_model.")
        if not isinstance(model, (str, Preset)) and not hasattr(model, "variables"):
            raise ValueError(f"Received: models={models!r}; {label!r} is {type(model).__name__} {model!r}, neither "
                             f"a preset name nor a built backbone. Known presets: {sorted(PRESETS)}.")
    return named


def checked_mesh_shapes(shapes, n_devices: int) -> tuple[tuple[int, ...], ...]:
    """`(batch, model)` shapes of `n_devices` devices; one shape such as `(2, 4)` alone is a tuple of one."""
    from course_utils.mesh import mesh_shapes

    valid = mesh_shapes(n_devices, len(MESH_AXES))
    tail = (f"will_it_fit sizes {' x '.join(MESH_AXES)} meshes of the course's {n_devices} devices; "
            f"valid shapes: {', '.join(map(str, valid))}.")
    if isinstance(shapes, Sequence) and shapes and all(_whole(s) for s in shapes):
        shapes = (shapes,)
    if isinstance(shapes, str) or not isinstance(shapes, Sequence) or not shapes:
        raise ValueError(f"Received: mesh_shapes={shapes!r}. Give a tuple of shapes, e.g. "
                         f"mesh_shapes=((2, 4), (8, 1)). {tail}")
    for shape in shapes:
        if isinstance(shape, str) or not isinstance(shape, Sequence) or not all(_whole(s) for s in shape):
            why = "is not a tuple of whole numbers"
        elif len(shape) != len(MESH_AXES):
            why = f"has {len(shape)} axes, not the {len(MESH_AXES)} of ({', '.join(MESH_AXES)})"
        elif tuple(shape) not in valid:
            why = f"uses {math.prod(shape)} devices" if min(shape) > 0 else "has an axis smaller than 1"
        else:
            continue
        shown = tuple(shape) if isinstance(shape, Sequence) else shape
        raise ValueError(f"Received: mesh_shapes={shapes!r}; {shown!r} {why}. {tail}")
    return tuple(tuple(int(s) for s in shape) for shape in shapes)


def checked_device_gib(device_gib) -> tuple[float, ...]:
    """Device sizes in GiB, each a finite number above 0; one number alone is a tuple of one."""
    sizes = (device_gib,) if isinstance(device_gib, _NUMBER) else device_gib
    if (isinstance(sizes, str) or not isinstance(sizes, Sequence) or not sizes
            or not all(device_size_ok(g) for g in sizes)):
        raise ValueError(f"Received: device_gib={device_gib!r}. Give device memory sizes in GiB, numbers above 0, "
                         f"e.g. device_gib=(16, 80) or device_gib=80.")
    return tuple(sizes)


def device_size_ok(gib) -> bool:
    """Whether `gib` is a device size: a finite number above 0 (not a bool, not text)."""
    return isinstance(gib, _NUMBER) and not isinstance(gib, bool) and math.isfinite(gib) and gib > 0


def check_layout(layout) -> None:
    if isinstance(layout, str):
        usable = layout in LAYOUTS
    elif isinstance(layout, dict):
        usable = all(isinstance(key, str) and isinstance(axes, (tuple, list)) and all(_axis_entry(a) for a in axes)
                     for key, axes in layout.items())
    else:
        usable = callable(layout)
    if usable:
        return
    raise ValueError(f"Received: layout={layout!r:.100}. A layout is one of {LAYOUTS}: 'official' is keras-hub's "
                     f"own map, which splits weights over 'batch' too (as FSDP does); 'tensor_parallel' the same "
                     f"without 'batch'; 'replicated' every weight whole on every device. Or your own: a dict of "
                     f"rules {{key: axes}} whose axes name {MESH_AXES} or None, or a function mesh -> LayoutMap.")


def _axis_entry(entry) -> bool:
    """None, a mesh axis of `MESH_AXES`, or a tuple of them (one dimension split over both)."""
    names = entry if isinstance(entry, tuple) else (entry,)
    return entry is None or all(name in MESH_AXES for name in names)


def check_batch(batch, seq) -> None:
    if (batch is None) != (seq is None):
        raise ValueError(f"Give batch and seq together (the activations need both), or neither. "
                         f"Received: batch={batch!r}, seq={seq!r}.")
    for name, value in (("batch", batch), ("seq", seq)):
        if value is not None and not (_whole(value) and value > 0):
            raise ValueError(f"Received: {name}={value!r}. {name} is a whole number above 0, e.g. batch=8, seq=2048.")


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
