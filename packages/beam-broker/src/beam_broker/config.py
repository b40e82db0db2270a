"""Broker settings and the commands they select: the Lean server command and the Lake executable for saves.

Owns `BrokerConfig`, the precedence rules (`--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on
PATH) and `split_command`, the one reading of a Lean command written as a shell command line (`--lean-cmd` of
`lean-beam` and `lean-beam-mcp`, the environment variable). Pure: it reads the environment mapping it is given and
PATH, never starts a process.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence

from beam_lsp.redaction import Redactor

from .errors import RUNTIME_SETUP, BrokerError

REPORT_DELAY_ARG = "-Dserver.reportDelayMs=0"
"""Lean waits 200 ms before publishing diagnostics by default; that delay would dominate every sync."""


def slow_reports(cmd: Sequence[str]) -> str | None:
    """What is wrong with a Lean server command that lacks `REPORT_DELAY_ARG`, with the fix; None when it has it.

    Without it Lean holds every report for 200 ms, and each probe and sync waits for it (measured: `run_at`
    205-233 ms instead of about 4 ms). `doctor` shows this as a hint, `lean-beam-mcp` as a warning at start.
    """
    if REPORT_DELAY_ARG in cmd:
        return None
    return (
        f"the Lean server command lacks {REPORT_DELAY_ARG}: Lean then holds every report for 200 ms and each probe "
        "and sync waits that long; add it (after `--` for `lake serve`)"
    )


def split_command(text: str) -> list[str]:
    """The words of a Lean command written as a shell command line (`lake serve -- -Dserver.reportDelayMs=0`).

    Raises:
        ValueError: It does not split like a shell command (an unclosed quote), or has no words. The message
            names the problem, never the text (it may hold a secret flag).
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"does not split like a shell command: {exc}") from None
    if not words:
        raise ValueError("must not be empty")
    return words


SERVER_CMD_ENV = "BEAM_LEAN_SERVER_CMD"
DEFAULT_MIRRORS_PER_DOCUMENT = 2
DEFAULT_MIRROR_IDLE_SECONDS = 120.0
DEFAULT_MAX_SOURCE_BYTES = 16 * 1024 * 1024
"""Largest Lean source Beam reads (16 MiB): a bigger file, or one that grows past it while read, is refused."""
DEFAULT_MAX_OPEN_DOCUMENTS = 64
"""Open source documents per workspace (each is a Lean file worker, ~21 MiB); the least recently used close."""
DEFAULT_CHANGE_DELAY = 0.1
"""Seconds an edit found by `update` waits before Lean elaborates the file again (`LeanClient.change(defer=)`),
unless a call asks about the file sooner (then at once). A probe, goals or hover right after the edit runs in a
mirror meanwhile without the file's worker taking both cores; Lean's whole-file diagnostics come at most this
much later, and only when nobody is waiting for them."""


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Process-wide broker settings.

    Attributes:
        lean_cmd: Server command for every workspace (overrides `BEAM_LEAN_SERVER_CMD` and `lake serve`).
        env: Environment for Lean and Lake processes (default: this process's).
        mirrors_per_document: Probe mirrors per source document (each is a Lean worker process).
        mirror_idle_seconds: Close a probe mirror unused for this long.
        max_source_bytes: Largest source file read from disk (`invalidParams` beyond it).
        max_open_documents: Open source documents per workspace; beyond it the least recently used ones that
            no call is using are closed in Lean (probe mirrors are bounded by `mirrors_per_document` instead).
        change_delay: Seconds a source edit waits before it is sent to Lean, unless something asks about the
            file sooner (`DEFAULT_CHANGE_DELAY`; 0 sends it at once).
        warm_scratch: Start the workspace's `run_code` scratch document with the imports of the first source
            document opened, in the background, so that a `run_code` text with the same imports finds its Lean
            worker started (one more worker per workspace, closed when idle like every probe mirror).
    """

    lean_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    mirrors_per_document: int = DEFAULT_MIRRORS_PER_DOCUMENT
    mirror_idle_seconds: float = DEFAULT_MIRROR_IDLE_SECONDS
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES
    max_open_documents: int = DEFAULT_MAX_OPEN_DOCUMENTS
    change_delay: float = DEFAULT_CHANGE_DELAY
    warm_scratch: bool = False

    def environment(self) -> dict[str, str]:
        """The environment for child processes: `env`, else a copy of this process's."""
        return dict(self.env if self.env is not None else os.environ)

    def redactor(self, env: Mapping[str, str]) -> Redactor:
        """The redactor of a broker with this configuration and environment `env`.

        Secrets are the values of secret-named variables of `env` and the secret flags of the server command,
        wherever that comes from (`lean_cmd` or `$BEAM_LEAN_SERVER_CMD`): `--auth-token=...` in either is hidden
        in every error, log line and status the broker produces.
        """
        return Redactor.from_sources(env, command_words(self, env))


def server_command(config: BrokerConfig, env: Mapping[str, str]) -> list[str]:
    """The Lean server command: `--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when no command can be found.
    """
    if config.lean_cmd:
        return list(config.lean_cmd)
    from_env = env.get(SERVER_CMD_ENV)
    if from_env:
        try:
            return split_command(from_env)
        except ValueError as exc:
            raise BrokerError(RUNTIME_SETUP, f"{SERVER_CMD_ENV} {exc}") from None
    lake = shutil.which("lake", path=env.get("PATH"))
    if lake is None:
        raise BrokerError(
            RUNTIME_SETUP,
            "no Lean server command: install Lean with elan so `lake` is on PATH, set "
            f"{SERVER_CMD_ENV}, or pass --lean-cmd",
        )
    return [lake, "serve", "--", REPORT_DELAY_ARG]


def command_words(config: BrokerConfig, env: Mapping[str, str]) -> list[str]:
    """The words of the configured server command, whatever its source (for finding the secrets it carries).

    Unlike `server_command` this never fails: a `$BEAM_LEAN_SERVER_CMD` that `split_command` refuses is split at
    whitespace (quotes dropped), so its secrets are still found, and without an explicit command there are no words.
    """
    if config.lean_cmd:
        return list(config.lean_cmd)
    from_env = env.get(SERVER_CMD_ENV) or ""
    try:
        return split_command(from_env)
    except ValueError:
        return [word.replace("'", "").replace('"', "") for word in from_env.split()]


def lake_command(config: BrokerConfig, env: Mapping[str, str]) -> str:
    """The `lake` executable for builds: the one the server runs under, else `lake` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when there is no Lake (a setup problem, as a missing Lean is).
    """
    try:
        cmd = server_command(config, env)
    except BrokerError:
        cmd = []
    if cmd and os.path.basename(cmd[0]) == "lake":
        return cmd[0]
    found = shutil.which("lake", path=env.get("PATH"))
    if found is None:
        raise BrokerError(RUNTIME_SETUP, "saving needs Lake: no `lake` executable on PATH")
    return found
