"""XLA's compile settings for the course, in one place: the compilation cache, and the options for reading.

Every program the course runs is compiled with XLA's defaults, and kept on disk by JAX's persistent
compilation cache, so that a lesson run a second time starts from the programs the first run
compiled: the same programs, so the same results. A program compiled only to be read (the
collectives `communication_report` lists) may skip XLA's backend optimisations (`READING_COMPILE`),
and is lowered with each operation's layer kept in its name (`layer_names_kept`).
`setup_devices` and `setup_process` turn the cache on (`program_cache`: every entry checked); nothing
else sets XLA options.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import warnings
from pathlib import Path

from course_utils.program_cache import CacheWarning, CheckedCache, folder_problem, install, write_problem

CACHE_ENV = "COURSE_COMPILATION_CACHE"
# "1": read the cache's programs, never write one, say nothing (a grading sandbox's read-only view of it)
READ_ONLY_ENV = "COURSE_COMPILATION_CACHE_READ_ONLY"
CACHE_LIMIT_BYTES = 2 * 2**30  # the oldest compiled programs are dropped beyond this
_OFF = ("off", "0", "false", "no", "none")

def compilation_cache_dir() -> Path | None:
    """Where compiled XLA programs are kept between runs, or None when the cache is off.

    `COURSE_COMPILATION_CACHE` names the folder, or turns the cache off with
    `off`; otherwise JAX's own `JAX_COMPILATION_CACHE_DIR` if set; otherwise
    one folder per Python environment under the user's cache folder
    (`$XDG_CACHE_HOME`, by default `~/.cache`), outside any repository.
    A folder that cannot be used is `cache_problem`'s to say.
    """
    setting, _ = _cache_setting()
    if setting.lower() in _OFF:
        return None
    if setting:
        return _expanded(setting)
    base = _expanded(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    environment = hashlib.sha256(sys.prefix.encode()).hexdigest()[:10]
    return base / "course_utils" / "jax-compilation-cache" / environment


def _cache_setting() -> tuple[str, str]:
    """The setting that names the cache's folder ("" for the default) and how to name it in a message."""
    for variable in (CACHE_ENV, "JAX_COMPILATION_CACHE_DIR"):
        setting = os.environ.get(variable, "").strip()
        if setting:
            return setting, f"{variable}={setting!r}"
    return "", "the course's default folder"


