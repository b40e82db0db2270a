"""A command line whose stdout reader went away (`lean-beam --help | head -1`): exit 141 quietly, as SIGPIPE would.

Python ignores SIGPIPE, so a write to a pipe whose reader exited raises `BrokenPipeError`; argparse's own printing
swallows it (the command then exited 0), and an uncaught one ends in a traceback. The rule shared by `lean-beam`
and `lean-beam-mcp` (which imports it from this room: it depends on beam-broker): the parser lets the error through
(`PipeParser`), and `main` catches it and returns `stdout_gone()`. Only the standard library is loaded here, so a CLI
pays nothing for it before its first command. beam-feedback may import beam_lsp only, so it keeps a copy of its own
until this rule moves there.
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

__all__ = ["EXIT_BROKEN_PIPE", "PipeParser", "stream_gone", "stdout_gone"]

EXIT_BROKEN_PIPE: Final = 141
"""stdout was closed early (`... | head -1`): the status of a process killed by SIGPIPE (128 + 13)."""


class PipeParser(argparse.ArgumentParser):
    """An argparse parser whose `--help`, `--version` and usage text let a reader that went away raise."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """Write `--help`, `--version` and usage text, letting a reader that went away raise `BrokenPipeError`.

        argparse's own swallows the error, so `--help | head -1` exited 0; `main` exits 141 instead.
        """
        if message:  # argparse passes sys.stdout or sys.stderr (or nothing)
            self.write_message(cast("TextIO", file if file is not None else sys.stderr), message)

    def write_message(self, stream: TextIO, message: str) -> None:
        """Write and flush one message; a reader that went away raises `BrokenPipeError`.

        A CLI with its own writer (one that escapes what the stream cannot encode, say) replaces this.
        """
        stream.write(message)
        stream.flush()

    def error(self, message: str) -> NoReturn:
        """Exit 2 with argparse's usage error, naming the nearest options when one was mistyped ("did you mean")."""
        super().error(message + suggest_option(message, self._actions))


def suggest_option(message: str, actions: Sequence[argparse.Action]) -> str:
    """`; did you mean '--tools'?` for argparse's "unrecognized arguments: --tols ...", else nothing."""
    unknown = re.match(r"unrecognized arguments: (--[^\s=]+)", message)
    if unknown is None:
        return ""
    known = [option for action in actions for option in action.option_strings]
    close = difflib.get_close_matches(unknown[1], known, n=3, cutoff=0.6)
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
