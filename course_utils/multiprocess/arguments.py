"""What a launch may be asked for: every argument is checked before anything starts.

Each check says what it received and what to give instead. Integers of any
kind (Python's, NumPy's) are whole numbers; booleans are not.
"""

from __future__ import annotations

import math
import operator
import os
import socket
from collections.abc import Sequence
from pathlib import Path

HOST = "127.0.0.1"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_2x4.py"


class LaunchError(ValueError):
    """The launch was asked for something that cannot run."""


def whole(value):
    """An integer of any kind (Python's, NumPy's) as a Python int; anything else unchanged, for the checks to name."""
    if isinstance(value, bool):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def check_port_number(port) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        zero = (" Port 0 would let each process pick its own port, so they could never meet."
                if port == 0 else "")
        raise LaunchError(f"port must be a TCP port number from 1 to 65535 (above 1023 unless run as root). "
                          f"Received: port={port!r}.{zero} Leave the port out to let the launcher pick a free one.")


def check_port(port: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as error:
            raise LaunchError(f"Port {port} on {HOST} is not free ({error.strerror}). Received: port={port}. "
                              f"Pick another port, or none to let the launcher choose a free one.") from None
    return port


def validate(script, processes, devices_per_process, mesh, timeout) -> Path:
    for name, value in (("processes", processes), ("devices_per_process", devices_per_process)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LaunchError(f"{name} must be a whole number >= 1. Received: {name}={value!r}. "
                              f"Use e.g. processes=2, devices_per_process=4.")
    if mesh is not None:
        if isinstance(mesh, (str, int)) or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in mesh):
            raise LaunchError(f"mesh must be a tuple of positive whole numbers such as (2, 4). Received: mesh={mesh!r}.")
        need, have = _product(mesh), processes * devices_per_process
        if need != have:
            raise LaunchError(
                f"The mesh {tuple(mesh)} needs {need} devices, but {processes} processes x "
                f"{devices_per_process} devices per process give {have}. Received: processes={processes}, "
                f"devices_per_process={devices_per_process}. Choose them so processes x devices per "
                f"process = {need}, e.g. {_splits(need)}.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise LaunchError(f"timeout must be a positive, finite number of seconds. Received: timeout={timeout!r}. "
                          f"Use e.g. timeout=600.")
    path = Path(script)
    if not path.is_file():
        raise LaunchError(f"No script at {str(path)!r} (looked from {os.getcwd()}). "
                          f"Give the path of a Python file, e.g. {str(EXAMPLE)!r}.")
    return path


def _product(shape: Sequence[int]) -> int:
    total = 1
    for n in shape:
        total *= int(n)
    return total


def _splits(n: int) -> str:
    pairs = [f"{p} x {n // p}" for p in range(1, n + 1) if n % p == 0]
    return ", ".join(pairs[:4])
