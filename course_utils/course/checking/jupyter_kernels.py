"""The kernels the course's builds start: where their connection files live, and how every one is stopped.

A build (the bench, render, the answer key) runs lessons in kernels of its own. `Client` is nbclient's
client with each kernel's connection file in a folder of this process (`connection_folder`), which the
next run clears when this one was killed; `Kernels` holds a series' running kernels so that stopping the
series kills them; `stopped_like_ctrl_c` makes SIGTERM end a build the way Ctrl-C does, through every
`finally`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import uuid
from pathlib import Path


def client_class():
    """nbclient's NotebookClient, its kernels' connection files in `connection_folder()`."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        def create_kernel_manager(self):
            manager = super().create_kernel_manager()
            manager.connection_file = str(connection_folder() / f"kernel-{uuid.uuid4().hex}.json")
            return manager

        def _cleanup_kernel(self):  # registered at exit by nbclient; a kernel stopped by the series is gone
            if self.km is not None:
                super()._cleanup_kernel()

    return Client


def connection_folder() -> Path:
    """Where this process's lesson kernels keep their connection files (ports and key, one small JSON each).

    jupyter_client deletes a kernel's file when the kernel is cleaned up, which a killed process
    (SIGKILL, an out-of-memory kill) never does: so the files go into a folder named after the
    process, `<tmp>/course-kernels-<uid>/<pid>`, and the next run removes the folders of processes
    that no longer run.
    """
    root = Path(tempfile.gettempdir()) / f"course-kernels-{getattr(os, 'getuid', lambda: 'user')()}"
    root.mkdir(mode=0o700, exist_ok=True)
    mine = root / str(os.getpid())
    if not mine.is_dir():
        for other in root.iterdir():
            if other.name.isdigit() and not _running(int(other.name)):
                shutil.rmtree(other, ignore_errors=True)
        mine.mkdir(mode=0o700, exist_ok=True)
    return mine


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def stopped_like_ctrl_c():
    """SIGTERM (a `kill`, a CI job cancelled, a terminal closed) ends the command as Ctrl-C does: as
    KeyboardInterrupt, so every `finally` runs. The kernels are stopped and their connection files
    (`tmp*.json` in the temporary folder, which jupyter_client deletes when a kernel is cleaned up)
    are removed; by default SIGTERM ends Python at once and leaves both. Only in the main thread."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


class Kernels:
    """The kernels of a series' lessons while they run, so the series can stop them."""

    def __init__(self):
        self._clients, self._lock = set(), threading.Lock()

    @contextlib.contextmanager
    def running(self, client):
        with self._lock:
            self._clients.add(client)
        try:
            yield
        finally:
            with self._lock:
                self._clients.discard(client)

    def kill(self) -> None:
        """Kills every running kernel and what it started (its process group); its `execute` then raises."""
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            provisioner = getattr(getattr(client, "km", None), "provisioner", None)
            process = getattr(provisioner, "process", None)
            if process is None:
                continue  # not started yet: killed on the next round
            try:
                if getattr(provisioner, "pgid", None) and hasattr(os, "killpg"):
                    os.killpg(provisioner.pgid, signal.SIGKILL)
                else:
                    process.kill()
            except (ProcessLookupError, OSError):
                pass  # it ended meanwhile
