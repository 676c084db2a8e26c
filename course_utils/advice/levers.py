"""The memory levers real runs pull, applied to compiled steps: fused attention, rematerialisation, micro-batches.

XLA's CPU program keeps every activation of the forward pass for the backward pass, attention's scores
included (`batch x heads x seq x seq`, in f32), and keeps bf16 values as f32. A run on an accelerator does not:
a fused attention kernel (FlashAttention, cuDNN's, a TPU's splash attention) never writes the scores, only a
few numbers per token; rematerialisation keeps each block's input and recomputes the rest one block at a time
in the backward pass; gradient accumulation runs the batch as micro-batches. Which of the CPU program's
buffers those levers remove is read from the programs themselves, not guessed:

- the step is compiled at three sequence lengths (s/4, s/2, s), with one block and with two, and XLA's
  temporary buffers are fitted exactly as `a + b s + c s^2` for each: `c s^2` is what grows with the square of
  the sequence (only attention's scores and its mask do), `b s` what grows with it (a token's vectors), `a`
  what does not (the gradients, the weights FSDP gathers, working space), which is not used: XLA CPU sums each
  FSDP gradient whole and gathers every weight for the whole step, an accelerator does neither; what it holds
  instead is counted as `will_it_fit` counts it (each gradient's shard, two blocks' gathered weights);
- with two blocks less one, each term per block: what each further block adds;
- the activations are kept in the types the model computes them in (`memory.activations.kept_types`, from the
  traced residuals) instead of the CPU's f32: `b` and `c` are scaled by that share, the blocks' by theirs, the
  rest (embedding, logits, loss) by its own.

Fused attention drops every `c s^2`. Rematerialisation replaces each further block's `b s` (and `c s^2`) by its
input (`rows x s x hidden`, in the compute type): one block, the last, is still held whole while it is
recomputed; its compute is one forward pass more. Micro-batches compile the step at the micro-batch and run it
`batch / micro_batch` times (each micro-step gathers and reduces as the step does).

Where XLA CPU's buffers do not grow as a polynomial (a term of one block comes out negative), one block's growth
at the sequence length, as compiled, is shared between the two terms as the traced residuals share it.

On an accelerator's own program (`program="gpu"`, `"tpu"`) nothing is narrowed: it keeps bf16 as bf16 and fuses as
the accelerator does. Its compiles are slower and its scores, at long sequences, are most of its buffers (a fit
through s/4, s/2 and s then subtracts large numbers), so it is compiled short instead (`own_points`): the step's
tokens a device in sequences of s0 (s halved until at most 32) and of 2 s0, and half the tokens at s0, and fitted
as `a + b T + c T s` (`equal_tokens_fitted`): a token's vectors `b T` apart from the scores `c T s`. The shorter
s0, the smaller the scores beside the rest and the steadier the fit: for the Llama standing in for MPT 1b at
28,672 tokens a GPU, a block keeps 31.5, 32.2, 30.7, 29.4 and 17.2 bytes a token and unit of width fitted at s0 =
16, 32, 64, 128 and 256 (where the scores' bytes are 1.4 times the rest). The collectives are that program's at
the step's tokens, the FLOPs the CPU program's at the step's length.

How far the two programs are apart, for the Llama standing in for MPT 760m at 96 x 512 tokens a GPU (`bench
published-rows`; docs/BENCHMARKS.md): each block keeps 30.9 bytes a token and unit of width on the H100's program,
64.0 on the CPU's with its types narrowed (85.4 as XLA CPU keeps them): XLA CPU keeps float32 copies the GPU's
fusions recompute (the norms', the gated feed-forward's). Korthikanti et al. (2022) count 34 for a GPT block in 16
bits, 32 without dropout's masks. The CPU's figure is the one `program="cpu"` gives, and its notes say so.

Where this is wrong: the CPU fit is exact for the three lengths compiled, the own fit for its three points; a fused
kernel keeps a few floats per token and head (its softmax statistics), counted as nothing; the GPU's program is not
autotuned, and its compiler rematerialises on its own a step over about 57 GiB (a candidate far over the device);
an accelerator's XLA fuses differently from PyTorch's kernels (the published runs are the check).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from course_utils.memory.activations import KeptTypes
from course_utils.memory.compiled import StepMemory

ATTENTION = ("as compiled", "fused")
# an accelerator's own program keeps each value in its own type: nothing to narrow
OWN_TYPES = KeptTypes(linear=1.0, quadratic=1.0, block_linear=1.0, block_quadratic=1.0)


@dataclass(frozen=True)
class Levers:
    """What a run does to fit: `attention` "as compiled" or "fused", `remat` each block, `micro_batch` rows a
    micro-step (None: the whole batch at once)."""

    attention: str = "as compiled"
    remat: bool = False
    micro_batch: int | None = None

    @property
    def memory(self) -> bool:
        """Whether the step must be compiled at three sequence lengths (a lever on its activations)."""
        return self.attention == "fused" or self.remat

    def steps(self, batch: int) -> int:
        """Micro-steps a step takes."""
        return batch // self.micro_batch if self.micro_batch else 1

    def describe(self, batch: int) -> str:
        said = [f"attention {'fused (no score kept)' if self.attention == 'fused' else 'as compiled'}"]
        said += ["each block rematerialised"] if self.remat else []
        said += [f"{self.steps(batch)} micro-batches of {self.micro_batch}"] if self.micro_batch else []
        return ", ".join(said)


@dataclass(frozen=True)
class Terms:
    """XLA's temporary bytes of one compiled step as `constant + linear + quadratic` at the sequence length."""

    constant: float
    linear: float
    quadratic: float

    def __sub__(self, other: "Terms") -> "Terms":
        return Terms(self.constant - other.constant, self.linear - other.linear, self.quadratic - other.quadratic)


