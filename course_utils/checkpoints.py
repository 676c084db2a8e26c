"""Saving a model under one layout and restoring it under another.

Keras's own `model.save` gathers every sharded variable into whole arrays in
a `.keras` file; `keras.models.load_model` under a distribution creates each
variable with the new layout and lays the saved values out across the new
mesh. Nothing here re-implements that: these helpers name the steps, and add
two guarantees Keras does not give.

- A save is atomic. Keras opens the target file for writing before it
  serialises anything, so a failed or interrupted `model.save` leaves an
  empty or half-written file where a good checkpoint was. `save_checkpoint`
  writes beside the target, flushes the bytes to disk, then renames over it
  (`os.replace`, atomic on one file system): the target is always either the
  old checkpoint or the new one, whole. Everything the save writes on the way
  (Keras's temporary folder for assets and, for large models, its temporary
  weights file) goes into one scratch folder beside the target, named after
  the saving process: it is removed when the save ends, however it ends, and
  the next save removes one a killed process left.
- A load that fails says which file, and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import uuid
import zipfile
from pathlib import Path

from course_utils._table import shown
from course_utils.devices import scope_for
from course_utils.keras_internals import layout_map_of
from course_utils.guards import require_valid_keys

_PARTIAL = ".partial.keras"  # the name of an unfinished save ends so (Keras insists on ".keras")
_SCRATCH = ".saving"  # the folder beside the target that holds everything an unfinished save wrote
_TEMPDIR_LOCK = threading.Lock()  # `tempfile.tempdir` is the process's: one save moves it at a time
_MEMBERS = ("config.json", "model.weights.h5")


class CheckpointError(ValueError):
    """A checkpoint file cannot be read, or cannot be laid out on the chosen mesh."""


def save_checkpoint(model, path) -> Path:
    """Saves a (possibly sharded) model with `model.save`, atomically.

    The model is written to a hidden file beside `path`, flushed to disk and
    then renamed over `path`. If the save fails or the process is killed
    midway, a checkpoint already at `path` is left exactly as it was.

    Args:
        model: The Keras model.
        path: A file path ending in `.keras`.

    Returns:
        The path written.

    Example:
        >>> save_checkpoint(model, "checkpoints/mlp.keras")
        PosixPath('checkpoints/mlp.keras')
    """
    path = _target(path, "save_checkpoint(model, path)")
    if not hasattr(model, "save"):
        raise TypeError(f"save_checkpoint(model, path) saves a Keras model. Received: model={shown(model, 60)} "
                        f"({type(model).__name__}).")
    if path.suffix != ".keras":
        raise ValueError(f"Keras saves whole models to files ending in .keras. Received: path='{path}'. "
                         f"Use for example '{path.with_suffix('.keras').name}'.")
    if path.is_dir():
        raise ValueError(f"'{path}' is a folder; save_checkpoint needs a file path such as '{path / 'model.keras'}'.")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_partials(path)
    scratch = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{_SCRATCH}")
    partial = scratch / f"{path.stem}{_PARTIAL}"
    try:
        scratch.mkdir()
        with _temporary_files_in(scratch):
            model.save(partial)
        _flush_to_disk(partial)
        os.replace(partial, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # a failed save leaves nothing beside the target
    _flush_to_disk(path.parent)  # the rename itself survives a crash once its folder is flushed
    return path


@contextlib.contextmanager
def _temporary_files_in(folder: Path):
    """Python's temporary files and folders (Keras's `mkdtemp` for a model's assets) go into `folder`."""
    with _TEMPDIR_LOCK:
        before, tempfile.tempdir = tempfile.tempdir, str(folder)
        try:
            yield
        finally:
            tempfile.tempdir = before


