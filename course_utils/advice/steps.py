"""The steps the advisor compiles for each candidate: built once, read per layout.

A keras-hub backbone is trained as a causal language model; a deep one is compiled with one block and with two
and extended to its depth (`program.extended`). With a lever on its activations (`levers`: fused attention,
rematerialisation) each is compiled at three sequence lengths too, and its memory fitted (an accelerator's own
program at three short points of the step's tokens instead, `levers.own_points`); with micro-batches, at the
micro-batch. Any other model is compiled whole, at the batch (or micro-batch) it is given. A layout is
looked up when the step is compiled, not when the model is built, so one model serves every candidate.
"""

from __future__ import annotations

from dataclasses import replace

from course_utils.advice.candidates import Candidate
from course_utils.advice.levers import (OWN_TYPES, Levers, equal_tokens_fitted, fitted, levered_memory, own_points,
                                        seq_points)
from course_utils.advice.program import FsdpRun, StepProgram, extended, read_step
from course_utils.advice.step_cache import read_kept


class Steps:
    """The models whose steps are compiled for every candidate, and how each candidate's step is read."""

    def __init__(self, model, batch: int, seq: int | None, language: bool, levers: Levers = Levers(),
                 fsdp: FsdpRun | None = None):
        from course_utils.memory.compiled import language_model_step

        self.levers, self.seq, self.depth, self.language, self.model = levers, seq, None, language, model
        self.fsdp = fsdp
        self.rows = levers.micro_batch or batch
        if not language:
            self.built = {None: model}
            self.input_shape = (self.rows, *tuple(model.inputs[0].shape)[1:])
            return
        config = model.get_config()
        depth = config.get("num_layers")
        self.depth = depth if isinstance(depth, int) and depth >= 2 else None
        self.hidden, self.compute_dtype = config.get("hidden_dim"), model.dtype_policy.compute_dtype
        self.built = {n: language_model_step(type(model), {**config, "num_layers": n} if n else config, self.rows,
                                             seq)[0] for n in ((1, 2) if self.depth else (None,))}
        self.kept = _kept(model, config, self.rows, seq) if levers.memory else None

    def read(self, candidate: Candidate, target=None) -> StepProgram:
        """The candidate's step, read from XLA's CPU program (or from an accelerator's own for `target`: ("tpu", a
        slice) or ("gpu", a device set), its FLOPs still the CPU program's), extended to the model's depth and with
        the levers pulled. With levers on an accelerator's own program, that program is compiled at short lengths
        of the step's tokens (`levers.own_points`) and the CPU program at the step's length for its FLOPs."""
        if not self.language:
            return self._read(None, self.input_shape, candidate, target)
        step = (self.rows, self.seq)
        if not self.levers.memory:
            return self._whole({n: self._read(n, _tokens(*step), candidate, target) for n in self.built})
        programs, terms, kept, how = self._own_fit(candidate, target) if target else self._cpu_fit(candidate)
        whole = self._whole(programs)
        first = 1 if self.depth else None
        memory = levered_memory(terms[first], terms[2] - terms[1] if self.depth else None, programs[first].memory,
                                programs[2].memory if self.depth else None, self.depth, self.levers, kept,
                                self._block_input(candidate), gradients_and_gathered(self.model, candidate),
                                rows_split=candidate.batch_split, how=how)
        return replace(whole, memory=memory, recomputed=whole.flops / 3 if self.levers.remat else 0.0)

    def _own_fit(self, candidate: Candidate, target):
        """The programs at the step's tokens, with one block and two, from the accelerator's own compiled at three
        short points (the CPU program's FLOPs at the step's length), their memory's terms, and how it was found."""
        step = (self.rows, self.seq)
        points = own_points(*step)
        own = {(n, p): self._own(n, _tokens(*p), candidate, target) for n in self.built for p in points}
        programs = {n: replace(own[n, points[0]], flops=self._cpu(n, _tokens(*step), candidate).flops)
                    for n in self.built}
        terms = {n: equal_tokens_fitted({p: own[n, p].memory.temporaries for p in points}, self.seq)
                 for n in self.built}
        return programs, terms, OWN_TYPES, (f"compiled at {points[0][1]:,} and {points[1][1]:,} tokens a sequence with "
                                            f"the step's tokens a device, and at {points[2][1]:,} with half of them, "
                                            f"fitted")

    def _cpu_fit(self, candidate: Candidate):
        """The programs at the step's length, with one block and two, from XLA's CPU program compiled at three
        lengths, their memory's terms, the share of its bytes an accelerator keeps, and how it was found."""
        points = [(self.rows, s) for s in seq_points(self.seq)]
        cpu = {(n, p): self._cpu(n, _tokens(*p), candidate) for n in self.built for p in points}
        terms = {n: fitted({s: cpu[n, (r, s)].memory.temporaries for r, s in points}, self.seq) for n in self.built}
        return ({n: cpu[n, (self.rows, self.seq)] for n in self.built}, terms, self.kept,
                f"compiled at {', '.join(f'{s:,}' for _, s in points)} tokens, fitted")

    def _whole(self, programs: dict) -> StepProgram:
        """The model's step from its programs: extended from one block and two to its depth, or compiled whole."""
        return extended(programs[1], programs[2], self.depth) if self.depth else programs[None]

    def _read(self, n, tokens, candidate: Candidate, target) -> StepProgram:
        """The step with `n` blocks (None: the model as built) from the CPU program, or the accelerator's own with
        the CPU program's FLOPs."""
        program = self._cpu(n, tokens, candidate)
        return replace(self._own(n, tokens, candidate, target), flops=program.flops) if target else program

    def _cpu(self, n, tokens, candidate: Candidate) -> StepProgram:
        """The step with `n` blocks on `tokens`, from XLA's CPU program (read back when read before)."""
        model = self.built[n]
        return read_kept(model, candidate, tokens, self.fsdp,
                         lambda: read_step(model, candidate.distribution(), tokens, fsdp=self.fsdp))

    def _own(self, n, tokens, candidate: Candidate, target) -> StepProgram:
        """The step with `n` blocks on `tokens`, from the accelerator's own program (read back when read before)."""
        model = self.built[n]
        return read_kept(model, candidate, tokens, self.fsdp, lambda: _own_step(target, model, candidate, tokens),
                         target=target)

    def _block_input(self, candidate: Candidate) -> int:
        """Bytes of one block's input on a device: its rows of the batch, each of `seq` tokens of `hidden`."""
        itemsize = 2 if "16" in str(self.compute_dtype) else 4
        return self.rows // candidate.batch_split * self.seq * self.hidden * itemsize


