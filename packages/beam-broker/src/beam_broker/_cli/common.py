"""What every `lean-beam` command shares: exit codes, common options, the project root, output, the event loop.

Owns: the exit-code table (`exit_code` maps a broker error code to a status), `Options` (the common options of
one invocation, including whether output is for a person or JSON), `workspace_root`, `Output` (printing a final
answer or an error in the chosen form) and `run` (an event loop that SIGINT/SIGTERM cancel). The commands
themselves live in `cli` (operations), `daemon_commands` (`stats`, `daemon`), `doctor` and `completion`. Nothing here
imports the Lean stack.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Final, TextIO, TypeVar

from beam_broker.config import BrokerConfig, split_command
from beam_broker.errors import (
    INTERNAL_ERROR,
    INVALID_INPUT,
    RUNTIME_SETUP,
    SAVE_UNSUPPORTED_SETUP,
    SYNC_BARRIER_INCOMPLETE,
    WORKER_CRASHED,
    WORKER_EXITED,
    invalid_input,
)
from beam_lsp.command_line import stream_gone
from beam_lsp.project import PROJECT_MARKERS, find_project_root
from beam_lsp.redaction import Redactor

from .progress import Terminal, is_terminal
from .render import error_line, print_json

T = TypeVar("T")

PROG: Final = "lean-beam"
EXIT_OK: Final = 0
"""The call succeeded (for sync/save: the file has no errors)."""
EXIT_LEAN_ERRORS: Final = 1
"""Lean reported errors in the file: a sync or refresh that is not save-ready, a save refused for errors."""
EXIT_USAGE: Final = 2
"""Bad command line or invalid input (`invalidInput`): nothing was asked of Lean."""
EXIT_SETUP: Final = 3
"""Lean or setup failure: no Lean server command, Lean could not start or died, the barrier failed, a bug."""
EXIT_REFUSED: Final = 4
"""The broker refused the call: a stale version or handle (`contentModified`), a bad position (`invalidParams`)..."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted (Ctrl-C, SIGTERM); the call was cancelled."""

SETUP_FAILURES: Final = frozenset(
    {RUNTIME_SETUP, WORKER_EXITED, WORKER_CRASHED, SYNC_BARRIER_INCOMPLETE, INTERNAL_ERROR, SAVE_UNSUPPORTED_SETUP}
)
"""Broker error codes that mean Lean (or its setup) failed, rather than that the request was refused."""


def exit_code(code: str) -> int:
    """The exit status for a broker error code (a save refused for errors is decided by the caller: 1)."""
    if code == INVALID_INPUT:
        return EXIT_USAGE
    if code in SETUP_FAILURES:
        return EXIT_SETUP
    return EXIT_REFUSED


# ---- options and workspace ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Options:
    """The common options of one invocation.

    Attributes:
        human: Print results as text for a person (`--human`, or stdout is a terminal and not `--json`).
        terminal: The one writer of stdout and stderr for this invocation: notes, `-v` lines, progress and
            results all go through it, so none is written over the live progress line.
    """

    root: str | None = None
    lean_cmd: list[str] | None = None
    compact: bool = False
    quiet: bool = False
    verbose: bool = False
    no_daemon: bool = False
    human: bool = False
    terminal: Terminal = dataclasses.field(
        default_factory=lambda: Terminal(sys.stdout, sys.stderr), compare=False, repr=False
    )

    @classmethod
    def of(cls, args: argparse.Namespace, stdout: TextIO | None = None) -> Options:
        """From parsed arguments (`stdout` decides the default output form).

        Raises:
            BrokerError: `invalidInput` for a `--lean-cmd` that does not split.
        """
        lean_cmd: list[str] | None = None
        raw = getattr(args, "lean_cmd", None)
        if raw is not None:
            try:
                lean_cmd = split_command(raw)
            except ValueError as exc:
                raise invalid_input(f"--lean-cmd {exc}") from None
        form = getattr(args, "output", None)
        human = form == "human" or (form is None and is_terminal(stdout if stdout is not None else sys.stdout))
        return cls(
            root=getattr(args, "root", None),
            lean_cmd=lean_cmd,
            compact=getattr(args, "compact", False),
            quiet=getattr(args, "quiet", False),
            verbose=getattr(args, "verbose", False),
            no_daemon=getattr(args, "no_daemon", False),
            human=human,
        )

    def redactor(self) -> Redactor:
        """The redactor of this invocation: its environment and Lean command (`--lean-cmd` or the variable)."""
        return BrokerConfig(lean_cmd=self.lean_cmd).redactor(os.environ)

    def note(self, message: str) -> None:
        """A `--verbose` line on stderr."""
        if self.verbose:
            self.terminal.print_err(f"beam: {message}")

    def say(self, message: str) -> None:
        """A line on stderr unless `--quiet`."""
        if not self.quiet:
            self.terminal.print_err(f"beam: {message}")


