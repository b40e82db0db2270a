"""Running one short external command (``git``, ``elan``, ``lake``) with a deadline.

This module owns child-process hygiene for the commands context collection runs: no stdin, captured UTF-8 output,
a process group of its own that is killed with its whole tree on timeout (beam-lsp's `kill_tree`).
It must not interpret output; callers do.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

_MAX_OUTPUT: Final = 64 * 1024
_REAP_TIMEOUT: Final = 2.0
_POSIX: Final = os.name == "posix"


class CommandError(Exception):
    """A command could not run, timed out or exited non-zero; ``str()`` is a one-line reason."""

    def __init__(self, reason: str, stderr: str = "") -> None:
        super().__init__(reason)
        self.stderr = stderr


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _kill(process: subprocess.Popen[str]) -> None:
    if _POSIX:
        from beam_lsp import kill_tree  # only on a timeout: it loads anyio, which the CLI needs nowhere else

        kill_tree(process.pid)
    else:  # pragma: no cover - exercised only on Windows
        process.kill()


def run_command(argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str], timeout: float) -> str:
    """Run ``argv`` and return its stripped standard output.

    Raises:
        CommandError: The command could not start, outlived ``timeout`` seconds (its whole process
            group is then killed) or exited with a non-zero status.
    """
    name = Path(argv[0]).name
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
            errors="replace",
            start_new_session=_POSIX,
        )
    except OSError as exc:
        raise CommandError(f"could not run {name}: {exc.strerror or exc}") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        try:
            process.communicate(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # A descendant left the process group and still holds our pipes: stop reading them.
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
            process.wait()
        raise CommandError(f"{name} did not answer within {timeout:g}s") from None
    if process.returncode != 0:
        detail = _first_line(stderr) or _first_line(stdout) or "no output"
        raise CommandError(f"{name} exited with status {process.returncode}: {detail}", stderr)
    return stdout[:_MAX_OUTPUT].strip()
