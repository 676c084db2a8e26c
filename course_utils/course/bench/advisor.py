"""Times the advisor, cold and warm: `python -m course_utils.course bench advisor`.

Ranks every candidate of a keras-hub 7B-class preset (shape-only) on 8 x H100 twice, each in a fresh
Python process with 8 simulated CPU devices: first with an empty compilation cache (every program
compiled), then with the cache the first run filled. Prints wall seconds (setting up the devices
included, importing the library excluded) and the process's peak memory against the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

COLD_SECONDS, WARM_SECONDS, PEAK_MB = 60, 15, 1024  # issue targets: 12+ candidates of a 7B preset

_RUN = """
import json, resource, time
start = time.perf_counter()
from course_utils import advise, setup_devices
setup_devices(8)
advice = advise({preset!r}, devices="8xH100-80GB", batch=16, seq=2048)
print(json.dumps({{"seconds": time.perf_counter() - start, "candidates": len(advice),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_once(preset: str, cache: str) -> dict:
    """One advise() of `preset` in a fresh process with `cache` as the compilation cache: its figures."""
    env = {**os.environ, "COURSE_COMPILATION_CACHE": cache, "COURSE_PLATFORM": "cpu", "KERAS_BACKEND": "jax"}
    done = subprocess.run([sys.executable, "-c", _RUN.format(preset=preset)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"advise({preset!r}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course bench advisor", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama3_8b_en", help="a keras-hub preset of course_utils.PRESETS")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="course-bench-advice-") as cache:
        cold, warm = run_once(args.preset, cache), run_once(args.preset, cache)
    peak = max(cold["peak_mb"], warm["peak_mb"])
    met = cold["seconds"] <= COLD_SECONDS and warm["seconds"] <= WARM_SECONDS and peak <= PEAK_MB
    print(f"advise({args.preset!r}, devices='8xH100-80GB', batch=16, seq=2048): {cold['candidates']} candidates")
    print(f"{'cold s':>7} {'warm s':>7} {'peak MB':>8}  targets")
    print(f"{cold['seconds']:7.1f} {warm['seconds']:7.1f} {peak:8.0f}  {'yes' if met else 'NO'}")
    print(f"(targets: <= {COLD_SECONDS} s cold, <= {WARM_SECONDS} s warm, <= {PEAK_MB} MB; {os.cpu_count()} CPU "
          f"cores; cold: an empty compilation cache)")
    return 0 if met else 1
