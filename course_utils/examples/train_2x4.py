"""Trains a small MLP on a 2 x 4 mesh ("data", "model"), on one process or several.

The same file runs unchanged as one process with 8 devices, as 2 processes x 4
devices, or on a real cluster where `srun` sets the `KERAS_DISTRIBUTION_*`
variables:

    python course_utils/examples/train_2x4.py
    python -m course_utils.launch --processes 2 --devices-per-process 4 --mesh 2x4 \\
        course_utils/examples/train_2x4.py

Each process prints one JSON line at the end: its index, its local and global
device counts, the rows of every global batch it fed, and the loss of every
step (the same numbers in every process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

if __package__ in (None, ""):  # run by path: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from course_utils.multiprocess import setup_process  # noqa: E402  (first: before JAX starts)

MESH_SHAPE = (2, 4)
RULES = {".*d1/kernel": (None, "model"), ".*d1/bias": ("model",), ".*d2/kernel": ("model", None)}


def make_data(rows: int = 128, features: int = 16, classes: int = 4, seed: int = 0):
    """The seeded dataset every process and every run shares."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype("float32")
    y = (x[:, :classes].argmax(axis=1) + rng.integers(0, 2, size=rows)) % classes
    return x, y.astype("int32")


def build_model(features: int = 16, classes: int = 4):
    """The MLP: Dense(32, relu) "d1" -> Dense(classes) "d2", compiled with SGD."""
    import keras

    model = keras.Sequential([keras.Input((features,)),
                              keras.layers.Dense(32, activation="relu", name="d1"),
                              keras.layers.Dense(classes, name="d2")], name="mlp")
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def make_distribution(*, auto_shard_dataset: bool = False):
    """ModelParallel on the 2 x 4 mesh of all global devices, batch split over "data"."""
    import keras
    from keras import distribution

    mesh = distribution.DeviceMesh(MESH_SHAPE, ("data", "model"), distribution.list_devices())
    layout_map = distribution.LayoutMap(mesh)
    for key, axes in RULES.items():
        layout_map[key] = axes
    return keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data",
                                            auto_shard_dataset=auto_shard_dataset)


def step_losses(model, x, y, batch_size: int) -> list[float]:
    """Trains one epoch with `fit` and returns the loss of every step."""
    import keras

    means = []
    callback = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: means.append(float(logs["loss"])))
    model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    # Keras reports the running mean of the epoch; recover each step's own loss.
    return [m * (k + 1) - (means[k - 1] * k if k else 0.0) for k, m in enumerate(means)]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--auto-shard", action="store_true",
                        help="keep Keras's auto_shard_dataset=True (the classic mistake with NumPy input)")
    args = parser.parse_args(argv)
    setup = setup_process(8, seed=0)

    import keras

    from course_utils.multiprocess import local_rows, process_batch_slice

    dist = make_distribution(auto_shard_dataset=args.auto_shard)
    x, y = make_data(args.rows)
    rows = process_batch_slice(args.batch_size, dist)
    print(f"process {setup.process_index}: devices {', '.join(setup.local_devices)}; "
          f"feeds rows {rows.start}:{rows.stop} of every global batch of {args.batch_size}", flush=True)
    with dist.scope():
        keras.utils.set_random_seed(0)
        model = build_model()
        losses = step_losses(model, local_rows(x, args.batch_size, dist), local_rows(y, args.batch_size, dist),
                             rows.stop - rows.start)
    record = {**setup.summary(), "rows": [rows.start, rows.stop], "losses": losses}
    print(json.dumps(record), flush=True)
    return record


if __name__ == "__main__":
    main()
