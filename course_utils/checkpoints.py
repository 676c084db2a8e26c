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
- A load that fails says which file, and what is wrong with it; so does a save the file system
  refuses (a read-only folder, a full disk, a file where a folder should be), as an OSError of the
  same kind. A restore that would silently do something else than asked fails too: under a
  ModelParallel whose layout rules match none of the checkpoint's variables (another model's file,
  say), every variable would be replicated whole on every device. The explanations live in
  `checkpoint_problems`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path

from course_utils._table import shown
from course_utils.checkpoint_problems import (CheckpointError, check_archive, load_problem, save_problem,
                                              unmatched_rules, what_is_at)
from course_utils.devices import scope_for
from course_utils.guards import require_valid_keys
from course_utils.keras_internals import layout_map_of

_PARTIAL = ".partial.keras"  # the name of an unfinished save ends so (Keras insists on ".keras")
_SCRATCH = ".saving"  # the folder beside the target that holds everything an unfinished save wrote
_TEMPDIR_LOCK = threading.Lock()  # `tempfile.tempdir` is the process's: one save moves it at a time


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

    Raises:
        OSError: The file system refused the save (a read-only folder, a full disk, a file where a
            folder should be); of the same kind as the file system's error, naming the checkpoint,
            the reason and what to do. The checkpoint already at `path` is unchanged.

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
    try:  # Keras's and h5py's own errors name a temporary file, or none, and no fix
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_partials(path)
        scratch = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{_SCRATCH}")
        try:
            scratch.mkdir()
            with _temporary_files_in(scratch):
                model.save(scratch / f"{path.stem}{_PARTIAL}")
            _flush_to_disk(scratch / f"{path.stem}{_PARTIAL}")
            os.replace(scratch / f"{path.stem}{_PARTIAL}", path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)  # a failed save leaves nothing beside the target
        _flush_to_disk(path.parent)  # the rename itself survives a crash once its folder is flushed
    except OSError as error:
        raise save_problem(error, path) from error
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
            message names the variable, the dimension and the mesh axis), or
            none of the distribution's layout rules matches a variable of the
            checkpoint (every variable would be replicated: another model's
            file, or rules written for another model).

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
        raise FileNotFoundError(f"No checkpoint at '{path}': {what_is_at(path)}. "
                                f"Save one first with save_checkpoint(model, '{path}').")
    check_archive(path)
    require_valid_keys(layout_map_of(distribution), f"Restoring '{path}'")
    try:
        with scope_for(distribution):
            restored = keras.models.load_model(path, custom_objects=custom_objects)
    except Exception as error:
        explained = load_problem(path, distribution, custom_objects)
        if explained:
            raise CheckpointError(explained) from error
        raise
    unmatched = unmatched_rules(restored, distribution, path) if distribution is not None else None
    if unmatched:
        raise CheckpointError(unmatched)
    return restored


def _target(path, call: str) -> Path:
    """The file a checkpoint path names: `~` expanded, a symbolic link followed to its target."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{call}: path must be a file path such as 'checkpoints/model.keras'. Received: "
                        f"{shown(path, 60)} ({type(path).__name__}). Check the order of the arguments.")
    path = Path(path).expanduser()
    return path.resolve() if path.is_symlink() else path  # save over the link's target, keep the link


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
