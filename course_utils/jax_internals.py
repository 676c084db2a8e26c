"""What the course reads of JAX and XLA beyond their stable API, in one catalogue, each part probed.

`keras_internals` does the same for Keras. The readers are `layer_outputs` (which layer traced an
operation) and `hlo` (the collectives of a compiled program and what they move). A JAX upgrade that
changes one of these would not raise: the course would read nothing, or the wrong thing. So
`missing()` (run by the test suite and by `python -m course_utils.course doctor`) compiles a small sharded
program and checks that each part still reads as the course expects.

Checked against JAX `CHECKED_WITH`.
"""

from __future__ import annotations

CHECKED_WITH = "0.10.2"

# (what, who reads it): the parts of JAX's and XLA's output the course relies on.
READS = (
    ("`eqn.source_info.name_stack` of a traced jaxpr equation: the name scopes open when it was traced",
     "layer_outputs"),
    ("the op_name a compiled program gives a parameter: its argument path, e.g. \"state[0]['w']\"",
     "hlo (which variable a collective moves)"),
    ("a collective's line in the compiled text: its result shape, its replica_groups over the mesh, and "
     "metadata={op_name=\"jit(f)/<name scopes>/<primitive>\"} (lowered as `compiling.layer_names_kept` lowers)",
     "hlo (kind, axes, bytes, layer)"),
    ("the leaves of the function `jax.vjp` returns are what the backward pass keeps, each either an input "
     "(a jaxpr invar) or computed", "activations"),
    ("`jax._src.config.include_full_tracebacks_in_locations(True)`: a context that turns the option on in "
     "this thread only, and restores it", "compiling.layer_names_kept (the layer names in op_name)"),
    ("`jax._src.config.compilation_cache_include_metadata_in_key(False)`: a context that keys this thread's "
     "compiled programs without their metadata, and restores the setting", "compiling.keyed_without_names "
     "(the one-device step a sharded run's steps are replayed on)"),
    ("`jax._src.compilation_cache._cache`: the object JAX reads and writes persistent compiled programs "
     "through, by `get(key)` and `put(key, value)`", "program_cache.install (every cached program checked)"),
    ("`jaxlib.xla_client.load_pjrt_plugin_dynamically(name, path)` and `make_c_api_device_topology(c_api, '', "
     "topology=..., target_config=...)._make_compile_only_devices()`: a PJRT plugin loaded after JAX started, and "
     "devices to compile for that are not there", "advice.gpu (a GPU's own program without a GPU)"),
)


def load_plugin(name: str, path: str):
    """A PJRT plugin's C API, loaded from `path` after JAX's backends started (none is registered with it)."""
    from jax._src.lib import xla_client

    return xla_client.load_pjrt_plugin_dynamically(name, path)


def compile_only_devices(c_api, **options) -> list:
    """Devices of a topology the plugin describes from `options` (e.g. topology="1x1x8", target_config=...), to
    compile for without them."""
    from jax._src.lib import xla_client

    return list(xla_client.make_c_api_device_topology(c_api, "", **options)._make_compile_only_devices())


def _name_stack_is_read() -> bool:
    import jax

    def f(x):
        with jax.named_scope("course_probe"):
            return x * 2.0

    eqns = jax.make_jaxpr(f)(1.0).jaxpr.eqns
    return [str(eqn.source_info.name_stack) for eqn in eqns] == ["course_probe"]


def _residuals_are_read() -> bool:
    import jax
    import jax.numpy as jnp

    def saved(w, x):
        return jax.tree.leaves(jax.vjp(lambda w: jnp.sum(jnp.sin(x @ w)), w)[1])

    jaxpr = jax.make_jaxpr(saved)(jnp.ones((3, 2)), jnp.ones((4, 3))).jaxpr
    computed = [v for v in jaxpr.outvars if hasattr(v, "aval") and v not in set(jaxpr.invars)]
    return sorted(tuple(v.aval.shape) for v in computed) == [(4, 2)]  # cos(x @ w): what sin's gradient needs