def load_checkpoint(path, distribution=None, *, custom_objects=None):
    """Loads a saved model, laying its variables out under `distribution`.

    Args:
        path: A `.keras` file written by `save_checkpoint` or `model.save`.
        distribution: The distribution to restore under; None restores on
            the first device of the course.
        custom_objects: Your own layers or functions the model uses that were
            not registered with `keras.saving.register_keras_serializable`,
            as `{"MyLayer": MyLayer}` (Keras's own argument).

    Returns:
        The restored Keras model, its variables laid out by `distribution`.

    Raises:
        FileNotFoundError: Nothing is at `path`.
        CheckpointError: The file is not a `.keras` archive, is truncated or
            corrupt, or a weight cannot be split evenly on the mesh (the
            message names the variable, the dimension and the mesh axis).

    Example:
        >>> restored = load_checkpoint("checkpoints/mlp.keras", DataParallel())
    """
    import keras

    path = _target(path, "load_checkpoint(path, distribution)")
    if distribution is not None and not hasattr(distribution, "get_variable_layout"):
        raise TypeError(
            f"load_checkpoint(path, distribution) restores under a keras.distribution.DataParallel or ModelParallel "
            f"(or None: one device). Received: distribution={shown(distribution, 60)} ({type(distribution).__name__}). "
            f"Build one first, e.g. DataParallel(devices=...) or ModelParallel(layout_map=..., batch_dim_name='data').")
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at '{path}': {_what_is_at(path)}. "
                                f"Save one first with save_checkpoint(model, '{path}').")
    _check_archive(path)
    require_valid_keys(layout_map_of(distribution), f"Restoring '{path}'")
    try:
        with scope_for(distribution):
            return keras.models.load_model(path, custom_objects=custom_objects)
    except Exception as error:
        unknown = _unknown_classes(path, custom_objects)
        if unknown:
            key, name = unknown[0]
            raise CheckpointError(
                f"The checkpoint '{path}' uses {', '.join(repr(n) for _, n in unknown)}, which Keras does not know in "
                f"this Python session. Define (or import) it before loading, decorated with "
                f"@keras.saving.register_keras_serializable(), or pass "
                f"load_checkpoint(path, distribution, custom_objects={{{key!r}: {name}}}).") from error
        problems = _indivisible_weights(path, distribution) if distribution is not None else []
        if problems:
            raise CheckpointError(
                f"The checkpoint '{path}' cannot be laid out under {type(distribution).__name__} on the mesh "
                f"{dict(zip(distribution.device_mesh.axis_names, distribution.device_mesh.shape))}: "
                + " ".join(problems)
                + " Change the layout rule for these variables (or the mesh shape) so that every split "
                  "dimension is a multiple of its mesh axes' size."
            ) from error
        raise


def _check_archive(path: Path) -> None:
    """Raises CheckpointError naming the file when it is not a whole `.keras` zip archive."""
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"The checkpoint '{path}' is empty (0 bytes): a save into it was interrupted "
                              f"or failed. Save the model again with save_checkpoint.")
    with path.open("rb") as file:
        head = file.read(4)
    if not zipfile.is_zipfile(path):
        if head == b"PK\x03\x04":
            raise CheckpointError(
                f"The checkpoint '{path}' is truncated: it starts as a .keras archive but its end is missing "
                f"({size} bytes on disk), as when a save is cut off. Save the model again with save_checkpoint.")
        raise CheckpointError(
            f"'{path}' is not a .keras archive (a zip file holding {' and '.join(_MEMBERS)}); it starts with "
            f"{head!r}. Load files written by save_checkpoint(model, path) or model.save(path).")
    try:
        with zipfile.ZipFile(path) as archive:
            missing = [m for m in _MEMBERS if m not in archive.namelist()]
            bad = None if missing else archive.testzip()  # reads every member, checking its CRC
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise CheckpointError(f"The checkpoint '{path}' is corrupt ({error}). Save the model again.") from error
    if missing:
        raise CheckpointError(f"'{path}' is a zip file but not a Keras checkpoint: it lacks {missing}. "
                              f"Load files written by save_checkpoint(model, path) or model.save(path).")
    if bad is not None:
        raise CheckpointError(f"The checkpoint '{path}' is corrupt: its member '{bad}' fails its checksum "
                              f"(the bytes changed after saving). Save the model again.")
    _config(path)