def _own_step(target, model, candidate: Candidate, tokens) -> StepProgram:
    kind, where = target
    if kind == "tpu":
        from course_utils.advice.tpu import read_tpu_step

        return read_tpu_step(model, candidate.layout_map, candidate.mesh_shape, tokens, where, zero=candidate.zero)
    from course_utils.advice.gpu import read_gpu_step

    return read_gpu_step(model, candidate.layout_map, candidate.mesh_shape, tokens, where, zero=candidate.zero)


def gradients_and_gathered(model, candidate: Candidate) -> int:
    """Bytes a device holds in a step beside its state and activations, by `will_it_fit`'s rules: its shard of every
    gradient (the fullest device's) and the weights FSDP gathers (the two largest blocks' at a time)."""
    from course_utils.layouts.layout_map import layout_rows
    from course_utils.memory.fit import gathered_weights
    from course_utils.memory.state import planned_memory

    distribution = candidate.distribution()
    gradients = max(row.gradients for row in planned_memory(model, distribution).rows)
    return gradients + gathered_weights(layout_rows(model, distribution, compare_arrays=False),
                                        candidate.fsdp_split)


def _tokens(rows: int, seq: int) -> tuple:
    import jax

    tokens = jax.ShapeDtypeStruct((rows, seq), "int32")
    return {"token_ids": tokens, "padding_mask": tokens}, tokens


def _kept(model, config: dict, rows: int, seq: int):
    from course_utils.memory.activations import kept_types

    return kept_types(type(model), {**config, "num_layers": 1}, rows, seq)
