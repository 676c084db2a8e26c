"""Where a hand-in's code runs while it is graded: in a sandbox when this machine offers one, its processes kept.

`choose_sandbox(hide=...)` picks the mechanism once per grading run, and `run_hand_in` runs one hand-in's
`nbgrader autograde` with it:

- **bubblewrap** (`bwrap`, Debian and Ubuntu's `bubblewrap` package, the sandbox Flatpak uses), when it is
  installed and can start here. The hand-in sees the machine's files read-only, minus what is hidden behind
  empty folders: the course directory (the gradebook, the solutions in `source/`, every hand-in), the grading
  run's other copies, the course's checkout but for `course_utils/` (the lessons' solutions, the tests, the
  git history), the teacher's home and the temporary folders. Its own grading copy is the one place it may
  write. It gets a process namespace of its own (its `/proc` shows its own processes only: no parent's
  command line, working folder or open files), no network but loopback, no capabilities, and no terminal.
- **none**, where bubblewrap is missing or cannot start (a container that forbids namespaces, say): the
  hand-in runs as the teacher's user, and only the course directory's checks after each hand-in
  (`safekeeping`) stand between it and the gradebook. `COURSE_GRADING_SANDBOX=off` asks for this.

Either way every process of the hand-in runs below a keeper (`multiprocess.keeper`, the subreaper the
launcher uses; Linux only, elsewhere its process group alone is stopped), so that whatever it started, in
a session of its own or double-forked, is stopped when its grading ends (`multiprocess.process_group.stop`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from course_utils.multiprocess.process_group import KEEPER, TREE_ENV, stop

SANDBOX_ENV = "COURSE_GRADING_SANDBOX"
BUBBLEWRAP, NONE = "bubblewrap", "none"
# What a sandboxed hand-in's environment keeps of the grader's (tokens and keys in the others stay out).
KEPT_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "VIRTUAL_ENV", "JUPYTER_PATH", "LD_LIBRARY_PATH")
KEPT_PREFIXES = ("LC_", "PYTHON", "KERAS_", "JAX_", "XLA_", "COURSE_", "OMP_", "CUDA_", "NVIDIA_", "TF_")
HOME_BYTES = 256 * 2**20  # the empty home a sandboxed hand-in writes into (memory-backed)
# What the sandbox must still give a hand-in: nbgrader, a kernel, the course's modules
PROBE = ("import importlib.util, ipykernel, course_utils.course.grading.wire\n"
         "assert importlib.util.find_spec('nbgrader'), 'nbgrader cannot be found'")  # found, not imported: 6 s


@dataclass(frozen=True)
class Sandbox:
    """How hand-ins run in this grading run: `mode` (BUBBLEWRAP or NONE), and why not when NONE.

    Attributes:
        hidden: Folders replaced by empty ones inside the sandbox.
        shown: Folders inside those that the hand-in still reads (its Python, `course_utils`).
        binary: The bubblewrap program run.
    """

    mode: str
    reason: str = ""
    hidden: tuple[Path, ...] = ()
    shown: tuple[Path, ...] = ()
    binary: str = "bwrap"

    def describe(self) -> str:
        """One sentence for the teacher: what protects the course while hand-ins run."""
        if self.mode == BUBBLEWRAP:
            return ("Hand-ins run in a bubblewrap sandbox: the course directory, the other hand-ins, the solutions "
                    "and your home are hidden from them, the rest of the machine is read-only, and they see no "
                    "other process and no network.")
        return (f"Hand-ins run as your user, without a sandbox ({self.reason}): they could read the solutions and "
                f"other hand-ins; the course directory is checked after each one and anything changed is put back. "
                f"Install bubblewrap (apt-get install bubblewrap) to keep them out.")

    def command(self, command: list[str], work: Path) -> list[str]:
        """`command` as it runs for one hand-in whose grading copy is `work`."""
        if self.mode != BUBBLEWRAP:
            return command
        return [self.binary, *_mounts(self.hidden, self.shown, Path(work)),
                "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL",
                "--die-with-parent", "--new-session", "--chdir", str(work), "--", *command]

    def environment(self, env: dict[str, str], work: Path) -> dict[str, str]:
        """The hand-in's environment: the grader's, or in the sandbox only what a kernel needs of it.

        Either way its temporary files go into its grading copy, and it reads the teacher's compilation
        cache without writing to it (no hand-in can plant a program there).
        """
        from course_utils.xla_settings import CACHE_ENV, READ_ONLY_ENV, compilation_cache_dir

        cache = compilation_cache_dir()
        ours = {"TMPDIR": str(Path(work) / ".tmp"), CACHE_ENV: str(cache) if cache else "off", READ_ONLY_ENV: "1"}
        if self.mode != BUBBLEWRAP:
            return {**env, **ours}
        kept = {k: v for k, v in env.items() if k in KEPT_ENV or k.startswith(KEPT_PREFIXES)}
        return {**kept, **ours, "HOME": str(Path.home()), "KERAS_BACKEND": env.get("KERAS_BACKEND", "jax")}


def _mounts(hidden, shown, work: Path) -> list[str]:
    """bubblewrap's arguments: everything read-only, `hidden` emptied, `shown` put back, `work` writable."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in hidden:
        size = HOME_BYTES if path == Path.home() else 4 * 2**20
        args += ["--size", str(size), "--tmpfs", str(path)]
    for path in shown:
        args += ["--ro-bind", str(path), str(path)]
    return [*args, "--bind", str(work), str(work)]


