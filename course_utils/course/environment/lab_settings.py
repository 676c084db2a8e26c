"""The course's JupyterLab settings: a lesson's kernel stops when its notebook closes; idle kernels stop too.

A lesson's kernel keeps its peak memory after Run All (0.3 to 0.6 GB, lesson 09 the most). A learner
who opens the lessons one after another in one JupyterLab, each tab left open, holds every kernel:
over 2 GB by lesson 05, more than Binder gives a user (1 to 2 GB), and the kernel then dies
mid-lesson. So the environment's JupyterLab, on a learner's machine (`make lab`) and on Binder
(`binder/postBuild`), is set up to:

- shut a notebook's kernel down when its tab closes (JupyterLab's `kernelShutdown`, written to the
  environment's `overrides.json`, beside any setting already there);
- cull kernels idle for a while (jupyter_server's `MappingKernelManager`, in the environment's
  `jupyter_server_config.json`, beside any setting already there): on a learner's machine only kernels no tab holds, after an hour; on
  Binder every idle kernel after 15 minutes, its outputs kept in the notebook, because Binder's memory
  is what the learner runs out of first (and Binder stops an idle server after about 10 minutes anyway).

    python -m course_utils.course lab-settings            # make lab and make test run it
    python -m course_utils.course lab-settings --binder   # binder/postBuild runs it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SHUT_DOWN_ON_CLOSE = {"@jupyterlab/notebook-extension:tracker": {"kernelShutdown": True}}
CULL = {"cull_idle_timeout": 3600, "cull_interval": 120, "cull_connected": False}
BINDER_CULL = {"cull_idle_timeout": 900, "cull_interval": 60, "cull_connected": True}


def overrides_path(prefix: str | Path = sys.prefix) -> Path:
    """JupyterLab's settings for every user of the environment at `prefix`."""
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def server_config_path(prefix: str | Path = sys.prefix) -> Path:
    """jupyter_server's configuration for every user of the environment at `prefix`."""
    return Path(prefix) / "etc" / "jupyter" / "jupyter_server_config.json"


def _merged(path: Path, additions: dict) -> dict:
    """The JSON object in `path` (empty when there is none) with `additions` merged in, one level deep."""
    settings = {}
    if path.exists():
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            settings = error
        if not isinstance(settings, dict):
            raise ValueError(f"{path} is not a JSON object of settings (received: {settings!r:.80}); it is left as "
                             f"it is. Fix or remove it, then run: python -m {__spec__.name}")
    return {**settings, **{key: {**settings.get(key, {}), **values} for key, values in additions.items()}}


def write(prefix: str | Path = sys.prefix, *, binder: bool = False) -> list[Path]:
    """Writes the course's JupyterLab settings into the environment at `prefix`; returns the files written.

    Settings already in either file are kept; only the course's own keys are set.

    Args:
        prefix: The environment (`sys.prefix` of its Python).
        binder: Binder's culling (every idle kernel, after 15 minutes) instead of a learner's machine's.

    Raises:
        ValueError: A settings file exists but is not a JSON object; both are left as they are.
    """
    overrides, server = overrides_path(prefix), server_config_path(prefix)
    lab = _merged(overrides, SHUT_DOWN_ON_CLOSE)
    kernels = _merged(server, {"MappingKernelManager": BINDER_CULL if binder else CULL})
    for path, settings in ((overrides, lab), (server, kernels)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return [overrides, server]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.course lab-settings", description=__doc__.split("\n")[0])
    parser.add_argument("--binder", action="store_true", help="Binder's culling: every kernel idle 15 minutes")
    args = parser.parse_args(argv)
    try:
        written = write(binder=args.binder)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    print("JupyterLab settings of the course: " + ", ".join(str(path) for path in written))
    return 0
