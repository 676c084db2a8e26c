"""The steps the advisor compiles for each candidate: built once, read per layout.

A keras-hub backbone is trained as a causal language model; a deep one is compiled with one block and with two
and extended to its depth (`program.extended`). With a lever on its activations (`levers`: fused attention,
rematerialisation) each is compiled at three sequence lengths too, and its memory fitted; with micro-batches,
at the micro-batch. Any other model is compiled whole, at the batch (or micro-batch) it is given. A layout is
looked up when the step is compiled, not when the model is built, so one model serves every candidate.
"""

from __future__ import annotations

from dataclasses import replace

from course_utils.advice.candidates import Candidate
from course_utils.advice.levers import Levers, levered_memory, seq_points
from course_utils.advice.program import FsdpRun, StepProgram, extended, read_step
from course_utils.advice.step_cache import read_kept


class Steps:
    """The models whose steps are compiled for every candidate, and how each candidate's step is read."""

    def __init__(self, model, batch: int, seq: int | None, language: bool, levers: Levers = Levers(),
                 fsdp: FsdpRun | None = None):
        from course_utils.memory.compiled import language_model_step

        self.levers, self.seq, self.depth, self.language, self.model = levers, seq, None, language, model
        self.fsdp = fsdp
        rows = levers.micro_batch or batch
        self.rows = rows
        if not language:
            self.steps = {(None, None): (model, (rows, *tuple(model.inputs[0].shape)[1:]))}
            return
        config = model.get_config()
        depth = config.get("num_layers")
        self.depth = depth if isinstance(depth, int) and depth >= 2 else None
        self.hidden, self.compute_dtype = config.get("hidden_dim"), model.dtype_policy.compute_dtype
        seqs = seq_points(seq) if levers.memory else (seq,)
        self.steps = {}
        for n in ((1, 2) if self.depth else (None,)):
            built, _ = language_model_step(type(model), {**config, "num_layers": n} if n else config, rows, seq)
            for s in seqs:
                self.steps[n, s] = (built, _tokens(rows, s))
        self.kept = _kept(model, config, rows, seq) if levers.memory else None

    def read(self, candidate: Candidate, target=None) -> StepProgram:
        """The candidate's step, read from XLA's CPU program (or from an accelerator's own for `target`: ("tpu", a
        slice) or ("gpu", a device set), its FLOPs still the CPU program's), extended to the model's depth and with
        the levers pulled."""
        programs = {}
        for (n, s), (model, tokens) in self.steps.items():
            program = read_kept(model, candidate, tokens, self.fsdp,
                                lambda: read_step(model, candidate.distribution(), tokens, fsdp=self.fsdp))
            if target:
                own = _own_step(target, model, candidate, tokens)
                program = replace(own, flops=program.flops)
            programs[n, s] = program
        if not self.language:
            return programs[None, None]
        seq = self.seq
        whole = extended(programs[1, seq], programs[2, seq], self.depth) if self.depth else programs[None, seq]
        if not self.levers.memory:
            return whole
        memory = levered_memory({s: p.memory for (n, s), p in programs.items() if n in (1, None)},
                                {s: p.memory for (n, s), p in programs.items() if n == 2} or None, seq, self.depth,
                                self.levers, self.kept, self._block_input(candidate),
                                gradients_and_gathered(self.model, candidate), rows_split=candidate.batch_split)
        return replace(whole, memory=memory, recomputed=whole.flops / 3 if self.levers.remat else 0.0)

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
