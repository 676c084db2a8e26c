"""Will it fit? Bytes per device of a model's training state, from shapes alone.

A float32 Gemma 7B holds 34 GB of weights: too much to build on a laptop just
to ask where its shards would go. Here the model is built with shape-only
variables (`keras.StatelessScope(initialize_variables=False)`: every variable
has its path, shape and dtype, and no value), Keras's own
`distribution.get_variable_layout` gives each one its layout, and JAX's
sharding gives the block each device would hold. Nothing is allocated. The
numbers equal `memory_report` of the really built model, byte for byte
(tests/memory/test_presets.py checks it on a model that fits); `memory.planned_memory` does the sums.

Counted: weights, one gradient per trainable weight, the optimizer's state.
Not counted: activations, which grow with batch size and sequence length.
`fit.will_it_fit` puts models and meshes side by side against device sizes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from course_utils.keras_internals import forget_deferred
from course_utils.layouts.layout_map import make_layout_map
from course_utils.memory.state import MemoryReport, planned_memory

GIB = 2**30
LAYOUTS = ("official", "tensor_parallel", "replicated")
MESH_AXES = ("batch", "model")  # the axis names keras-hub's get_layout_map uses by default
_GEMMA = "Gemma report (arXiv:2403.08295), Table 1, and the config.json of keras-hub's preset"
_LLAMA = "Llama 3 config.json (meta-llama/Meta-Llama-3-8B) and the config.json of keras-hub's preset"
_QWEN = ("Qwen2.5-7B config.json (Qwen/Qwen2.5-7B): 7.62 billion parameters, as Qwen's model card and keras-hub's "
         "metadata of qwen2.5_math_7b_en (the same architecture) give; keras-hub's metadata of qwen2.5_7b_en says "
         "6.99 billion, which its own config does not build")
_QWEN_MOE = "Qwen1.5-MoE-A2.7B config.json (Qwen/Qwen1.5-MoE-A2.7B): 60 experts, 4 of them per token, and a shared expert"


@dataclass(frozen=True)
class Preset:
    """A real model's published shape: its keras-hub backbone class and config.

    The config numbers are written here (the preset files live on Kaggle and
    are never downloaded); `params` reads keras-hub's own preset metadata,
    which ships in the package, and the tests check the two agree.
    """

    name: str
    backbone: str
    config: dict = field(repr=False)
    source: str = field(repr=False)
    counted_as: str = ""  # the keras-hub preset whose metadata gives its parameter count, when not `name`

    def backbone_class(self):
        import keras_hub

        return getattr(keras_hub.models, self.backbone)

    @property
    def params(self) -> int:
        """The parameter count keras-hub's preset metadata gives."""
        return int(self.backbone_class().presets[self.counted_as or self.name]["metadata"]["params"])


PRESETS = {p.name: p for p in (
    Preset("gemma_2b_en", "GemmaBackbone", dict(
        vocabulary_size=256000, num_layers=18, num_query_heads=8, num_key_value_heads=1,
        hidden_dim=2048, intermediate_dim=32768, head_dim=256), _GEMMA),
    Preset("gemma_7b_en", "GemmaBackbone", dict(
        vocabulary_size=256000, num_layers=28, num_query_heads=16, num_key_value_heads=16,
        hidden_dim=3072, intermediate_dim=49152, head_dim=256), _GEMMA),
    Preset("llama3_8b_en", "Llama3Backbone", dict(
        vocabulary_size=128256, num_layers=32, num_query_heads=32, num_key_value_heads=8,
        hidden_dim=4096, intermediate_dim=14336, rope_max_wavelength=500000), _LLAMA),
    Preset("qwen2.5_7b_en", "QwenBackbone", dict(
        vocabulary_size=152064, num_layers=28, num_query_heads=28, num_key_value_heads=4, hidden_dim=3584,
        intermediate_dim=18944, rope_max_wavelength=1000000, tie_word_embeddings=False), _QWEN,
        counted_as="qwen2.5_math_7b_en"),
    Preset("qwen1.5_moe_2.7b_en", "QwenMoeBackbone", dict(
        vocabulary_size=151936, num_layers=24, num_query_heads=16, num_key_value_heads=16, hidden_dim=2048,
        intermediate_dim=5632, moe_intermediate_dim=1408, shared_expert_intermediate_dim=5632, num_experts=60,
        top_k=4, rope_max_wavelength=1000000, tie_word_embeddings=False), _QWEN_MOE),
)}