def workspace_root(options: Options, file: str | None = None) -> str:
    """`--root` (made absolute) or the discovered project root.

    Args:
        options: The common options.
        file: The command's file argument as typed, if any: when the current directory is in no project but the
            file is, the error names the file's project.

    Raises:
        BrokerError: `invalidInput` when no project contains the current directory.
    """
    if options.root is not None:
        return os.path.abspath(options.root)
    cwd = Path.cwd()
    found = find_project_root(cwd)
    if found is None:
        home = None if file is None else find_project_root(Path(file).absolute())
        hint = (
            "pass --root DIR"
            if home is None
            else f"{file} is in the Lean project {home}: run lean-beam there, or pass --root {home}"
        )
        raise invalid_input(f"no Lean project contains {cwd} (looked for {', '.join(PROJECT_MARKERS)} upward); {hint}")
    return str(found)


# ---- output -------------------------------------------------------------------------------------------
class Output:
    """Prints one command's final answer as JSON or as text, on a `Terminal`."""

    def __init__(self, options: Options, terminal: Terminal | None = None) -> None:
        self.options = options
        self.terminal = terminal if terminal is not None else options.terminal

    def json(self, value: Any) -> None:
        """The JSON of a result on stdout."""
        print_json(value, compact=self.options.compact, stream=self.terminal.out)

    def lines(self, lines: list[str]) -> None:
        """Text lines on stdout."""
        for line in lines:
            self.terminal.print_out(line)

    def value(self, value: Mapping[str, Any], text: Callable[[Mapping[str, Any]], list[str]]) -> None:
        """A result: its JSON, or `text(value)` for a person."""
        if self.options.human:
            self.lines(text(value))
        else:
            self.json(value)

    def error(self, error: Mapping[str, Any]) -> int:
        """An error (redacted) on stderr; returns its exit status."""
        redacted = self.options.redactor().redact_json(dict(error))
        try:
            if self.options.human:
                self.terminal.print_err(error_line(redacted, verbose=self.options.verbose))
            else:
                print_json(redacted, compact=self.options.compact, stream=self.terminal.err)
        except BrokenPipeError:  # nobody reads stderr (`2>&1 | head`): the status still says what failed
            stream_gone(self.terminal.err)
        return exit_code(str(redacted.get("code")))

    def finish(self, answer: Mapping[str, Any], text: Callable[[Mapping[str, Any]], list[str]]) -> int:
        """Print a final `{"result"}` or `{"error"}` message and return the exit status."""
        if "result" in answer and isinstance(answer["result"], Mapping):
            self.value(answer["result"], text)
            return EXIT_OK
        error = answer.get("error")
        if not isinstance(error, Mapping):
            error = {"code": INTERNAL_ERROR, "message": f"unexpected answer: {answer!r}"}
        return self.error(error)


# ---- running ------------------------------------------------------------------------------------------
class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; the running call was cancelled."""


def run(fn: Callable[[], Awaitable[T]], background: Callable[[], Coroutine[Any, Any, None]] | None = None) -> T:
    """Run `fn` on an event loop, with `background` beside it until `fn` returns.

    SIGINT and SIGTERM cancel both and raise `Interrupted`.
    """
    import anyio
    import anyio.abc

    from beam_lsp.errors import unwrap_group

    async def main() -> T:
        interrupted = False
        result: T
        with unwrap_group():
            async with anyio.create_task_group() as tg:
                if threading.current_thread() is threading.main_thread():

                    async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                        nonlocal interrupted
                        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                            task_status.started()  # the handlers are in place before `fn` starts
                            async for _ in signals:
                                interrupted = True
                                tg.cancel_scope.cancel()
                                return

                    await tg.start(watch)
                if background is not None:
                    tg.start_soon(background)
                result = await fn()
                tg.cancel_scope.cancel()
        if interrupted:
            raise Interrupted
        return result

    return anyio.run(main)
