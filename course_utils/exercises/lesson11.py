"""Checkers for lesson 11: splitting the sequence.

11.1 asks for the bytes of keys and values one device holds at once in ring attention, for Llama 3 8B's
attention: the checker reads Llama 3 8B's published config (`memory.presets.PRESETS`) and sizes it with
`sequence.attention_memory`. 11.2 asks how many blocks one device sends in a forward pass of ring attention:
the checker compiles `sequence.ring_self_attention` over the lesson's 8 devices and counts the program's
collective-permutes, each as often as its loop runs.
"""

from __future__ import annotations

import functools

from course_utils.exercises.core import exercise

TOKENS = 131_072  # exercise 11.1's sequence
DEVICES = 8
BF16 = 2


def _llama_attention() -> dict:
    from course_utils.memory.presets import PRESETS

    config = PRESETS["llama3_8b_en"].config
    return dict(heads=config["num_query_heads"], kv_heads=config["num_key_value_heads"],
                head_dim=config["hidden_dim"] // config["num_query_heads"])


def ring_kv_bytes() -> int:
    """Bytes of keys and values one device holds at once in 11.1's ring."""
    from course_utils.sequence import attention_memory

    return attention_memory(TOKENS, devices=DEVICES, itemsize=BF16, **_llama_attention()).ring_kv


@exercise("11.1", "Bytes of keys and values one device holds at once in ring attention: Llama 3 8B, 131,072 tokens, "
                  "8 devices, bfloat16.", form="a number of bytes, e.g. 1_000_000")
def ring_memory(answer) -> str | None:
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not answer > 0:
        return f"Answer a number of bytes above 0. Received: {answer!r}."
    from course_utils.sequence import attention_memory

    expected = ring_kv_bytes()
    if answer == expected:
        return None
    sizes = attention_memory(TOKENS, devices=DEVICES, itemsize=BF16, **_llama_attention())
    if answer == sizes.gathered_kv:  # also the ring's blocks counted with the 32 query heads instead of 8
        return ("That is 4 times too much: the keys and values of the whole sequence (what XLA's all-gather puts on "
                "every device), or the ring's blocks counted with Llama's query heads. The ring never holds the whole "
                "sequence, and keys and values have their own, fewer heads.")
    if answer * 2 == expected:
        return ("One block is what a device attends to; while it does, the next block arrives from its neighbour. "
                "Count both.")
    if answer * 4 == expected or answer * 8 == expected:
        return ("Count every factor of a block: its tokens (the sequence over the devices), keys and values both, "
                "the key/value heads (not the query heads), head_dim, and 2 bytes each.")
    return (f"{answer:,.0f} bytes is not it. A block is the sequence's tokens over the {DEVICES} devices; each token "
            f"has keys and values for Llama 3 8B's key/value heads of head_dim numbers, 2 bytes each.")


@functools.cache
def ring_sends(devices: int = DEVICES) -> int:
    """Blocks one device sends in one forward pass of ring attention: the program's collective-permutes, each
    counted as often as the loop it sits in runs."""
    import jax
    from keras import distribution

    from course_utils.communication.hlo import collective_ops
    from course_utils.sequence import ring_self_attention

    mesh = distribution.DeviceMesh((devices,), ["seq"], devices=jax.devices()[:devices])
    spec = jax.ShapeDtypeStruct((1, 8 * devices, 2, 8), "float32")
    program = jax.jit(ring_self_attention(mesh)).lower(spec, spec, spec).compile().as_text()
    return sum(op.times for op in collective_ops(program, ("seq",), (devices,)) if op.kind == "collective-permute")


@exercise("11.2", "How many blocks one device sends (collective-permutes run) in one forward pass of ring attention "
                  "over 8 devices.", form="a whole number, e.g. 3")
def ring_permutes(answer) -> str | None:
    if isinstance(answer, bool) or not isinstance(answer, int) or answer < 0:
        return f"Answer a whole number of sends. Received: {answer!r}."
    expected = ring_sends()
    if answer == expected:
        return None
    if answer == expected // 2:
        return "Keys and values travel as two arrays: each step sends both."
    if answer == expected + 2:
        return "After the last step nothing is left to attend to: does the last block need sending on?"
    if answer == 2:
        return "The program writes 2 permutes, inside a loop: how many times does the loop go round?"
    return (f"{answer} is not it. Each step a device attends to the block it holds, then passes it on; count the "
            f"steps that send, and the arrays each step sends.")


def read_by(hlo: str, name: str) -> list[tuple[str, str]]:
    """(name, result type) of every instruction of a compiled program that reads the result of `name`: what the
    lesson's claims read to see that XLA CPU slices an all-reduce's result (a reduce-scatter, written in two)."""
    from course_utils.communication.instructions import read_program

    program = read_program(hlo)
    return [(user.name, ",".join(f"{a.dtype}[{','.join(map(str, a.shape))}]" for a in user.arrays))
            for user, _ in program.users.get(name, [])]