def fitted(temporaries: dict[int, int], seq: int) -> Terms:
    """`a + b s + c s^2` through three (length, bytes) points, its three terms at `seq`."""
    (s0, y0), (s1, y1), (s2, y2) = sorted(temporaries.items())
    c = ((y2 - y1) / (s2 - s1) - (y1 - y0) / (s1 - s0)) / (s2 - s0)
    b = (y1 - y0) / (s1 - s0) - c * (s1 + s0)
    a = y0 - b * s0 - c * s0 * s0
    return Terms(a, b * seq, c * seq * seq)


def seq_points(seq: int) -> tuple[int, int, int]:
    """The lengths a lever's fit compiles: s/4, s/2 and s."""
    return seq // 4, seq // 2, seq


SHORT = 32  # the longest short sequence: at 32 tokens the scores a block keeps are about 2 % of its activations


def own_points(rows: int, seq: int) -> tuple[tuple[int, int], ...]:
    """The (rows, length) an accelerator's own program is compiled at for the levers: the step's tokens at a short
    length s0 (seq halved until it is at most `SHORT`, at least twice), the same tokens at 2 s0, half of them at
    s0."""
    short = seq // 4
    while short > SHORT and short % 2 == 0:
        short //= 2
    many = rows * (seq // short)
    return (many, short), (many // 2, 2 * short), (many // 2, short)


def equal_tokens_fitted(temporaries: dict[tuple[int, int], int], seq: int) -> Terms:
    """`a + b T + c T s` (T a device's tokens, s the length) through the three `own_points`, its terms at the step's
    tokens and `seq`. At a fixed number of tokens what each token keeps does not change with the length, and the
    scores grow with it: short programs, whose scores are small beside the rest, separate the two far better than
    lengths up to `seq` do (there the scores are most of the buffers)."""
    if len(temporaries) != 3:
        raise ValueError(f"equal_tokens_fitted takes the three own_points. Received: {sorted(temporaries)}.")
    tokens = max(rows * length for rows, length in temporaries)
    (short, y1), (_, y2) = sorted((length, y) for (rows, length), y in temporaries.items() if rows * length == tokens)
    (y3,) = [y for (rows, length), y in temporaries.items() if rows * length < tokens]
    scores = y2 - y1  # c T s0: what twice the length adds at the same tokens
    linear = 2 * (y1 - y3) - scores  # b T: half the tokens keep half of b T and of c T s0
    return Terms(y1 - linear - scores, linear, scores * seq / short)


def levered_memory(whole: Terms, block: Terms | None, one: StepMemory, two: StepMemory | None, depth: int | None,
                   levers: Levers, kept, block_input: int, held: int, rows_split: int = 1, how: str = "") -> StepMemory:
    """A step's memory with the levers pulled, from the terms of its programs with one block and with two.

    Args:
        whole: The temporaries of the step with one block (or of a model compiled whole), fitted (`fitted`,
            `equal_tokens_fitted`) at the step's rows and length.
        block: What the second block adds to them, fitted alike (None for a model compiled whole).
        one, two: The programs' memory with one block and two at the step's tokens (their state, batch and outputs).
        depth: The model's blocks (None for a model compiled whole).
        levers: What the run does.
        kept: `KeptTypes`: the share of the program's bytes an accelerator keeps (`OWN_TYPES` for its own program).
        block_input: Bytes of one block's input on a device (what a rematerialised block keeps).
        held: Bytes a device holds in the step that do not grow with the sequence, as an accelerator holds them:
            its shard of every gradient and the weights FSDP gathers, two blocks at a time (`gradients_and_gathered`).
            The programs' own constant term is not used: XLA sums each FSDP gradient whole before slicing it on the
            CPU, and keeps every gathered weight for the whole step, where PyTorch's FSDP frees each after use.
        rows_split: The devices the batch is split over (the traced scores are the whole batch's).
        how: How the programs were compiled and fitted, in words.
    """
    fused = levers.attention == "fused"

    def narrow(terms: Terms, linear: float, quadratic: float) -> Terms:
        return Terms(terms.constant, terms.linear * linear, 0.0 if fused else terms.quadratic * quadratic)

    if block is None:  # one program, one share for all of it
        base = narrow(whole, kept.block_linear, kept.block_quadratic)
    else:  # the first block at the blocks' share, the rest (embedding, logits, loss) at theirs
        if not _sane(block):  # the buffers did not grow as a polynomial: what one block grew by, shared out as
            block = _traced(block, kept, rows_split)  # the traced residuals share it
        outside = whole - block
        base = Terms(whole.constant, max(0.0, outside.linear) * kept.linear + block.linear * kept.block_linear,
                     0.0 if fused else max(0.0, outside.quadratic) * kept.quadratic +
                     block.quadratic * kept.block_quadratic)
    temporaries = held + base.linear + base.quadratic
    pulled = ["attention fused" if fused else "", "blocks rematerialised" if levers.remat else ""]
    how = f"{how}, {' and '.join(filter(None, pulled))}"
    memory = one
    if block is not None and depth:
        added = narrow(block, kept.block_linear, kept.block_quadratic)
        per_block = block_input if levers.remat else added.linear + added.quadratic
        temporaries += (depth - 1) * per_block
        grown = {f: getattr(one, f) + (depth - 1) * (getattr(two, f) - getattr(one, f))
                 for f in ("arguments", "outputs", "aliased")}
        memory = replace(one, **grown)
        how += f", 1 and 2 of its {depth} blocks, each further block counted as the second"
    return replace(memory, temporaries=max(0, round(temporaries)), how=how)


def _wide(own: float, share: float, rows_split: int) -> float:
    """Bytes per device as XLA CPU keeps them (f32 for bf16) of `own` bytes of the whole batch in their own types."""
    return own / share / rows_split if share else 0.0


def _sane(block: Terms) -> bool:
    """Whether one block's fitted growth reads as activations do: no negative term."""
    return block.linear >= 0 and block.quadratic >= 0


def _traced(block: Terms, kept, rows_split: int) -> Terms:
    """One block's growth at the sequence length as XLA CPU measured it, shared between what grows with the sequence
    and what grows with its square as the traced residuals share it (a device's share of the batch). On an
    accelerator's own program (nothing traced) each term stands alone, none below zero: its scores are fitted at
    short lengths, where a few bytes of noise grow to gigabytes at the step's length, and must not eat the rest."""
    if not (kept.block_linear_bytes or kept.block_quadratic_bytes):
        return Terms(block.constant, max(0.0, block.linear), max(0.0, block.quadratic))
    grown = block.linear + block.quadratic
    linear = _wide(kept.block_linear_bytes, kept.block_linear, rows_split)
    quadratic = _wide(kept.block_quadratic_bytes, kept.block_quadratic, rows_split)
    share = linear / (linear + quadratic) if linear + quadratic else 1.0
    return Terms(block.constant, grown * share, grown * (1 - share))
