"""What a compiled instruction was inserted for, read from the `op_name` XLA keeps in its metadata.

JAX names every operation with its name stack: `jit(train_step)/transpose(jvp(model))/dense/dot_general` is the
backward pass (`transpose`) of the `dense` layer's product. `parse_op_name` unwraps the transformations and gives
one `Source` per operation a name spells (XLA combines collectives: `a/(b/x:c/y)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """The operation a compiled instruction came from, read from its `metadata={op_name=...}`.

    Attributes:
        scope: The JAX name stack of the operation with transformations
            unwrapped, e.g. "gemma_backbone/decoder_block_0/ffw_gating"
            (Keras layers open one name scope each).
        op: The JAX primitive, e.g. "dot_general" or "reduce_sum".
        backward: True inside the gradient (a `transpose(...)` of the forward pass).
        detail: Name scopes that are not layers, e.g. an einsum's equation "btd,df->btf".
    """

    scope: str
    op: str
    backward: bool
    detail: str = ""


def parse_op_name(op_name: str) -> tuple[Source, ...]:
    """The operations named by one `op_name`, e.g. "jit(step)/transpose(jvp(m))/d1/dot_general".

    Transformations (`jvp(...)`, `transpose(...)`) are unwrapped, jitted
    function names (`jit(...)`) dropped; a combined name "a/(b/x:c/y)" is
    one source per alternative.
    """
    sources = []
    for parts, backward in _expand(_split(op_name, "/"), False):
        names = [p for p in parts if p]
        if not names:
            continue
        scopes = [n for n in names[:-1] if not _is_detail(n)]
        details = [n for n in names[:-1] if _is_detail(n)]
        sources.append(Source("/".join(scopes), names[-1], backward, " ".join(details)))
    return tuple(sources)


def _expand(parts: list[str], backward: bool):
    """Yields (plain names, backward) for each alternative spelled by `parts`."""
    if not parts:
        yield [], backward
        return
    head, rest = parts[0], parts[1:]
    wrapper = re.fullmatch(r"([\w\-]+)\((.*)\)", head)
    if head.startswith("(") and head.endswith(")"):
        alternatives = [_split(a, "/") for a in _split(head[1:-1], ":")]
    elif wrapper and wrapper.group(1) in ("jit", "pjit"):
        alternatives = [[]]
    elif wrapper:
        alternatives = [_split(wrapper.group(2), "/")]
        backward = backward or wrapper.group(1) == "transpose"
    else:
        alternatives = None
    if alternatives is None:
        for tail, back in _expand(rest, backward):
            yield [head] + tail, back
        return
    for alternative in alternatives:
        for inner, back in _expand(alternative, backward):
            for tail, back2 in _expand(rest, back):
                yield inner + tail, back2


def _split(text: str, sep: str) -> list[str]:
    """Splits `text` at `sep` outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def _is_detail(name: str) -> bool:
    return "->" in name or "," in name
