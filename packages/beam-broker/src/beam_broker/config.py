"""Broker settings and the commands they select: the Lean server command and the Lake executable for saves.

Owns `BrokerConfig` and the precedence rules (`--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on
PATH). Pure: it reads the environment mapping it is given and PATH, never starts a process.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence

from .errors import INTERNAL_ERROR, RUNTIME_SETUP, BrokerError

REPORT_DELAY_ARG = "-Dserver.reportDelayMs=0"
"""Lean waits 200 ms before publishing diagnostics by default; that delay would dominate every sync."""
SERVER_CMD_ENV = "BEAM_LEAN_SERVER_CMD"
DEFAULT_MIRRORS_PER_DOCUMENT = 2
DEFAULT_MIRROR_IDLE_SECONDS = 120.0


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Process-wide broker settings.

    Attributes:
        lean_cmd: Server command for every workspace (overrides `BEAM_LEAN_SERVER_CMD` and `lake serve`).
        env: Environment for Lean and Lake processes (default: this process's).
        mirrors_per_document: Probe mirrors per source document (each is a Lean worker process).
        mirror_idle_seconds: Close a probe mirror unused for this long.
    """

    lean_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    mirrors_per_document: int = DEFAULT_MIRRORS_PER_DOCUMENT
    mirror_idle_seconds: float = DEFAULT_MIRROR_IDLE_SECONDS

    def environment(self) -> dict[str, str]:
        """The environment for child processes: `env`, else a copy of this process's."""
        return dict(self.env if self.env is not None else os.environ)


def server_command(config: BrokerConfig, env: Mapping[str, str]) -> list[str]:
    """The Lean server command: `--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when no command can be found.
    """
    if config.lean_cmd:
        return list(config.lean_cmd)
    from_env = env.get(SERVER_CMD_ENV)
    if from_env:
        return shlex.split(from_env)
    lake = shutil.which("lake", path=env.get("PATH"))
    if lake is None:
        raise BrokerError(
            RUNTIME_SETUP,
            "no Lean server command: install Lean with elan so `lake` is on PATH, set "
            f"{SERVER_CMD_ENV}, or pass --lean-cmd",
        )
    return [lake, "serve", "--", REPORT_DELAY_ARG]


def lake_command(config: BrokerConfig, env: Mapping[str, str]) -> str:
    """The `lake` executable for builds: the one the server runs under, else `lake` on PATH.

    Raises:
        BrokerError: `internalError` when there is no Lake.
    """
    try:
        cmd = server_command(config, env)
    except BrokerError:
        cmd = []
    if cmd and os.path.basename(cmd[0]) == "lake":
        return cmd[0]
    found = shutil.which("lake", path=env.get("PATH"))
    if found is None:
        raise BrokerError(INTERNAL_ERROR, "saving needs Lake: no `lake` executable on PATH")
    return found