def _folders(paths) -> tuple[Path, ...]:
    """The folders among `paths` (resolved), each once, none inside another of them."""
    found = {Path(path).resolve() for path in paths}
    found = {path for path in found if path.is_dir() and path != Path("/")}
    return tuple(sorted(path for path in found if not any(other in path.parents for other in found)))


def sandbox_folders(hide: list[Path], path: list[str] | None = None) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(hidden, shown): `hide` and the places solutions or the teacher's files live; the Python and course_utils.

    A folder is shown again only inside a hidden one, and never when it holds something to hide (a
    `path` entry, `sys.path` by default, that is the course's checkout, say).
    """
    import course_utils

    package = Path(course_utils.__file__).resolve().parent
    temporary = [tempfile.gettempdir(), "/tmp", "/var/tmp"]
    every = [p for p in {Path(p).resolve() for p in [*hide, package.parent, Path.home(), *temporary]}
             if p.is_dir() and p != Path("/")]
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    entries = [Path(e).resolve() for e in (sys.path if path is None else path) if e]  # inside the checkout, only its Python's (a .venv)
    entries = [e for e in entries if package.parent not in [e, *e.parents] or prefixes & {e, *e.parents}]
    candidates = [package, *prefixes, Path(sys.executable).resolve().parent, *entries, *_cache_folder()]
    shown = [p for p in candidates if p.is_dir() and any(h in p.parents for h in every)
             and not any(h == p or p in h.parents for h in every)]
    return _folders(every), _folders(shown)


def _cache_folder() -> list[Path]:
    """The compilation cache the kernels read (read-only in the sandbox: no hand-in can plant a program there)."""
    from course_utils.xla_settings import compilation_cache_dir

    folder = compilation_cache_dir()
    return [folder] if folder is not None and folder.is_dir() else []


def choose_sandbox(*, hide: list[Path], which=shutil.which) -> Sandbox:
    """The sandbox this machine offers for this run: bubblewrap when it starts here, else none (with why).

    Args:
        hide: Folders no hand-in may see (the course directory, the run's grading copies).
        which: Finds a program on the PATH (`shutil.which`; a test gives its own, never patching the module that
            gradings running meanwhile read).
    """
    if os.environ.get(SANDBOX_ENV, "").strip().lower() in ("off", "0", "no", "none", "false"):
        return Sandbox(NONE, f"{SANDBOX_ENV}=off")
    binary = which("bwrap")
    if not sys.platform.startswith("linux") or binary is None:
        return Sandbox(NONE, "bubblewrap is not installed")
    hidden, shown = sandbox_folders(hide)
    sandbox = Sandbox(BUBBLEWRAP, "", hidden, shown, binary)
    with tempfile.TemporaryDirectory(prefix="grading-probe-") as probe:
        try:
            done = subprocess.run(sandbox.command([sys.executable, "-c", PROBE], Path(probe)), capture_output=True,
                                  text=True, timeout=120, env=sandbox.environment(dict(os.environ), Path(probe)))
        except (OSError, subprocess.TimeoutExpired) as error:
            return Sandbox(NONE, f"bubblewrap did not start: {error}")
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[-300:] or f"exit {done.returncode}"
        return Sandbox(NONE, f"bubblewrap cannot start here, or this Python cannot run in it: {said}")
    return sandbox


def run_hand_in(command: list[str], work: Path, timeout: float, sandbox: Sandbox,
                env: dict[str, str]) -> tuple[int | None, str]:
    """Runs one hand-in's `command` in `work` under a keeper (and `sandbox`); stops every process it started.

    Returns:
        (exit status, or None when it ran past `timeout`; the last of its output).
    """
    (Path(work) / ".tmp").mkdir(exist_ok=True)  # its temporary files and the kernel's connection file
    token = uuid.uuid4().hex  # every process below carries it: stop() finds even those that left the tree
    command = sandbox.command(command, work)
    if sys.platform.startswith("linux"):  # the keeper asks Linux to be the subreaper; elsewhere, groups alone
        command = [sys.executable, "-S", KEEPER, str(os.getpid()), *command]
    process = subprocess.Popen(command, cwd=work, env={**sandbox.environment(env, work), TREE_ENV: token},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               text=True, errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output[-4000:]
    except subprocess.TimeoutExpired:
        return None, ""
    finally:  # a kernel, or a process it started, left running would keep the student's code going
        stop([process], grace=1.0, token=token)
        process.communicate()
