"""Support package for the course on device meshes with Keras 3 on JAX.

Everything here runs the real `keras.distribution` code and returns real
Keras and JAX objects; the package adds checks, tables and drawings. Call
`setup_devices` first, before anything starts JAX.

The lessons import one flat API, `from course_utils import ...`. Each name is
loaded from its module on first use, so a worker script that needs only
`setup_process` never loads matplotlib, ipywidgets or the lessons' checkers.

The package has five parts:
- the teaching library: real Keras/JAX objects in, plain data (placements,
  layout tables, cost reports) out. At the top, what every lesson meets
  (`devices`, `mesh`, `placements`, `train`, `equivalence`, `checkpoints`);
  a folder per concept built on them: `layouts/` (which rule lays out each
  variable, and what is wrong with a map), `memory/` (bytes per device, from
  shards or shapes; activations; presets; will it fit?) and `communication/`
  (one training step compiled, its collectives read, attributed and set
  beside the layout's expectation);
- `viz` and `widgets`: figures and explorers that draw that data;
- `multiprocess`: several processes, one mesh (`python -m course_utils.launch`);
- `exercises`: what a learner's exercise cells call (`check`, `progress`,
  `expect_error`), one checker module per lesson;
- `course`: the machinery that publishes, grades, checks and times the course
  (`python -m course_utils.course <job>`), which no lesson imports.
"""

import importlib
import os

# The course runs Keras on JAX; importing this package must not let a later
# `import keras` fall back to another backend.
os.environ.setdefault("KERAS_BACKEND", "jax")

_EXPORTS = {
    "course_utils.devices": ("DeviceSetup", "current_setup", "setup_devices"),
    "course_utils.device_choice": ("DeviceSetupError",),
    "course_utils.mesh": ("describe_distribution", "describe_mesh", "make_mesh", "mesh_shapes"),
    "course_utils.placements": ("Block", "Placement", "placement", "planned_placement", "shard_of"),
    "course_utils.layouts.layout_map": ("LayoutReport", "explain_layout", "make_layout_map"),
    "course_utils.layouts.checks": ("check_layout_map",),
    "course_utils.layouts.derive": ("DerivedLayout", "derive_layout_map"),
    "course_utils.layouts.hybrid": ("hybrid_parallel", "over_replicas"),
    "course_utils.layouts.zero": ("split_optimizer_state", "zero_parallel"),
    "course_utils.layouts.problems": ("LayoutMapError", "Problem"),
    "course_utils.memory.state": ("MemoryReport", "memory_report", "planned_memory"),
    "course_utils.memory.presets": ("PRESETS", "abstract_model", "training_memory", "without_axis"),
    "course_utils.memory.activations": ("saved_for_backward",),
    "course_utils.memory.fit": ("FitReport", "will_it_fit"),
    "course_utils.communication.report": ("CommunicationReport", "communication_report"),
    "course_utils.communication.traffic": ("compare_communication",),
    "course_utils.communication.hlo": ("collective_ops",),
    "course_utils.memory.compiled": ("step_memory",),
    "course_utils.sequence": ("attention_memory", "block_memory", "full_attention", "longest_sequence",
                              "ring_attention", "ring_schedule", "ring_self_attention"),
    "course_utils.advice.advise": ("advise",),
    "course_utils.advice.ranking": ("Advice",),
    "course_utils.advice.program": ("StepProgram", "read_step"),
    "course_utils.advice.estimate": ("StepTime", "crossover", "step_time"),
    "course_utils.hardware": ("DeviceSet", "device_set"),
    "course_utils.pipeline": ("Schedule", "schedule"),
    "course_utils.serving": ("DecodeProgram", "DecodeTime", "cache_bytes", "cache_bytes_per_token", "catch_up",
                             "decode_points", "decode_step", "decode_time", "kv_cache_shape", "loading_peaks",
                             "read_decode", "read_program"),
    "course_utils.train": ("TrainingRun", "reordered_rows", "run_training"),
    "course_utils.equivalence": ("Comparison", "RunComparison", "compare_runs", "compare_weights"),
    "course_utils.checkpoints": ("load_checkpoint", "save_checkpoint"),
    "course_utils.multiprocess": ("ProcessOwnership", "ProcessSetup", "local_rows", "planned_batch_slices",
                                  "process_batch_slice", "process_ownership", "setup_process"),
    "course_utils.viz": ("device_color", "draw_advice", "draw_batch_split", "draw_block_memory", "draw_bytes",
                         "draw_collectives_by", "draw_decode", "draw_fit", "draw_memory", "draw_memory_by", "draw_mesh",
                         "draw_model", "draw_placement", "draw_process_mesh", "draw_ring", "draw_roofline",
                         "draw_schedule"),
    "course_utils.widgets": ("layout_explorer", "mesh_explorer", "model_explorer"),
    "course_utils.exercises": ("check",),
    "course_utils.exercises.progress": ("progress",),
    "course_utils.exercises.mistakes": ("expect_error",),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
# the modules and folders of the package, reachable as attributes (course_utils.models, course_utils.memory)
_SUBMODULES = ("advice", "cache_folder", "checkpoint_problems", "checkpoints", "communication", "course", "devices",
               "device_choice", "equivalence", "exercises", "guards",
               "hardware", "jax_internals", "keras_internals", "layout_axes", "layouts", "memory", "mesh", "models", "multiprocess",
               "pipeline", "placements", "program_cache", "sequence", "serving", "step_replay", "train", "viz", "widgets", "xla_settings")

__all__ = sorted(_HOME)


def __getattr__(name: str):
    """Loads a public name (or a submodule such as `course_utils.models`) on first use."""
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'course_utils' has no attribute {name!r}. Public names: {', '.join(__all__)}.")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
