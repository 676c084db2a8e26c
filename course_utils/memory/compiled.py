"""Memory from the compiled step: the bytes per device XLA's buffer assignment gives one training step.

`step_memory(model, distribution, batch)` compiles Keras's real training step as `fit` runs it (the
state donated, XLA's default options) for a real or a shape-only model, nothing allocated, and reads
`memory_analysis()`: the arguments (the state and the batch), the outputs (the new state, written where
the old one was: aliased), and XLA's temporary buffers (what the forward pass keeps for the backward
pass, the gradients, working space). A device's peak is arguments + outputs + temporaries - aliased.

`backbone_step_memory` does it for a keras-hub backbone's causal language model, at a 7B model's size:
its decoder blocks are alike, so it compiles the model with one block and with two and extends what the
second one added to every block of its depth. A 7B step compiles in seconds that way; whole, it would
take minutes and gigabytes of compiler memory.

This is XLA's CPU program: it keeps bf16 collectives in f32 and writes a reduce-scatter as an all-reduce
and a slice, so an accelerator's program can need somewhat less. `fit.will_it_fit(compiled=True)` sets
it beside the traced estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from course_utils.communication.train_step import compile_train_step


@dataclass(frozen=True)
class StepMemory:
    """Bytes per device of one compiled training step, as XLA assigns its buffers (`memory_analysis()`).

    Attributes:
        arguments: The state and the batch the step takes.
        outputs: The new state (and the loss) it returns.
        temporaries: XLA's temporary buffers: activations kept for the backward pass, gradients, working space.
        aliased: Outputs written where a donated argument was (the new state over the old).
        how: How the figure was found, in words ("compiled whole", or extended from one and two blocks).
    """

    arguments: int
    outputs: int
    temporaries: int
    aliased: int
    how: str = "compiled whole"

    @property
    def peak(self) -> int:
        """Bytes a device needs at the step's peak: arguments + outputs + temporaries - aliased."""
        return self.arguments + self.outputs + self.temporaries - self.aliased


def step_memory(model, distribution, batch, *, quick: bool = False) -> StepMemory:
    """Bytes per device of one training step of `model` under `distribution`, from XLA's compiled program.

    Args:
        model: A compiled Keras model (real, or shape-only: `presets.abstract_model`; nothing is allocated).
        distribution: The distribution the step runs under.
        batch: `(x, y[, sample_weight])` as `jax.ShapeDtypeStruct`s or arrays (shapes and dtypes are read).
        quick: Compile with XLA's backend optimisations off (`xla_settings.READING_COMPILE`), several times
            sooner: the same state and batch, and temporaries within 0.5 % (tests/memory/test_compiled.py).
    """
    from course_utils.communication.train_step import training_batch
    from course_utils.xla_settings import READING_COMPILE

    return memory_of(compile_train_step(model, distribution, training_batch(model, batch),
                                        options=READING_COMPILE if quick else None, donate=True))


def memory_of(compiled) -> StepMemory:
    """A compiled program's buffers per device, as XLA's `memory_analysis()` gives them."""
    analysis = compiled.memory_analysis()
    return StepMemory(analysis.argument_size_in_bytes, analysis.output_size_in_bytes,
                      analysis.temp_size_in_bytes, analysis.alias_size_in_bytes)


def extended_memory(one: StepMemory, two: StepMemory, depth: int, *, how: str) -> StepMemory:
    """A model of `depth` alike blocks from its steps with one block and with two: what the second block
    added, counted once for every further block."""
    values = [getattr(one, f.name) + (depth - 1) * (getattr(two, f.name) - getattr(one, f.name))
              for f in fields(StepMemory) if f.name != "how"]
    return StepMemory(*values, how=how)


def backbone_step_memory(backbone, distribution, batch: int, seq: int) -> StepMemory:
    """Bytes per device of one training step of a keras-hub backbone's causal language model (Adam, sparse
    cross-entropy on `batch` sequences of `seq` tokens), from compiled programs, nothing allocated.

    A backbone with `num_layers` is compiled with one decoder block and with two, and what the second
    added is counted once for every further block; any other model is compiled whole.
    """
    config = backbone.get_config()
    depth = config.get("num_layers")
    if not isinstance(depth, int) or depth < 2:
        return _language_model_memory(type(backbone), config, distribution, batch, seq)
    one, two = (_language_model_memory(type(backbone), {**config, "num_layers": n}, distribution, batch, seq)
                for n in (1, 2))
    return extended_memory(one, two, depth, how=f"compiled with 1 and 2 of its {depth} decoder blocks, each further "
                                                f"block counted as the second")


def _language_model_memory(backbone_class, config: dict, distribution, batch: int, seq: int) -> StepMemory:
    model, tokens = language_model_step(backbone_class, config, batch, seq)
    return step_memory(model, distribution, tokens)


def language_model_step(backbone_class, config: dict, batch: int, seq: int) -> tuple:
    """A shape-only keras-hub causal language model of `config`, compiled as the course trains one (Adam,
    sparse cross-entropy), and the batch of `batch` sequences of `seq` tokens its step takes (shapes only)."""
    import jax
    import keras

    from course_utils.memory.presets import causal_lm_of, shape_only_backbone
    from course_utils.memory.state import shape_only_optimizer

    model = causal_lm_of(shape_only_backbone(backbone_class, config))
    model.compile(optimizer=shape_only_optimizer(keras.optimizers.Adam(name="adam"), model),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    tokens = jax.ShapeDtypeStruct((batch, seq), "int32")
    return model, ({"token_ids": tokens, "padding_mask": tokens}, tokens)
