"""The advisor's read steps, kept beside the compiled programs: a step read before is read back, not traced again.

Compiling a candidate's step is cached already (the course's compilation cache, `program_cache`); tracing Keras's
training step to find that program is not, and it is most of a warm `advise` (a 7B preset's 22 candidates: about
20 of its 25 seconds). So the advisor keeps what it read of each step (`program.StepProgram`) in the same checked
cache, under a key made of everything that decides the program:

- the model: its class, its config and compile config, every variable's path, shape and dtype, its dtype policy;
- the batch's shapes and dtypes; the candidate: its layout's name and rules, its mesh shape and axes, the kind of
  distribution (`ModelParallel`, HSDP's, ZeRO's); how FSDP runs (`FsdpRun`); the accelerator whose own program
  was compiled (a GPU's or a TPU's, described as the advisor describes it), or none for XLA's CPU program;
- the versions of Keras, JAX, jaxlib and keras-hub, `XLA_FLAGS`, JAX's precision settings, the device count, and a
  digest of the course's own source: a change to any module of `course_utils` reads every step again.

An entry is checked as a compiled program is (its digest, its owner), and one that cannot be read back is a miss. No
cache (`COURSE_COMPILATION_CACHE=off`): every step is read anew.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
from pathlib import Path

PREFIX = "advisor-step-"
_PACKAGE = Path(__file__).resolve().parents[1]


def read_kept(model, candidate, tokens, fsdp, read, target=None):
    """The candidate's step as `read()` reads it, or as it was read before with everything that decides it alike
    (`target`: the accelerator whose own program `read()` compiles, None for XLA's CPU program)."""
    from course_utils.program_cache import installed

    cache = installed()
    if cache is None:
        return read()
    key = PREFIX + step_key(model, candidate, tokens, fsdp, target)
    kept = cache.get(key)
    if kept is not None:
        try:
            return pickle.loads(kept)
        except Exception:  # noqa: BLE001 (an entry of another shape is a miss, read again below)
            pass
    program = read()
    cache.put(key, pickle.dumps(program))
    return program


def step_key(model, candidate, tokens, fsdp, target=None) -> str:
    """A digest of everything that decides a candidate's compiled step (see the module's notes)."""
    import jax

    described = {
        "source": source_digest(), "versions": _versions(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax": [str(jax.config.jax_enable_x64), str(jax.config.jax_default_matmul_precision), jax.device_count()],
        "model": [f"{type(model).__module__}.{type(model).__qualname__}", _config(model.get_config),
                  _config(getattr(model, "get_compile_config", lambda: None)), str(model.dtype_policy.name),
                  [(v.path, tuple(v.shape), str(v.dtype)) for v in model.weights]],
        "candidate": [candidate.layout, list(candidate.mesh_shape), list(candidate.axes), candidate.zero,
                      sorted((key, repr(tuple(layout.axes))) for key, layout in candidate.layout_map.items())],
        "tokens": [str(jax.tree.structure(tokens)),  # arrays' shapes and dtypes, or the input's shape as given
                   [(tuple(leaf.shape), str(leaf.dtype)) if hasattr(leaf, "shape") else repr(leaf)
                    for leaf in jax.tree.leaves(tokens)]],
        "fsdp": repr(fsdp),
        "target": repr(target),  # ("gpu", its DeviceSet) or ("tpu", its slice): the program compiled for it
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of every Python file of `course_utils`, read once a process."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _versions() -> list[str]:
    from importlib import metadata

    found = []
    for name in ("keras", "jax", "jaxlib", "keras-hub"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return found


def _config(get):
    try:
        return get()
    except Exception as error:  # noqa: BLE001 (a config Keras cannot write is keyed by what it says instead)
        return f"unserialisable: {type(error).__name__}: {error}"
