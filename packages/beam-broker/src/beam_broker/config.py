"""Broker settings and the commands they select: the Lean server command and the Lake executable for saves.

Owns `BrokerConfig`, the precedence rules of a workspace's Lean command and `split_command`, the one reading of a
Lean command written as a shell command line (`--lean-cmd` of `lean-beam` and `lean-beam-mcp`, the environment
variable). An explicitly configured command wins (`--lean-cmd` / `BrokerConfig.lean_cmd`, then
`$BEAM_LEAN_SERVER_CMD`); without one, the project's own toolchain (its `lean-toolchain`, when elan's toolchain
directory holds it) replaces the default, `lake serve` found on PATH. Pure: it reads the environment mapping and
the files it is given (`lean-toolchain`, elan's directory) and PATH, never starts a process.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from beam_lsp.project import elan_toolchain_dir, read_toolchain
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
DEFAULT_MAX_CALLS = 64
"""Cheap calls (hover, goals, probes, ...) in flight in the whole broker; more wait (`admission_wait`), then `busy`."""
DEFAULT_MAX_WORKSPACE_CALLS = 16
"""Cheap calls in flight per workspace."""
DEFAULT_MAX_HEAVY_CALLS = 8
"""Heavy calls (whole-file barriers, builds, batches: `OperationSpec.heavy`) in flight in the whole broker."""
DEFAULT_MAX_WORKSPACE_HEAVY_CALLS = 2
"""Heavy calls in flight per workspace."""
DEFAULT_ADMISSION_WAIT = 2.0
"""Seconds a call waits for a free slot before it fails with `busy` (a short bound: a hang helps nobody)."""
DEFAULT_MEASURE_INTERVAL = 2.0
"""Seconds between two measurements of the Lean process trees' resident memory (also taken after each open)."""
ELAN_HOME_ENV = "ELAN_HOME"
"""Where elan keeps its toolchains (`$ELAN_HOME/toolchains/<name>`; default `~/.elan`)."""


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
        memory_budget_mib: Resident memory all Lean process trees together may use (MiB); beyond it the least
            recently used idle documents are closed, then the least recently used idle workspaces shut down.
            None: no budget.
        idle_timeout: Seconds a workspace runtime may stay without a call before it shuts down (None: never).
        measure_interval: Seconds between two measurements of the Lean trees' memory (`memory_budget_mib`).
        max_calls: Cheap calls in flight in the broker (admission control; more wait, then fail `busy`).
        max_workspace_calls: Cheap calls in flight per workspace.
        max_heavy_calls: Heavy calls (`OperationSpec.heavy`) in flight in the broker; they have slots of their own,
            so they never take the slots of cheap calls.
        max_workspace_heavy_calls: Heavy calls in flight per workspace.
        admission_wait: Seconds a call waits for a slot before it fails with `busy`.
        project_toolchains: Without an explicit command (`lean_cmd`, `$BEAM_LEAN_SERVER_CMD`), start a workspace
            whose `lean-toolchain` names a toolchain installed in elan's toolchain directory with that toolchain's
            `lake serve` instead of the `lake serve` on PATH. An explicit command always wins.
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
    memory_budget_mib: int | None = None
    idle_timeout: float | None = None
    measure_interval: float = DEFAULT_MEASURE_INTERVAL
    max_calls: int = DEFAULT_MAX_CALLS
    max_workspace_calls: int = DEFAULT_MAX_WORKSPACE_CALLS
    max_heavy_calls: int = DEFAULT_MAX_HEAVY_CALLS
    max_workspace_heavy_calls: int = DEFAULT_MAX_WORKSPACE_HEAVY_CALLS
    admission_wait: float = DEFAULT_ADMISSION_WAIT
    project_toolchains: bool = True
    warm_scratch: bool = False

    def __post_init__(self) -> None:
        """Refuse a setting that would silently mean something else (a budget of 0 MiB, no call ever admitted).

        Raises:
            ValueError: Which setting, and what it must be.
        """
        at_least_one = (
            "mirrors_per_document",
            "max_source_bytes",
            "max_open_documents",
            "max_calls",
            "max_workspace_calls",
            "max_heavy_calls",
            "max_workspace_heavy_calls",
        )
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise ValueError(f"BrokerConfig.{name} must be at least 1, not {getattr(self, name)!r}")
        for name in ("mirror_idle_seconds", "change_delay", "admission_wait"):
            if not getattr(self, name) >= 0:  # NaN too
                raise ValueError(f"BrokerConfig.{name} must be 0 or more seconds, not {getattr(self, name)!r}")
        if not self.measure_interval > 0:
            raise ValueError(
                f"BrokerConfig.measure_interval must be more than 0 seconds, not {self.measure_interval!r}"
            )
        if self.memory_budget_mib is not None and self.memory_budget_mib < 1:
            raise ValueError(
                f"BrokerConfig.memory_budget_mib must be at least 1 (None: no budget), not {self.memory_budget_mib!r}"
            )
        if self.idle_timeout is not None and not self.idle_timeout > 0:
            raise ValueError(
                f"BrokerConfig.idle_timeout must be more than 0 seconds (None: never), not {self.idle_timeout!r}"
            )

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


