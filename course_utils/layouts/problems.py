"""What a LayoutMap check reports: a `Problem` (or warning) with its fix, the `Checked` list, the error
`strict` raises, and Keras's own lookup asked about one key (`key_matches`). `checks` and `roles` build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a LayoutMap (or, as a warning, worth knowing), and how to fix it.

    `fix`, where the check can write one: the rules that replace `key`
    (`del layout_map[p.key]; layout_map.update(p.fix)`; empty: drop the key).
    """

    kind: str
    key: str | None
    path: str | None
    message: str
    severity: str = "error"  # "error": the map is wrong; "warning": sound, but costly
    fix: dict | None = field(default=None, hash=False, compare=False)

    def __str__(self) -> str:
        return self.message


class Checked(list):
    """The problems `check_layout_map` found (a list: empty when the map is sound), and its warnings.

    Attributes:
        warnings: What is sound but costly, each a `Problem` of severity
            "warning" and one of these kinds: "contradictory_roles" (two keys
            split one activation over different axes: XLA reshards it every
            step), "unanchored_key" (a key's ".*" also lays out a weight of
            another role), "large_replicated" (a large weight whole on every
            device, with its bytes). Shown after the problems.
    """

    TITLES = {"contradictory_roles": "rules that contradict each other",
              "unanchored_key": "keys that also match weights of another role",
              "large_replicated": "large weights left whole"}

    def __init__(self, problems, warnings=()):
        super().__init__(problems)
        self.warnings = list(warnings)

    def __repr__(self) -> str:
        if not self.warnings:
            return super().__repr__()
        kinds = dict.fromkeys(w.kind for w in self.warnings)
        parts = [f"{self.TITLES.get(kind, kind)}:\n" + "\n".join(f"- {w.message}" for w in self.warnings if w.kind == kind)
                 for kind in kinds]
        return f"{super().__repr__()}, and {len(self.warnings)} warning(s), " + "\n".join(parts)

    def of(self, kind: str) -> list[Problem]:
        """The problems and warnings of one kind ("unanchored_key", "bad_layout", ...)."""
        return [p for p in [*self, *self.warnings] if p.kind == kind]


class LayoutMapError(ValueError):
    """A LayoutMap has problems (raised by `check_layout_map(strict=True)`)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"- {p.message}" for p in problems)
        super().__init__(f"The LayoutMap has {len(problems)} problem(s):\n{lines}")


def key_matches(key: str, path: str) -> bool:
    """Asks Keras's own lookup whether `key` alone gives `path` a layout."""
    from keras.distribution import LayoutMap, TensorLayout

    probe = LayoutMap(None)
    probe[key] = TensorLayout(())
    return probe[path] is not None
