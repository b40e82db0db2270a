"""Command-line plumbing every Beam CLI shares: a reader that went away, and a mistyped flag.

Python ignores SIGPIPE, so a write to a pipe whose reader exited raises `BrokenPipeError`; argparse's own printing
swallows it (`--help | head -1` then exited 0), and an uncaught one ends in a traceback. The rule `lean-beam`,
`lean-beam-mcp` and `beam-feedback` share: the parser lets the error through (`PipeParser`), and `main` catches it
and returns `stdout_gone()`, the status of a process SIGPIPE killed (141). A line on a stderr nobody reads
(`2>&1 | head`) is no new failure (`say`): the command keeps its status. A mistyped flag gets "did you mean".
It lives here, in the one package all three CLIs depend on. Standard library only: a CLI pays nothing for it
before its first command.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, NoReturn, TextIO, cast

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["EXIT_BROKEN_PIPE", "PipeParser", "did_you_mean", "say", "stdout_gone", "stream_gone"]

EXIT_BROKEN_PIPE: Final = 141
"""stdout was closed early (`... | head -1`): the status of a process killed by SIGPIPE (128 + 13)."""


class PipeParser(argparse.ArgumentParser):
    """An argparse parser whose `--help`, `--version` and usage text let a reader of stdout that went away raise.

    A usage error written to a stderr nobody reads keeps its status 2; a mistyped option gets "did you mean".
    """

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """Write `--help`, `--version` and usage text, letting a reader of stdout that went away raise.

        argparse's own swallows `BrokenPipeError`, so `--help | head -1` exited 0; `main` exits 141 instead.

        Raises:
            BrokenPipeError: The reader of stdout went away.
        """
        if not message:
            return
        stream = cast("TextIO", file if file is not None else sys.stderr)  # argparse passes sys.stdout or sys.stderr
        try:
            self.write_message(stream, message)
        except BrokenPipeError:
            if stream is not sys.stderr:
                raise
            stream_gone(stream)  # `--tols 2>&1 | true`: the usage error keeps its status

    def write_message(self, stream: TextIO, message: str) -> None:
        """Write and flush one message; a reader that went away raises `BrokenPipeError`.

        A CLI with its own writer (one that escapes what the stream cannot encode, say) replaces this.
        """
        stream.write(message)
        stream.flush()

    def error(self, message: str) -> NoReturn:
        """Exit 2 with argparse's usage error, naming the nearest options when one was mistyped ("did you mean")."""
        unknown = re.match(r"unrecognized arguments: (--[^\s=]+)", message)
        known = [option for action in self._actions for option in action.option_strings]
        super().error(message + (did_you_mean(unknown[1], known) if unknown is not None else ""))


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`; did you mean '--tools'?` naming up to three of `known` close to a mistyped `word`; else nothing."""
    close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    return "; did you mean " + " or ".join(repr(option) for option in close) + "?" if close else ""


def stream_gone(stream: TextIO) -> None:
    """The reader of `stream` went away: point it at /dev/null.

    What Python still holds for it is then flushed there at exit instead of failing again. An error line on a
    stderr nobody reads (`2>&1 | head`) is no new failure: the command keeps the status it had.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)  # the stream's descriptor now refers to it: the spare one is not needed


def stdout_gone() -> int:
    """The reader of stdout went away: stop writing to it; return the status a process SIGPIPE killed has.

    Returns:
        `EXIT_BROKEN_PIPE` (141).
    """
    stream_gone(sys.stdout)
    return EXIT_BROKEN_PIPE


def say(stream: TextIO, text: str) -> None:
    """Write `text` to `stream` and flush; once its reader went away, nothing more goes there and the command goes on.

    For stderr: a warning or an error line nobody reads (`2>&1 | head`) is no failure of its own.
    """
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        stream_gone(stream)