def explicit(config: BrokerConfig, env: Mapping[str, str]) -> bool:
    """Whether a Lean server command is configured explicitly (`lean_cmd` or `$BEAM_LEAN_SERVER_CMD`).

    An explicit command serves every workspace; project toolchains replace only the default (`lake serve` on PATH).
    """
    return bool(config.lean_cmd) or bool(env.get(SERVER_CMD_ENV))


def server_command(config: BrokerConfig, env: Mapping[str, str]) -> list[str]:
    """The configured Lean server command: `--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on PATH.

    A workspace may run its project's toolchain instead of the last (`workspace_command`).

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


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """A project's toolchain as elan installed it: its name (`lean-toolchain`), directory and `lake`."""

    name: str
    directory: str
    lake: str

    def server_command(self) -> list[str]:
        """`lake serve` of this toolchain, without Lean's report delay."""
        return [self.lake, "serve", "--", REPORT_DELAY_ARG]


def toolchain_name(root: str) -> str | None:
    """What the project's `lean-toolchain` file names (`beam_lsp.project.read_toolchain`), or None without one."""
    try:
        return read_toolchain(Path(root))
    except OSError:
        return None


def elan_home(env: Mapping[str, str]) -> str:
    """The home of elan: `$ELAN_HOME`, else `~/.elan` (with the environment's HOME)."""
    found = env.get(ELAN_HOME_ENV)
    if found:
        return found
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".elan")


def project_toolchain(config: BrokerConfig, env: Mapping[str, str], root: str) -> Toolchain | None:
    """The toolchain a workspace runs on: the one its `lean-toolchain` names, when elan's directory holds it.

    None when a command is configured explicitly (`lean_cmd`, `$BEAM_LEAN_SERVER_CMD`: it serves every workspace,
    so a test lane or an operator gets the Lean it asked for on a machine with elan), the feature is off
    (`project_toolchains`), the project has no `lean-toolchain`, or that toolchain is not installed (no executable
    `bin/lake` in `$ELAN_HOME/toolchains/<name>`): the configured command is used.
    """
    if not config.project_toolchains or explicit(config, env):
        return None
    name = toolchain_name(root)
    if name is None:
        return None
    folder = elan_toolchain_dir(name)
    if folder is None:
        return None
    directory = os.path.join(elan_home(env), "toolchains", folder)
    lake = os.path.join(directory, "bin", "lake")
    if not (os.path.isfile(lake) and os.access(lake, os.X_OK)):
        return None
    return Toolchain(name, directory, lake)


def workspace_command(config: BrokerConfig, env: Mapping[str, str], root: str) -> tuple[list[str], Toolchain | None]:
    """The Lean server command of one workspace, and the project toolchain it comes from (None: configured).

    In order: an explicit command (`lean_cmd`, `$BEAM_LEAN_SERVER_CMD`), the project's toolchain (when installed),
    `lake serve` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when there is no project toolchain and no command can be found.
    """
    toolchain = project_toolchain(config, env, root)
    if toolchain is not None:
        return toolchain.server_command(), toolchain
    return server_command(config, env), None


def lake_command(config: BrokerConfig, env: Mapping[str, str], root: str | None = None) -> str:
    """The `lake` executable for builds: the one the workspace's server runs under, else `lake` on PATH.

    That is the explicit command's `lake` when it runs one, else (with `root`) the project toolchain's, else the
    `lake` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when there is no Lake (a setup problem, as a missing Lean is).
    """
    toolchain = project_toolchain(config, env, root) if root is not None else None
    if toolchain is not None:
        return toolchain.lake
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
