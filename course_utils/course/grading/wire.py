"""An answer as data that can leave a student's notebook, so that the grade is decided outside it.

An autograder test cell (see `nbgrader_course.source_notebook`) runs

    import course_utils.course.grading.wire as _course_grade_wire
    _course_grade_wire.hand_in("01.2", mesh_4x2)

`hand_in` shows the student the course's verdict, as `check` does, and puts the answer in
the cell's output as plain JSON data (`to_wire`, MIME type `MIME`). The grade is not that
verdict: everything in the student's kernel can be replaced by the student's own code (`check`,
this module, `Verdict.ok`, even IPython's error display). The grader reads the answer from the
output and checks it again in a fresh Python process of its own (`recheck`), rebuilt from
data only (`from_wire`: JSON, never pickle, never code). At worst a student puts some other
answer in the output, which they could have written in the cell anyway.

Answers are read as `answers.plain` reads them (built-in values, NumPy arrays), and Keras's
`DeviceMesh`, `TensorLayout` and `LayoutMap` as their shape, axis names, device strings and
rules. A live model (exercises 05.4 and 07.2, `LIVE`) cannot leave the kernel: its wire holds
only its type, and the grader takes the kernel's verdict for it, saying so in the grade's note.
"""

from __future__ import annotations

import base64

import numpy as np

MIME = "application/vnd.course-answer+json"
# Exercises whose answer is a live Keras model: checked only in the student's kernel.
LIVE = frozenset({"05.4", "07.2"})


def to_wire(answer) -> dict:
    """The answer as JSON-ready tagged data; never raises (what it cannot carry is named)."""
    from course_utils.exercises.answers import Unreadable, plain, shown

    try:
        return _wire(plain(answer))
    except Unreadable as error:
        return {"unreadable": f"{error}", "shown": shown(answer)}
    except Exception as error:  # noqa: BLE001  (a student's object may break anything)
        return {"unreadable": f"{type(error).__name__}: {error}", "shown": "?"}


def _wire(value) -> dict:
    simple = _simple(value)
    if simple is not None:
        return simple
    for kind in (tuple, list, set, frozenset):
        if type(value) is kind:
            return {kind.__name__: [_wire(item) for item in value]}
    if type(value) is dict:
        return {"dict": [[_wire(k), _wire(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        return {"ndarray": {"dtype": value.dtype.str, "shape": list(value.shape),
                            "items": _wire(value.tolist())}}
    return _keras_wire(value)


def _simple(value) -> dict | None:
    if value is None or value is ...:
        return {"none" if value is None else "ellipsis": 0}
    kind = type(value)
    if kind in (bool, str):
        return {kind.__name__: value}
    if kind in (int, float):
        return {kind.__name__: repr(value)}  # repr keeps big ints, nan and inf exact
    if kind is complex:
        return {"complex": [repr(value.real), repr(value.imag)]}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode()}
    if kind is range:
        return {"range": [value.start, value.stop, value.step]}
    return None


def _keras_wire(value) -> dict:
    from keras import distribution

    if isinstance(value, distribution.DeviceMesh):
        return {"DeviceMesh": {"shape": list(value.shape), "axis_names": [str(a) for a in value.axis_names],
                               "devices": [str(d) for d in np.asarray(value.devices).reshape(-1)]}}
    if isinstance(value, distribution.TensorLayout):
        mesh = value.device_mesh
        return {"TensorLayout": {"axes": _wire(tuple(value.axes)), "mesh": None if mesh is None else _wire(mesh)}}
    if isinstance(value, distribution.LayoutMap):
        return {"LayoutMap": {"mesh": _wire(value.device_mesh),
                              "rules": [[key, _wire(value[key])] for key in value]}}
    return {"object": f"{type(value).__module__}.{type(value).__qualname__}"}


def from_wire(data):
    """The answer rebuilt from `to_wire`'s data (for the grader's own process); raises ValueError."""
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"not an answer's data: {str(data)[:200]}")
    [(tag, body)] = data.items()
    rebuild = _REBUILD.get(tag)
    if rebuild is None:
        raise ValueError(f"an answer of kind {tag!r} cannot be rebuilt")
    return rebuild(body)


def _mesh(body):
    from keras import distribution

    devices = np.array([str(d) for d in body["devices"]]).reshape(tuple(int(n) for n in body["shape"]))
    return distribution.DeviceMesh(tuple(devices.shape), [str(a) for a in body["axis_names"]], devices=devices)


def _layout(body):
    from keras import distribution

    mesh = None if body["mesh"] is None else from_wire(body["mesh"])
    return distribution.TensorLayout(from_wire(body["axes"]), device_mesh=mesh)


def _layout_map(body):
    from keras import distribution

    layout_map = distribution.LayoutMap(from_wire(body["mesh"]))
    for key, layout in body["rules"]:
        layout_map[str(key)] = from_wire(layout)
    return layout_map


def _array(body):
    return np.array(from_wire(body["items"]), dtype=np.dtype(body["dtype"])).reshape(body["shape"])


_REBUILD = {
    "none": lambda _: None, "ellipsis": lambda _: ..., "bool": bool, "str": str, "int": int, "float": float,
    "complex": lambda parts: complex(float(parts[0]), float(parts[1])),
    "bytes": lambda text: base64.b64decode(text), "range": lambda r: range(*(int(n) for n in r)),
    "tuple": lambda items: tuple(map(from_wire, items)), "list": lambda items: list(map(from_wire, items)),
    "set": lambda items: set(map(from_wire, items)), "frozenset": lambda items: frozenset(map(from_wire, items)),
    "dict": lambda pairs: {from_wire(k): from_wire(v) for k, v in pairs},
    "ndarray": _array, "DeviceMesh": _mesh, "TensorLayout": _layout, "LayoutMap": _layout_map,
}


def hand_in(exercise_id: str, answer=...) -> None:
    """What an autograder test cell runs: the answer into the output as data, the verdict for the student.

    Raises:
        AssertionError: the course's check, run here, says the answer is not right (nbgrader's
            own score; the grade itself is decided again outside this kernel).
    """
    from IPython.display import display

    from course_utils.exercises import check

    wire = to_wire(answer)
    verdict = check(exercise_id, answer)
    display({MIME: {"exercise": exercise_id, "answer": wire, "kernel_status": verdict.status},
             "text/plain": f"Answer to {exercise_id} handed in for grading."}, raw=True)
    assert verdict.ok, verdict
