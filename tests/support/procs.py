"""Finding Lean processes in tests (to kill a file worker or the server at a chosen moment)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from beam_lsp._process import descendants


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def worker_pids(server_pid: int, uri: str) -> list[int]:
    """PIDs of Lean file workers (`lean --worker ... <uri>`) under the server process."""
    return [p for p in descendants(server_pid) if "--worker" in cmdline(p) and uri in cmdline(p)]


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
