"""Every benchmark of the course, one module each: `python -m course_utils.course bench <name>`.

`lessons` (each lesson cold and warm: `make bench`), `advisor` (the advisor on a 7B model, cold and
warm), `published_rows` (the advisor beside published training runs), `real_models` (keras-hub
models under their maps), `sharding_costs` (every 2-D shape of 8 devices, trained), `widget_redraw`
(the explorers' redraw times). Each prints its figures; none is a timed unit test.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ("lessons", "advisor", "published-rows", "real-models", "sharding-costs", "widget-redraw")


def main(argv: list[str]) -> int:
    """`bench <name> [options]`: runs one benchmark's `main`."""
    if not argv or argv[0] not in BENCHMARKS:
        received = f"Received: {argv[0]!r}. " if argv else ""
        print(f"{received}Usage: python -m course_utils.course bench <name> [options], <name> one of "
              f"{', '.join(BENCHMARKS)}.", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__name__}.{argv[0].replace('-', '_')}")
    return module.main(argv[1:])
