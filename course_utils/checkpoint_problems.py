"""What is wrong with a checkpoint, a save or a restore, said with the file's name and what to do.

`checkpoints` calls these when a load or a save fails, or would silently do something else than asked:
a file that is not a whole `.keras` archive (`check_archive`), a class Keras does not know
(`unknown_classes`), a weight the mesh cannot split (`indivisible_weights`), a distribution whose layout
rules match none of the checkpoint's variables (`unmatched_rules`: everything would be replicated), and a
save the file system refused (`save_problem`: a read-only folder, a full disk, a file where a folder
should be).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import zipfile
from pathlib import Path

from course_utils.devices import scope_for

MEMBERS = ("config.json", "model.weights.h5")


class CheckpointError(ValueError):
    """A checkpoint file cannot be read, or cannot be laid out on the chosen mesh."""


def check_archive(path: Path) -> None:
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
            f"'{path}' is not a .keras archive (a zip file holding {' and '.join(MEMBERS)}); it starts with "
            f"{head!r}. Load files written by save_checkpoint(model, path) or model.save(path).")
    try:
        with zipfile.ZipFile(path) as archive:
            missing = [m for m in MEMBERS if m not in archive.namelist()]
            bad = None if missing else archive.testzip()  # reads every member, checking its CRC
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise CheckpointError(f"The checkpoint '{path}' is corrupt ({error}). Save the model again.") from error
    if missing:
        raise CheckpointError(f"'{path}' is a zip file but not a Keras checkpoint: it lacks {missing}. "
                              f"Load files written by save_checkpoint(model, path) or model.save(path).")
    if bad is not None:
        raise CheckpointError(f"The checkpoint '{path}' is corrupt: its member '{bad}' fails its checksum "
                              f"(the bytes changed after saving). Save the model again.")
    saved_config(path)


def saved_config(path: Path) -> dict:
    """The model's config saved in the checkpoint; CheckpointError naming the file when it is not JSON."""
    with zipfile.ZipFile(path) as archive:
        text = archive.read("config.json")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(
            f"The checkpoint '{path}' holds a config.json that is not valid JSON ({error}): it was edited or "
            f"damaged after saving. Save the model again with save_checkpoint.") from None


def unknown_classes(path: Path, custom_objects) -> list[tuple[str, str]]:
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

    visit(saved_config(path))
    return names


def what_is_at(path: Path) -> str:
    """What is at `path` instead of a checkpoint file ("nothing is there", "it is a folder, not a file"...)."""
    if not os.path.lexists(path):
        return "nothing is there"
    mode = path.stat().st_mode if path.exists() else 0
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    what = next((what for test, what in kinds if test(mode)), "a broken symbolic link")
    return f"it is {what}, not a file"


def indivisible_weights(path: Path, distribution) -> list[str]:
    """Which saved variables the distribution's layouts cannot split, asked of JAX one by one.

    The model is rebuilt from the checkpoint's config on one device; for each
    variable Keras gives the layout (`distribution.get_variable_layout`) and
    JAX's `shard_shape` decides whether it divides.
    """
    import keras
    from jax.sharding import Sharding

    from course_utils.layout_axes import layout_errors

    config = saved_config(path)
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


def load_problem(path: Path, distribution, custom_objects) -> str | None:
    """Why Keras could not load `path` under `distribution`, when the course can tell (None: Keras's own error stands)."""
    unknown = unknown_classes(path, custom_objects)
    if unknown:
        key, name = unknown[0]
        return (f"The checkpoint '{path}' uses {', '.join(repr(n) for _, n in unknown)}, which Keras does not know in "
                f"this Python session. Define (or import) it before loading, decorated with "
                f"@keras.saving.register_keras_serializable(), or pass "
                f"load_checkpoint(path, distribution, custom_objects={{{key!r}: {name}}}).")
    problems = indivisible_weights(path, distribution) if distribution is not None else []
    if problems:
        mesh = distribution.device_mesh
        return (f"The checkpoint '{path}' cannot be laid out under {type(distribution).__name__} on the mesh "
                f"{dict(zip(mesh.axis_names, mesh.shape))}: " + " ".join(problems)
                + " Change the layout rule for these variables (or the mesh shape) so that every split "
                  "dimension is a multiple of its mesh axes' size.")
    return None


