"""What each layout costs, measured: `python -m course_utils.course bench sharding-costs [--platform gpu]`.

For the lessons' MLP and a small transformer block, and for every 2-D shape of
8 devices, trains the model data-parallel (every weight replicated, the batch
split over "data") and model-parallel (the tensor-parallel rules of
course_utils.models), and prints one table:

- step time relative to the single-device run of the same model in the same process,
- weight bytes per device, from the real shards,
- collective bytes per device in one compiled training step,
- whether the run's losses and weights match the single-device run.

It writes the same figures to JSON and a plot. On simulated CPU devices all
"devices" share this machine's cores: the time ratios describe that sharing,
not what real accelerators would do.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from course_utils import setup_devices

SHAPES = [(8, 1), (4, 2), (2, 4), (1, 8)]
ROWS, BATCH, EPOCHS = 512, 64, 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course bench sharding-costs", description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="auto", choices=["auto", "cpu", "gpu", "tpu"])
    parser.add_argument("--out", default="_build/bench", help="folder for sharding_costs.json and .png")
    args = parser.parse_args(argv)
    setup = setup_devices(8, platform=args.platform)
    print(setup)
    rows = [row for name in ("mlp", "transformer") for row in measure_model(name)]
    print_table(rows, setup)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sharding_costs.json").write_text(json.dumps({"devices": repr(setup), "rows": rows}, indent=2))
    plot(rows, setup).savefig(out / "sharding_costs.png", dpi=110)
    print(f"\nWrote {out / 'sharding_costs.json'} and {out / 'sharding_costs.png'}")
    return 0 if all(r["equivalent"] for r in rows) else 1


def measure_model(name: str) -> list[dict]:
    import keras
    import numpy as np

    from course_utils import communication_report, compare_runs, make_mesh, memory_report, models, run_training

    build_model, rules, x_shape = {
        "mlp": (models.mlp, models.mlp_rules(), (64,)),
        "transformer": (models.transformer_block, models.transformer_rules(), (16, 64)),
    }[name]

    def build():
        model = build_model()
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    rng = np.random.default_rng(0)
    data = rng.normal(size=(ROWS, *x_shape)).astype("float32"), rng.integers(0, 10, ROWS).astype("int32")
    single = run_training(build, data, epochs=EPOCHS, batch_size=BATCH, label="single device")
    rows = []
    for shape in SHAPES:
        for kind, dist in _distributions(make_mesh(shape, ("data", "model")), rules).items():
            run = run_training(build, data, distribution=dist, epochs=EPOCHS, batch_size=BATCH)
            comm = communication_report(run.model, dist, (BATCH, *x_shape), target_shape=(BATCH,),
                                        target_dtype="int32")
            rows.append({
                "model": name, "mesh": list(shape), "distribution": kind,
                "step_time_ratio": run.median_step_seconds / single.median_step_seconds,
                "weight_bytes_per_device": max(r.weights for r in memory_report(run.model, dist).rows),
                "collective_bytes_per_step": sum(c.bytes for c in comm.compiled),
                "equivalent": compare_runs(single, run).equivalent,
            })
    return rows


def _distributions(mesh, rules) -> dict:
    """The two distributions measured on a (data, model) mesh, by the name the table gives them."""
    from keras import distribution

    from course_utils import make_layout_map

    return {
        # keras.distribution.DataParallel takes 1-D meshes only (on a 2-D mesh Keras 3.15.1
        # fails while warning); an empty LayoutMap gives its layout on any mesh: every weight
        # replicated, the batch split over "data".
        "DataParallel": distribution.ModelParallel(layout_map=distribution.LayoutMap(mesh), batch_dim_name="data"),
        "ModelParallel": distribution.ModelParallel(layout_map=make_layout_map(mesh, rules), batch_dim_name="data"),
    }


def print_table(rows: list[dict], setup) -> None:
    print(f"\n{'model':12} {'mesh':8} {'distribution':14} {'step time / 1 device':>21} "
          f"{'weight B/device':>16} {'collective B/step':>18}  equivalent")
    for r in rows:
        print(f"{r['model']:12} {str(tuple(r['mesh'])):8} {r['distribution']:14} {r['step_time_ratio']:21.2f} "
              f"{r['weight_bytes_per_device']:16,} {r['collective_bytes_per_step']:18,}  "
              f"{'yes' if r['equivalent'] else 'NO'}")
    if setup.simulated:
        print("\nThese devices are simulated: all 8 share this machine's CPU cores, and collectives are "
              "memory copies.\nThe time ratios measure that sharing, not the speed-up of real accelerators; "
              "bytes and equivalence are real.")


def plot(rows: list[dict], setup):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7), layout="constrained")
    axes = fig.subplots(2, 2)
    for col, name in enumerate(("mlp", "transformer")):
        mine = [r for r in rows if r["model"] == name]
        labels = [f"{tuple(r['mesh'])}\n{r['distribution'][:5]}" for r in mine]
        axes[0, col].bar(labels, [r["weight_bytes_per_device"] / 1024 for r in mine], color="tab:blue")
        axes[0, col].set_title(f"{name}: weight KiB per device")
        axes[1, col].bar(labels, [r["collective_bytes_per_step"] / 1024 for r in mine], color="tab:orange")
        axes[1, col].set_title(f"{name}: collective KiB per device per step")
        for ax in axes[:, col]:
            ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"Sharding costs on {setup}")
    return fig