def _locations_are_kept() -> bool:
    import jax

    from course_utils.xla_settings import layer_names_kept

    before = jax.config.jax_include_full_tracebacks_in_locations
    with layer_names_kept():
        inside = jax.config.jax_include_full_tracebacks_in_locations
    return inside is True and jax.config.jax_include_full_tracebacks_in_locations == before


def _metadata_key_is_scoped() -> bool:
    import jax

    from course_utils.xla_settings import keyed_without_names

    before = jax.config.jax_compilation_cache_include_metadata_in_key
    with keyed_without_names():
        inside = jax.config.jax_compilation_cache_include_metadata_in_key
    return inside is False and jax.config.jax_compilation_cache_include_metadata_in_key == before


def _cache_is_ours() -> bool:
    """A program compiled while a checked cache is installed is written through it, and computes as it should."""
    import tempfile
    import uuid
    from pathlib import Path

    import jax
    import numpy as np
    from jax._src import compilation_cache

    from course_utils.program_cache import CheckedCache, install

    before = (compilation_cache._cache, compilation_cache._cache_initialized, jax.config.jax_compilation_cache_dir,
              jax.config.jax_persistent_cache_min_compile_time_secs)
    with tempfile.TemporaryDirectory() as folder:
        cache = CheckedCache(Path(folder), limit_bytes=2**30)
        try:
            install(cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            constant = float(uuid.uuid4().int % 1000)  # a program no cache holds yet
            out = jax.jit(lambda x: x + constant)(np.float32(1.0))
            written = len(cache.entries()) >= 1
        finally:
            with compilation_cache._cache_initialized_mutex:
                compilation_cache._cache, compilation_cache._cache_initialized = before[:2]
            jax.config.update("jax_compilation_cache_dir", before[2])
            jax.config.update("jax_persistent_cache_min_compile_time_secs", before[3])
    return written and float(out) == constant + 1.0


def _probe_program() -> str:
    """The compiled text of a sum over a vector split over 2 devices, inside a name scope."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from course_utils.xla_settings import layer_names_kept

    mesh = Mesh(np.array(jax.devices()[:2]), ("course_axis",))
    split = NamedSharding(mesh, PartitionSpec("course_axis"))

    def f(state):
        with jax.named_scope("course_probe"):
            return jnp.sum(state[0]["w"])

    spec = ({"w": jax.ShapeDtypeStruct((8,), jnp.float32, sharding=split)},)
    with layer_names_kept():  # as communication_report lowers
        lowered = jax.jit(f, out_shardings=NamedSharding(mesh, PartitionSpec())).lower(spec)
    return lowered.compile().as_text()


def _collectives_are_read(text: str) -> list[str]:
    from course_utils.communication.hlo import collective_ops

    ops = collective_ops(text, ("course_axis",), (2,))
    problems = []
    if [(op.kind, op.axes) for op in ops] != [("all-reduce", ("course_axis",))]:
        problems.append(READS[2][0])
    elif not any(s.scope == "course_probe" for s in ops[0].sources):
        problems.append(READS[2][0] + " (the name scope is gone from op_name)")
    if ops and ops[0].operand not in ("", "state[0]['w']"):
        problems.append(READS[1][0])
    if "state[0]['w']" not in text.replace("\\'", "'"):
        problems.append(READS[1][0])
    return problems


def missing() -> list[str]:
    """The parts of `READS` this JAX no longer gives as the course reads them (empty: all as expected)."""
    import jax

    gone = []
    for probe, part in ((_name_stack_is_read, READS[0][0]), (_residuals_are_read, READS[3][0]),
                        (_locations_are_kept, READS[4][0]), (_metadata_key_is_scoped, READS[5][0]),
                        (_cache_is_ours, READS[6][0])):
        try:
            works = probe()
        except Exception:  # a probe that breaks is a part that is gone
            works = False
        if not works:
            gone.append(part)
    if len(jax.devices()) < 2:
        return gone + ["(the compiled-program probes need 2 devices: call setup_devices first)"]
    try:
        gone += _collectives_are_read(_probe_program())
    except Exception as error:
        gone.append(f"{READS[2][0]} (the probe program failed: {type(error).__name__}: {error})")
    return list(dict.fromkeys(gone))