def unmatched_rules(model, distribution, path: Path) -> str | None:
    """Why restoring under `distribution` would replicate every variable: its rules match none (None: some match).

    Only a distribution with layout rules (ModelParallel) is asked; Keras's own lookup decides each match.
    """
    from course_utils.keras_internals import layout_map_of
    from course_utils.layouts.problems import key_matches

    layout_map = layout_map_of(distribution)
    keys = list(layout_map) if layout_map is not None else []
    paths = [variable.path for variable in model.weights]
    if not keys or not paths or any(key_matches(key, name) for key in keys for name in paths):
        return None
    devices = int(distribution.device_mesh.devices.size)
    kernel = next((name for name in paths if name.endswith("kernel")), paths[0])
    return (f"None of the layout rules of the {type(distribution).__name__} given to load_checkpoint matches a "
            f"variable of '{path}', so every variable would be restored whole on each of the {devices} devices, "
            f"split nowhere. Rules: {', '.join(repr(k) for k in keys)}. The checkpoint's variables: "
            f"{', '.join(repr(n) for n in paths[:6])}{' ...' if len(paths) > 6 else ''}. Is it the checkpoint you "
            f"meant? If so, write rules for these paths (e.g. layout_map['.*{kernel.split('/', 1)[-1]}'] = "
            f"(None, 'model')), or restore under DataParallel(...) to replicate on purpose.")


def save_problem(error: OSError, path: Path) -> OSError:
    """The OSError a failed save raises instead of `error`: the same kind, naming the checkpoint and the fix.

    Keras's and h5py's own errors name a temporary file, or no file at all, and no remedy.
    """
    number = error.errno or _errno_in(str(error))
    folder, kept = path.parent, ("The checkpoint already there is unchanged." if path.is_file() else
                                 "Nothing was written.")
    blocker = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        why = f"'{blocker}' is a file, not a folder, so the folder for it cannot be made"
        fix = f"Save under another folder (e.g. '{blocker.parent / 'checkpoints' / path.name}'), or move that file"
    elif number == errno.EROFS:
        why = f"the folder '{folder}' is on a read-only file system"
        fix = f"Save it in a folder you can write to, e.g. '~/checkpoints/{path.name}'"
    elif number in (errno.ENOSPC, errno.EDQUOT):
        free = shutil.disk_usage(next(p for p in [folder, *folder.parents] if p.exists())).free
        why = f"the disk holding '{folder}' is full ({os.strerror(number)}; {free / 2**20:,.0f} MB free)"
        fix = "Free some space there, or save on another disk, then save again"
    elif number in (errno.EACCES, errno.EPERM):
        why = f"this user may not write in '{folder}' ({_whose(folder)})"
        fix = f"Save it in a folder of your own, e.g. '~/checkpoints/{path.name}'"
    else:
        why, fix = f"{type(error).__name__}: {error}", "Check the folder and the disk, then save again"
    message = f"save_checkpoint could not write '{path}': {why}. {fix}. {kept}"
    return OSError(number, message) if number else OSError(message)


def _errno_in(text: str) -> int | None:
    """The errno h5py writes into its message ("errno = 28") when its OSError carries none."""
    found = re.search(r"errno = (\d+)", text)
    return int(found.group(1)) if found else None


def _whose(folder: Path) -> str:
    import pwd

    try:
        info = next(p for p in [folder, *folder.parents] if p.exists()).stat()
        return f"{stat.filemode(info.st_mode)}, owned by {pwd.getpwuid(info.st_uid).pw_name}"
    except (KeyError, StopIteration, OSError):
        return "its permissions"