def abstract_model(model, config: dict | None = None, **overrides):
    """Builds a keras-hub backbone, or any Keras model, with shape-only variables: paths, shapes, dtypes, no values.

    Args:
        model: A preset name from `PRESETS` (e.g. "gemma_7b_en"), a `Preset`,
            a keras-hub backbone class such as `keras_hub.models.GemmaBackbone`, or a function
            that builds your own model with no arguments (`abstract_model(build_block)`).
        config: The backbone's arguments, when `model` is a class.
        **overrides: Arguments that replace the config's, e.g. `dtype="bfloat16"`.

    Returns:
        A Keras model whose variables hold no memory. Ask it for shapes and
        paths only: reading a variable's value would allocate it. A preset
        named by its name is built once per session for each set of overrides:
        asked again (by a lesson and its checkers), the same shape-only model
        comes back.
    """
    _check_dtype(overrides.get("dtype"))
    key = _overrides_key(overrides)
    if isinstance(model, str) and config is None and key is not None:
        return _preset_model(model, key)
    return _build_abstract(model, config, overrides)


# The dtype policies a shape-only model is built in: Keras's float policies. (Keras reads "float8" and
# "int8" as quantization modes, which a model gets from `quantize()` after it is built, not as a dtype.)
DTYPE_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def _check_dtype(dtype) -> None:
    if dtype is None or not isinstance(dtype, str) or dtype in DTYPE_POLICIES:
        return  # a DTypePolicy object goes to Keras as it is
    raise ValueError(f"dtype must be one of {DTYPE_POLICIES} (a Keras dtype policy). Received: dtype={dtype!r}."
                     + (" Keras quantizes a built model to float8 or int8 with model.quantize(...); its training "
                        "state is not sized here." if dtype in ("float8", "int8", "int4") else ""))


