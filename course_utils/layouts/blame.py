"""`blame_indivisible`: a dimension that does not divide, blamed on its key and mesh axis, the key/value heads
named, with a fix that keeps the key's other weights (the query) split. `check_layout_map` runs it."""

from __future__ import annotations

from dataclasses import replace

from course_utils.layout_axes import indivisible
from course_utils.layouts.problems import Problem
from course_utils.layouts.rule_keys import _divisible, _heads, _names, _padded, _replacing, _rule_of, _rules


def blame_indivisible(problems: list[Problem], layout_map, model) -> list[Problem]:
    """`problems`, each indivisible dimension of a variable blamed on its key and mesh axis, with the
    key/value heads named where they are what does not divide, and a fix that keeps the key's other weights split."""
    shapes = {v.path: tuple(v.shape) for v in model.variables}
    mesh = layout_map.device_mesh
    blamed = []
    for problem in problems:
        found = problem.kind == "bad_layout" and problem.path in shapes and indivisible(
            shapes[problem.path], _padded(layout_map, problem.key, shapes[problem.path]),
            dict(zip(mesh.axis_names, mesh.shape)))
        blamed.append(_blamed(problem, found, shapes, layout_map, model) if found else problem)
    return blamed

def _blamed(problem, found, shapes, layout_map, model) -> Problem:
    attention = problem.path.rpartition("/")[0].rpartition("/")[0]
    what = " and ".join(f"{'+'.join(map(repr, names))} ({parts} devices) on its dimension {dim} (size {size}"
                        f"{_heads(model, attention, size)})" for dim, size, names, parts in found)
    changed = {p: _divisible(shape, _padded(layout_map, problem.key, shape), layout_map)
               for p, shape in shapes.items() if _rule_of(layout_map, p) == problem.key}
    rules = _rules(problem.key, changed, layout_map, model)
    moved = [p for p, axes in changed.items() if axes != _padded(layout_map, problem.key, shapes[p])]
    kept = [p for p in changed if p not in moved]
    how = (f"To keep {_names(kept)} split, give {_names(moved)} a key of their own that leaves that dimension whole"
           if kept else "Leave that dimension whole")
    return replace(problem, fix=rules, message=(
        f"{problem.message} That key puts {what}. {how}: {_replacing(problem.key, rules)}"))
