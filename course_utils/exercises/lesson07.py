"""Checkers for lesson 07: saving and resharding."""

from __future__ import annotations

from course_utils.exercises.core import exercise

_RULES = {".*d1/kernel": (None, "model"), ".*d1/bias": ("model",), ".*d2/kernel": ("model", None)}


@exercise("07.1", "The shard shape of d1/kernel (64, 128) restored under the tensor-parallel rules on a (4, 2) mesh.",
          form='a shard shape as a tuple of two whole numbers, e.g. (64, 128)')
def restored_shard_shape(answer) -> str | None:
    """Compares the answer with the planned placement of d1/kernel on a (4, 2) mesh."""
    from keras import distribution

    from course_utils.mesh import make_mesh
    from course_utils.placements import planned_placement

    layout = distribution.TensorLayout(_RULES[".*d1/kernel"], make_mesh((4, 2), ("data", "model")))
    expected = planned_placement((64, 128), layout).shard_shape
    answer = tuple(answer)
    if answer == expected:
        return None
    if answer == (64, 32):
        return "That is the 2 x 4 shape. On a (4, 2) mesh the model axis has 2 devices, not 4."
    if answer == (16, 128) or answer[0] != 64:
        return "The rule splits the columns (the second dimension) over 'model'; the rows stay whole."
    return "d1/kernel is (64, 128); how many devices does the 'model' axis of a (4, 2) mesh have?"


@exercise("07.2", "Restore the checkpoint with every weight whole on each of the 8 devices.",
          form='the model that load_checkpoint(path, distribution) returns')
def restored_replicated(answer) -> str | None:
    """Checks the real placement of every weight of the restored model."""
    from course_utils.placements import placement

    if not hasattr(answer, "weights"):
        return f"Put the restored model in answer (from load_checkpoint); received a {type(answer).__name__}."
    for variable in answer.weights:
        where = placement(variable)
        if len(where.devices) != 8:
            return (f"{variable.path} sits on {len(where.devices)} device(s). Load it under a distribution "
                    f"whose mesh holds all 8 devices.")
        if not where.is_replicated:
            return f"{variable.path} is split into {len(where.blocks)} blocks; data parallelism keeps weights whole."
    return None


@exercise("07.3", "Bytes of d1/kernel in the checkpoint file and per device on the 2 x 4 mesh.",
          form='a pair of whole numbers (bytes in the file, bytes per device)')
def checkpoint_bytes(answer) -> str | None:
    """Compares with the whole kernel's bytes and the planned bytes per device on 2 x 4."""
    from keras import distribution

    from course_utils.mesh import make_mesh
    from course_utils.placements import planned_placement

    layout = distribution.TensorLayout(_RULES[".*d1/kernel"], make_mesh((2, 4), ("data", "model")))
    planned = planned_placement((64, 128), layout)
    expected = (planned.total_bytes, planned.bytes_per_device["cpu:0"])
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return "Answer a pair (file_bytes, bytes_per_device)."
    file_bytes, per_device = answer
    if (file_bytes, per_device) == expected:
        return None
    if file_bytes != expected[0]:
        return "The file holds the whole float32 kernel: rows x columns x 4 bytes."
    return "Each device holds one of the four column blocks of the kernel."


def _checkpoint_contents(path) -> dict:
    """What a `.keras` file holds, as plain data (for the lesson's claims).

    Returns:
        `members` (the zip's files), `metadata` (metadata.json), `config` (config.json as text),
        `h5_magic` (the first bytes of model.weights.h5), `datasets` (every array in it, name ->
        shape) and `attributes` (every non-empty attribute set, name -> attributes).
    """
    import io
    import json
    import zipfile

    import h5py

    with zipfile.ZipFile(path) as archive:
        members = archive.namelist()
        metadata = json.loads(archive.read("metadata.json"))
        config = archive.read("config.json").decode()
        weights = archive.read("model.weights.h5")
    names: list[str] = []
    with h5py.File(io.BytesIO(weights)) as file:
        file.visit(names.append)
        datasets = {n: tuple(file[n].shape) for n in names if isinstance(file[n], h5py.Dataset)}
        attributes = {n: {k: str(v) for k, v in file[n].attrs.items()} for n in ["/", *names] if len(file[n].attrs)}
    return {"members": members, "metadata": metadata, "config": config, "h5_magic": weights[:8],
            "datasets": datasets, "attributes": attributes}