def _config(path: Path) -> dict:
    """The model's config saved in the checkpoint; CheckpointError naming the file when it is not JSON."""
    with zipfile.ZipFile(path) as archive:
        text = archive.read("config.json")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(
            f"The checkpoint '{path}' holds a config.json that is not valid JSON ({error}): it was edited or "
            f"damaged after saving. Save the model again with save_checkpoint.") from None


def _unknown_classes(path: Path, custom_objects) -> list[tuple[str, str]]:
    """(registered name, class name) of each class in the checkpoint's config that Keras cannot find."""
    import keras

    names = []
    given = set(custom_objects or {})

    def visit(node):
        if isinstance(node, dict):
            name, module = node.get("class_name"), node.get("module")
            registered = node.get("registered_name") or name
            if isinstance(name, str) and "config" in node:
                known = (registered in keras.saving.get_custom_objects() or {name, registered} & given
                         or (isinstance(module, str) and module.split(".")[0] == "keras"))
                if not known and (registered, name) not in names:
                    names.append((registered, name))
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(_config(path))
    return names


def _target(path, call: str) -> Path:
    """The file a checkpoint path names: `~` expanded, a symbolic link followed to its target."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{call}: path must be a file path such as 'checkpoints/model.keras'. Received: "
                        f"{shown(path, 60)} ({type(path).__name__}). Check the order of the arguments.")
    path = Path(path).expanduser()
    return path.resolve() if path.is_symlink() else path  # save over the link's target, keep the link


def _what_is_at(path: Path) -> str:
    import stat

    if not os.path.lexists(path):
        return "nothing is there"
    mode = path.stat().st_mode if path.exists() else 0
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    what = next((what for test, what in kinds if test(mode)), "a broken symbolic link")
    return f"it is {what}, not a file"


def _indivisible_weights(path: Path, distribution) -> list[str]:
    """Which saved variables the distribution's layouts cannot split, asked of JAX one by one.

    The model is rebuilt from the checkpoint's config on one device; for each
    variable Keras gives the layout (`distribution.get_variable_layout`) and
    JAX's `shard_shape` decides whether it divides.
    """
    import keras
    from jax.sharding import Sharding

    from course_utils.layout_axes import layout_errors

    config = _config(path)
    try:
        with scope_for(None):
            model = keras.saving.deserialize_keras_object(config)
    except Exception:  # the config itself does not rebuild: let Keras's own error stand
        return []
    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    problems = []
    for variable in model.weights:
        layout = distribution.get_variable_layout(variable)
        sharding = layout if isinstance(layout, Sharding) else layout.backend_layout
        try:
            sharding.shard_shape(tuple(variable.shape))
        except ValueError:
            axes = tuple(getattr(layout, "axes", ()))
            why = " ".join(layout_errors(tuple(variable.shape), axes, sizes)) or "JAX cannot split it evenly."
            problems.append(f"variable '{variable.path}' of shape {tuple(variable.shape)} with layout {axes}: {why}")
    return problems


def _flush_to_disk(path: Path) -> None:
    """fsync a file or a folder, so its bytes (or its entries) are on disk, not only in the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_abandoned_partials(path: Path) -> None:
    """Deletes unfinished saves to `path` left by processes that no longer run (e.g. killed mid-save):
    their scratch folders, and the partial files earlier versions of the course wrote beside the target."""
    for left in [*path.parent.glob(f".{path.name}.*{_SCRATCH}"), *path.parent.glob(f".{path.name}.*{_PARTIAL}")]:
        pid = left.name[len(path.name) + 2:].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            if left.is_dir() and not left.is_symlink():
                shutil.rmtree(left, ignore_errors=True)
            else:
                left.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