def _expanded(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # '~someone' for a user this machine does not have
        return Path(path)


def cache_problem() -> str | None:
    """Why the compilation cache cannot be used here (None: it can, or it is off); `CACHE_FIX` says what to do.

    The course then runs without it (`use_compilation_cache`), and `make doctor` reports it.
    """
    folder = compilation_cache_dir()
    if folder is None:
        return None
    setting, named = _cache_setting()
    problem = folder_problem(folder, own=not setting)
    return None if problem is None else f"{named}: {problem}"


def cache_read_only() -> str | None:
    """Why the cache's folder can be read but not written to here (None: it can be written, or is off or refused).

    The course then reads the programs kept there and keeps no new one.
    """
    folder = compilation_cache_dir()
    if folder is None or cache_problem() is not None or os.environ.get(READ_ONLY_ENV) == "1":
        return None
    problem = write_problem(folder)
    return None if problem is None else f"{_cache_setting()[1]}: {problem}"


CACHE_FIX = (f"set {CACHE_ENV} to a folder of your own (e.g. ~/.cache/course-programs), or to off; "
             f"then restart the kernel")


def use_compilation_cache() -> Path | None:
    """Turns the course's checked compilation cache on in `compilation_cache_dir()`; returns the folder.

    Every compiled program is kept, however quick its compile, in a
    `program_cache.CheckedCache`: each entry is checked against its key when
    read, kept apart per CPU, and never taken from a folder another user can
    write to; a folder that cannot be used warns (`CacheWarning`) and the
    course runs uncached (None). A program's key includes its metadata (the
    layer names, which a report of its collectives reads), so a cached
    program always carries the names of the model that asked for it. The
    source files in that metadata are written without the parts that change
    from one kernel or environment to the next (`SOURCE_FILE_CHANGES`), so a
    lesson run again, in another kernel or another environment, finds its
    programs. Several processes (lesson 06's workers, lessons run side by
    side) can share the folder: no entry is ever seen half written. A folder
    this user cannot write to (a read-only file system, say) is only read,
    with one warning saying why (none with `COURSE_COMPILATION_CACHE_READ_ONLY=1`).
    """
    folder = compilation_cache_dir()
    if folder is None:
        return None
    problem = cache_problem()
    if problem:
        warnings.warn(f"{problem}. The course runs without its compilation cache: every program compiles again, "
                      f"with the same results. To keep them, {CACHE_FIX}.", CacheWarning, stacklevel=3)
        return None
    read_only = cache_read_only()
    if read_only:
        warnings.warn(f"{read_only}. The course reads the programs kept there but keeps no new one: those compile "
                      f"again in each run, with the same results. To keep them, {CACHE_FIX}.", CacheWarning,
                      stacklevel=3)
    import jax

    for name, value in (("jax_persistent_cache_min_compile_time_secs", 0.0),
                        ("jax_persistent_cache_min_entry_size_bytes", -1),
                        ("jax_compilation_cache_include_metadata_in_key", True),
                        ("jax_hlo_source_file_canonicalization_regex", SOURCE_FILE_CHANGES)):
        jax.config.update(name, value)
    cache = CheckedCache(folder, limit_bytes=CACHE_LIMIT_BYTES,
                         read_only=bool(read_only) or os.environ.get(READ_ONLY_ENV) == "1")
    if not cache.read_only:
        cache.tidy()
    install(cache)
    return folder


# What differs between two runs of the same code in a compiled program's source-file metadata: where
# the environment's packages are installed, and the folder (named by process id) of a kernel's cells.
SOURCE_FILE_CHANGES = r"^.*/(?:site-packages|dist-packages|ipykernel_\d+)/"


# XLA CPU's instruction sets, oldest first, as `--xla_cpu_max_isa` names them, with the CPU flags
# (Linux's /proc/cpuinfo) each needs. XLA compiles for the newest one the host has unless told otherwise.
INSTRUCTION_SETS = (("SSE4_2", ("sse4_2",)), ("AVX", ("avx",)), ("AVX2", ("avx2", "fma")),
                    ("AVX512", ("avx512f", "avx512bw", "avx512dq", "avx512vl")))


def instruction_sets(cpuinfo: str | None = None) -> tuple[str, ...]:
    """The x86 instruction sets XLA CPU can compile for on this machine, oldest first.

    Each is a value of XLA's `--xla_cpu_max_isa` flag (a test-only lever: it makes XLA compile as
    for an older CPU, whose results differ in the last bits). Empty where /proc/cpuinfo cannot
    tell (not Linux, or not x86).

    Args:
        cpuinfo: The text of /proc/cpuinfo; read from the machine when None.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ()
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    found = []
    for name, needs in INSTRUCTION_SETS:
        if not set(needs) <= flags:
            break
        found.append(name)
    return tuple(found)


class XlaFlagsWarning(UserWarning):
    """XLA_FLAGS is set: the course's numbers and verdicts were checked with XLA's defaults."""


def xla_flags() -> str:
    """The flags `XLA_FLAGS` sets in this process's environment ("" when none).

    The course compiles with XLA's defaults and checks every number and verdict of the lessons with
    them; a flag that changes how XLA compiles can change them: two CPU flags together once made a
    data-parallel run differ from one device, and a lesson printed "NOT equivalent". Flags that only
    name paths or devices change nothing, but the course cannot tell them apart, so
    `setup_devices` warns (`XlaFlagsWarning`) and `make doctor` reports any.
    """
    return os.environ.get("XLA_FLAGS", "").strip()


XLA_FLAGS_RISK = ("the lessons' numbers and verdicts were checked with XLA's defaults, and a flag that changes "
                  "how XLA compiles can change them (two CPU flags once made a sharded run differ from one device)")
XLA_FLAGS_FIX = ("unset XLA_FLAGS (a flag that changes no result, a dump folder say, may stay, and this "
                 "note with it: the course cannot tell such flags apart)")


# XLA's options for a program that is compiled only to be read (`communication_report`), never run:
# its backend optimisations and fusion emitters off. The SPMD partitioner, which inserts the
# collectives, runs before them: the same collectives, compiled several times faster. A program
# that runs always gets XLA's defaults (with these, a sharded training step computed other numbers).
READING_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True,
                   "xla_cpu_use_fusion_emitters": False}


def keyed_without_names() -> contextlib.AbstractContextManager:
    """A context in which this thread's compiled programs are kept in the cache under a key without names.

    The course keys every program by its metadata too (`use_compilation_cache`), so that a program
    a report reads carries its own layer names. A program that is only run, never read (the
    training steps of `run_training`, and the one-device step it replays a sharded run's steps on)
    may share its entry with any model of the same shapes, whatever its layers and optimizer are
    called: a second model of the same architecture, or its one-device twin, then finds the first
    one's program instead of compiling it again. It changes which entry is used, never
    what is computed (JAX's own context for the option, `jax_internals.READS`).
    """
    from jax._src import config

    return config.compilation_cache_include_metadata_in_key(False)


def layer_names_kept() -> contextlib.AbstractContextManager:
    """A context in which this thread lowers with JAX's full tracebacks in locations, whatever was set.

    A report reads which layer a collective serves from the `op_name` XLA keeps in the compiled program
    (`hlo.collective_ops`). XLA writes the whole name there, name scopes and all, only from the locations
    JAX emits with `jax_include_full_tracebacks_in_locations` on (its default); with it off, an `op_name`
    keeps the primitives alone ("reduce_sum:dot_general:..."), and a report would find no layer. So a
    program compiled to be read is lowered inside this context. It sets the option for this thread only
    (JAX's own context for it, `jax_internals.READS`) and restores it on leaving; it changes a program's
    metadata only, never what it computes.

    Example:
        >>> with layer_names_kept():
        ...     lowered = jax.jit(step).lower(state, batch)
    """
    from jax._src import config

    return config.include_full_tracebacks_in_locations(True)
