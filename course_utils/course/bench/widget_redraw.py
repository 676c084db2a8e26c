"""How fast each explorer redraws: `python -m course_utils.course bench widget-redraw [--changes 20] [--browser]`.

Sets one control of each explorer to a new value, repeatedly, as a learner
would by clicking, and prints the median wall time of a redraw (the real
Keras/JAX objects, the placement data, the drawing's scene and its SVG, all
included). The first redraw is excluded: it pays for imports and JAX
start-up. A redraw should stay under 150 ms so a click feels immediate, and
under 50 ms to feel instant.

The browser then draws the SVG. `--browser` also times that in headless
Chromium (Debian's `chromium`): the median time to decode and rasterise
each explorer's drawings, as an `<img>` does.

The model explorer builds nothing per choice: Keras's layout lookup on the
original model's variables and JAX's planned placements give every block
(the tests check them against a real build). It keeps what it drew for each
(mesh shape, preset) choice, so it is timed twice: "first view" forgets before
every change (the full cost: planned report and memory, one figure rendered),
"revisit" shows a choice seen before.

Wall time depends on what else runs on the machine: the CPU column (this
process's CPU time) and the load average printed first say how busy it was.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable

from course_utils import setup_devices

TARGET_MS = 150.0


def median_ms(change: Callable[[object], None], values: list, changes: int) -> tuple[float, float, float]:
    """Median and maximum wall milliseconds, and median CPU milliseconds, of `changes` calls of `change(value)`."""
    change(values[-1])  # warm-up, not timed
    times, cpu = [], []
    for value in itertools.islice(itertools.cycle(values), changes):
        start, start_cpu = time.perf_counter(), time.process_time()
        change(value)
        times.append(1000 * (time.perf_counter() - start))
        cpu.append(1000 * (time.process_time() - start_cpu))
    return statistics.median(times), max(times), statistics.median(cpu)


def pictures(change: Callable[[object], None], values: list, image) -> list[bytes]:
    """The SVG an explorer shows after each of `values`."""
    shown = []
    for value in values:
        change(value)
        shown.append(bytes(image.value))
    return shown


def browser_ms(svgs: list[bytes], repeats: int) -> float | None:
    """Median milliseconds Chromium takes to decode and rasterise one of `svgs`; None without Chromium."""
    import base64
    import shutil

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        return None
    from playwright.sync_api import sync_playwright

    urls = ["data:image/svg+xml;base64," + base64.b64encode(svg).decode() for svg in svgs]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
        page = browser.new_page()
        times = page.evaluate("""async ([urls, repeats]) => {
            const times = [];
            for (let k = 0; k < repeats; k++) for (const url of urls) {
                const img = new Image(); img.src = url + "#" + k;  // a new image each time: no cache
                const start = performance.now(); await img.decode();
                const canvas = new OffscreenCanvas(img.width, img.height);
                canvas.getContext("2d").drawImage(img, 0, 0);
                times.push(performance.now() - start);
            }
            return times; }""", [urls, repeats])
        browser.close()
    return statistics.median(times)


def cases() -> dict[str, tuple[Callable, list, object]]:
    """Explorer name -> (a function that sets one control, the values it cycles through, its image)."""
    from course_utils.models import mlp, mlp_rules, transformer_block, transformer_rules
    from course_utils.widgets import layout_explorer, mesh_explorer, model_explorer

    mesh = mesh_explorer()
    layout = layout_explorer((16, 32))
    model = model_explorer(mlp(), mlp_rules())
    transformer = model_explorer(transformer_block(), transformer_rules())

    def set_shape(explorer, *, forget: bool):
        def change(value):
            if forget:
                explorer.views.clear()
            explorer.mesh_shape.value = value
        return change

    shapes = [(1, 8), (2, 4), (4, 2), (8, 1)]

    return {
        "mesh_explorer (shape)": (lambda v: setattr(mesh.shape, "value", v), shapes, mesh.image),
        "layout_explorer (axis of dim 0)": (lambda v: setattr(layout.axes[0], "value", v), [None, "data"],
                                            layout.image),
        "model_explorer mlp, first view": (set_shape(model, forget=True), shapes, model.image),
        "model_explorer mlp, revisit": (set_shape(model, forget=False), shapes, model.image),
        "model_explorer transformer, first view": (set_shape(transformer, forget=True), shapes, transformer.image),
        "model_explorer transformer, revisit": (set_shape(transformer, forget=False), shapes, transformer.image),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course bench widget-redraw", description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--browser", action="store_true", help="also time Chromium drawing each SVG")
    args = parser.parse_args(argv)
    print(setup_devices(8))
    print(f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")
    print(f"Median redraw over {args.changes} changes (target < {TARGET_MS:.0f} ms):")
    slow, drawn = [], {}
    for name, (change, values, image) in cases().items():
        median, worst, cpu = median_ms(change, values, args.changes)
        print(f"  {name:42} {median:7.1f} ms   (max {worst:.1f} ms, CPU {cpu:.1f} ms)")
        if median > TARGET_MS:
            slow.append(name)
        drawn[name.split(",")[0]] = pictures(change, values, image)
    if slow:
        print(f"Above target: {', '.join(slow)}")
    if args.browser:
        print("Median time for Chromium to decode and draw each SVG:")
        for name, svgs in drawn.items():
            ms = browser_ms(svgs, repeats=max(1, args.changes // len(svgs)))
            if ms is None:
                print("  Chromium not found (apt-get install -y chromium): not timed.")
                break
            print(f"  {name:42} {ms:7.1f} ms   ({len(svgs[0]) / 1024:.0f} KiB of SVG)")
    return 0

