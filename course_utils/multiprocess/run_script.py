"""Runs a worker script as `python SCRIPT ARGS...` would, except how it ends when it fails.

    python run_script.py SCRIPT ARGS...

The launcher starts every process of a run this way. An uncaught exception
prints its traceback and ends the process at once with exit status 1 (130 for
Ctrl-C); `sys.exit(n)` with n other than 0 ends it at once with n. Python would
otherwise first run its exit handlers, and JAX's distributed shutdown among
them waits for the other processes, which may never come. So the launcher
judges a process by its exit status alone, never by what it printed: a script
that prints the traceback of an error it caught, and goes on, is doing fine.

A script that ends well exits as usual, exit handlers and all. Only the
standard library is imported here.
"""

from __future__ import annotations

import os
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2:
        print("Usage: python run_script.py SCRIPT [ARGS...]", file=sys.stderr)
        _end(2)
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` sets it (not this file's folder)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop)
        if code:
            _end(code)
        raise
    except KeyboardInterrupt:
        _end(130)
    except BaseException as error:
        error.__traceback__ = _from_script(error.__traceback__, script)
        sys.excepthook(type(error), error, error.__traceback__)
        _end(1)


def _exit_code(stop: SystemExit) -> int:
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)  # sys.exit("message"), as Python shows it
    return 1


def _from_script(tb, script: str):
    """The traceback from the script's first frame on (this runner's and runpy's frames left out)."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != script:
        start = start.tb_next
    return start or tb


def _end(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
