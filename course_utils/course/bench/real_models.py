"""How fast the course's tools are on real keras-hub models: `python -m course_utils.course bench real-models`.

Builds tiny Gemma, Llama and Qwen backbones (vocabulary 128, 2 layers, 4 heads,
hidden 64, random weights, nothing downloaded) under their own
`get_layout_map(mesh)` on a 2 x 4 ("batch", "model") mesh of simulated CPU
devices, and prints the median time of:

- `check_layout_map` and `explain_layout` on each backbone (target: <= 0.1 s on the
  26-variable Qwen backbone);
- `communication_report` of one training step of a tiny `GemmaCausalLM` (target: <= 5 s
  on a 2-core machine; the first call includes tracing, every call compiles).

Times are wall-clock on whatever else the machine is doing: the load average is
printed beside them.
"""

from __future__ import annotations

import os
import statistics
import time

from course_utils import setup_devices

TARGETS = {"check_layout_map": 0.1, "explain_layout": 0.1, "communication_report": 5.0}
CONFIG = dict(vocabulary_size=128, num_layers=2, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
              intermediate_dim=128)


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds (all of this process's threads) of `repeats` calls of `fn`, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def main(argv: list[str] | None = None) -> int:
    """Prints the figures; takes no options."""
    setup = setup_devices(8)
    print(setup)
    import keras_hub
    from keras import distribution

    from course_utils import check_layout_map, explain_layout, make_mesh

    mesh = make_mesh((2, 4), ("batch", "model"))
    rows = []
    backbones = {"gemma": (keras_hub.models.GemmaBackbone, dict(CONFIG, head_dim=16)),
                 "llama": (keras_hub.models.LlamaBackbone, CONFIG),
                 "qwen": (keras_hub.models.QwenBackbone, CONFIG)}
    for name, (cls, config) in backbones.items():
        layout_map = cls.get_layout_map(mesh)
        dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
        with dist.scope():
            model = cls(**config)
        *check_s, problems = timed(lambda: check_layout_map(layout_map, model), 5)
        *explain_s, _ = timed(lambda: explain_layout(model, dist), 5)
        rows.append((name, len(model.variables), "check_layout_map", *check_s, f"{len(problems)} problems"))
        rows.append((name, len(model.variables), "explain_layout", *explain_s, ""))
        if name == "gemma":
            rows += _report_rows(model, dist)
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median seconds "
          f"(cpu: this process's CPU time, all threads: on an idle machine wall lies between cpu / cores and cpu)")
    print(f"{'model':<16} {'vars':>4}  {'call':<30} {'wall':>8} {'cpu':>8}  {'target':>6}  note")
    for model, count, call, wall, cpu, note in rows:
        target = TARGETS.get(call)
        mark = "" if target is None else ("ok" if wall <= target else "OVER")
        print(f"{model:<16} {count:>4}  {call:<30} {wall:8.3f} {cpu:8.3f}  {target or '-':>6}  {mark} {note}")
    return 0


def _report_rows(backbone, dist) -> list[tuple]:
    """The rows of `communication_report` on a Gemma language model around `backbone`: its first call, then three."""
    import keras_hub
    import numpy as np

    from course_utils import communication_report

    with dist.scope():
        lm = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
        lm.compile(optimizer="adam")
    x = {"token_ids": np.zeros((8, 16), "int32"), "padding_mask": np.ones((8, 16), "bool")}
    y = np.zeros((8, 16), "int32")
    *first_s, _ = timed(lambda: communication_report(lm, dist, (x, y)), 1)
    *report_s, report = timed(lambda: communication_report(lm, dist, (x, y)), 3)
    return [("gemma_causal_lm", len(lm.variables), "communication_report (first)", *first_s, ""),
            ("gemma_causal_lm", len(lm.variables), "communication_report", *report_s,
             f"{len(report.collectives)} collectives in {len(report.by_layer())} groups")]