def _overrides_key(overrides: dict) -> tuple | None:
    """The overrides as a cache key; None when one cannot be (e.g. a list: that model is built afresh)."""
    key = tuple(sorted(overrides.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


@functools.cache
def _preset_model(name: str, overrides: tuple):
    return _build_abstract(name, None, dict(overrides))


def _build_abstract(model, config, overrides):
    import keras

    backbone_class, config = _resolve(model, config)
    with keras.StatelessScope(initialize_variables=False):
        built = backbone_class(**{**config, **overrides})
    forget_deferred(built.variables)
    return built


def shape_only_backbone(backbone_class, config: dict):
    """A keras-hub backbone of `backbone_class` with shape-only variables, built from `config`."""
    return _build_abstract(backbone_class, config, {})


def causal_lm_of(backbone):
    """The keras-hub causal language model around `backbone` (GemmaBackbone -> GemmaCausalLM), no preprocessor.

    It adds no weights of its own (a shape-only backbone stays shape-only), only the head's use of them.
    """
    task = causal_lm_class(type(backbone))
    if task is None:
        raise ValueError(f"keras-hub has no causal language model for {type(backbone).__name__}: pass a language "
                         f"model's backbone (Gemma, Llama, Qwen ...).")
    # a name of its own, always the same: each model built for the same step compiles to the same program (Keras
    # would number a second one, and the compilation cache would miss it)
    return task(backbone=backbone, preprocessor=None,
                name=f"{task.__name__.removesuffix('CausalLM').lower()}_causal_lm")


def causal_lm_class(backbone_class):
    """keras-hub's causal language model of `backbone_class` (GemmaBackbone -> GemmaCausalLM), or of the first
    keras-hub backbone it derives from (a backbone of your own built on GPT2Backbone trains as GPT2CausalLM); None
    when there is none."""
    import keras_hub

    for cls in getattr(backbone_class, "__mro__", ()):
        task = cls.__name__.endswith("Backbone") and getattr(
            keras_hub.models, cls.__name__.removesuffix("Backbone") + "CausalLM", None)
        if task:
            return task
    return None


def _resolve(model, config):
    if isinstance(model, str):
        if model not in PRESETS:
            raise ValueError(f"Unknown preset {model!r}. Known: {sorted(PRESETS)}; or pass a keras-hub "
                             f"backbone class and its config.")
        model = PRESETS[model]
    if isinstance(model, Preset):
        return model.backbone_class(), dict(model.config)
    if callable(model) and not isinstance(model, type) and config is None:
        return model, {}  # a function that builds any Keras model: called with no arguments
    if not isinstance(model, type) or config is None:
        raise ValueError(f"Pass a preset name, a Preset, a backbone class with config=, or a function that builds "
                         f"your model. Received: model={model!r}, config={config!r}.")
    return model, dict(config)


def without_axis(layout_map, axis: str):
    """A copy of a LayoutMap in which every `axis` entry is `None` (that dimension not split).

    `without_axis(official, "batch")` keeps a keras-hub map's tensor
    parallelism over `model` and drops its weight sharding over `batch`.
    """
    rules = {key: tuple(None if a == axis else a for a in layout.axes) for key, layout in layout_map.items()}
    return make_layout_map(layout_map.device_mesh, rules)


def distribution_for(backbone_class, mesh, layout="official"):
    """The `ModelParallel` of a keras-hub backbone on `mesh` (axes `MESH_AXES`) for a layout.

    Args:
        backbone_class: e.g. `keras_hub.models.GemmaBackbone`.
        mesh: A `DeviceMesh` with the axes "batch" and "model".
        layout: One of `LAYOUTS`: "official" is the backbone's `get_layout_map(mesh)`, "tensor_parallel"
            that map without its `batch` entries, "replicated" an empty map. Or your own: a dict of rules
            `{key: axes}` naming "batch" and "model", or a function `mesh -> LayoutMap`.
    """
    from keras import distribution

    if isinstance(layout, str):
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, a dict of rules or a function mesh -> LayoutMap. "
                             f"Received: layout={layout!r}.")
        official = backbone_class.get_layout_map(mesh)
        layout_map = {"official": official, "tensor_parallel": without_axis(official, "batch"),
                      "replicated": distribution.LayoutMap(mesh)}[layout]
    elif isinstance(layout, dict):
        layout_map = make_layout_map(mesh, layout)
    else:
        layout_map = layout(mesh)
        if not isinstance(layout_map, distribution.LayoutMap):
            raise TypeError(f"A layout function takes a mesh and returns a keras.distribution.LayoutMap. Received "
                            f"{type(layout_map).__name__} from {getattr(layout, '__name__', layout)!r}.")
    return distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")


def layout_name(layout) -> str:
    """A layout as a title names it: "the official layout", "your 4 rules", "the layout get_layout_map makes"."""
    if isinstance(layout, str):
        return f"the {layout} layout"
    if isinstance(layout, dict):
        return f"your {len(layout)} rule{'s' if len(layout) != 1 else ''}"
    return f"the layout {getattr(layout, '__name__', 'your function')} makes"


def training_memory(model, mesh_shape, *, config: dict | None = None, layout: str = "official",
                    optimizer=None, **overrides) -> MemoryReport:
    """Will it fit? Training-state bytes per device of a real model on a mesh, in one call.

    Args:
        model: A preset name ("gemma_7b_en"), a `Preset`, a keras-hub backbone
            class, or a backbone already built (e.g. by `abstract_model`).
        mesh_shape: `(batch, model)` sizes, e.g. `(2, 4)`.
        config: The backbone's arguments, when `model` is a class.
        layout: One of `LAYOUTS`.
        optimizer: A fresh Keras optimizer; defaults to `Adam()`.
        **overrides: Config arguments to replace, e.g. `dtype="bfloat16"`.

    Example:
        >>> training_memory("gemma_7b_en", (2, 4)).max_total / 2**30
        15.9...
    """
    import keras

    from course_utils.mesh import make_mesh

    built = model if isinstance(model, keras.Model) else abstract_model(model, config, **overrides)
    mesh = make_mesh(mesh_shape, MESH_AXES)
    return planned_memory(built, distribution_for(type(built), mesh, layout), optimizer=optimizer)
