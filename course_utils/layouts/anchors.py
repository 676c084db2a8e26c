"""`unanchored_keys`: a key whose ".*" also takes the start of a longer layer name, so that it lays out a weight of
another role (QwenMoe's dense-FFN gate key, which also matches the MoE router). `check_layout_map` runs it."""

from __future__ import annotations


from course_utils.layouts.problems import Problem, key_matches
from course_utils.layouts.rule_keys import _anchored, _replacing, _role, _roles


def unanchored_keys(layout_map, variables) -> list[Problem]:
    """A warning for each key whose ".*" also takes the start of a longer layer name than the one it spells."""
    warnings = []
    for key in layout_map:
        anchored = _anchored(key)
        matched = [v for v in variables if anchored and key_matches(key, v.path)]
        cut = [v for v in matched if not key_matches(anchored, v.path)]
        if cut:
            kept = [v for v in matched if key_matches(anchored, v.path)]
            warnings.append(_unanchored(key, anchored, kept, cut, tuple(layout_map[key].axes)))
    return warnings

def _unanchored(key, anchored, kept, cut, axes) -> Problem:
    others = ", ".join(sorted({_role(v.path) for v in cut}))
    fix = {anchored: axes} if kept else {}
    meant = (f"Anchored with '/' before the name, {anchored!r} matches the weights it names alone, "
             f"{_roles(kept)}" if kept else f"Anchored with '/' before the name, {anchored!r} matches nothing in "
             f"this model: the layer the key names is not here")
    return Problem("unanchored_key", key, cut[0].path, (
        f"Key {key!r} gives {axes} to weights of another role, {_roles(cut)}: their layer's name only ends with "
        f"the name the key spells (its '.*' takes the start of it). {meant}. In place: {_replacing(key, fix)}; "
        f"give {others} a key of its own if it should be split."), severity="warning", fix=fix)
