"""What `lean-beam` shows while a call runs: one live line on a terminal, plain lines elsewhere, or nothing.

Owns `Terminal` (stdout and stderr, and the one live status line on stderr that is cleared before anything else
is written, so results and diagnostics never mix with it) and `Reporter`, the sink of a call's broker events:

- progress (preparation, Lake setup, file progress): on a terminal one line `beam: FILE: 3/9 lines, 1.2 s`,
  replaced in place and cleared at the end; when stderr is not a terminal the plain lines of
  `render.progress_line`; with `--quiet` nothing. The live line appears once the call has run for
  `TICK_SECONDS` (a warm call answers before that, and nothing flashes); from then on it says what runs, from
  the first moment of a cold start (`beam: sync A.lean, 0.3 s`). It never names MCP tools.
- diagnostics: in human output they are the result, so they go to stdout (as Lean prints them) even with
  `--quiet`; with JSON output they are plain lines on stderr unless `--quiet`.

It prints no results and decides no exit status.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TextIO

from beam_broker.events import BrokerEvent, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent

from .render import Sources, diagnostic_key, diagnostic_line, preparation_text, progress_line, write_text

TICK_SECONDS: Final = 0.25
"""How often the live line's elapsed time is redrawn while nothing else happens."""
_CLEAR: Final = "\r\x1b[K"


class Mode(enum.Enum):
    """How progress is shown."""

    LIVE = "live"
    LINES = "lines"
    OFF = "off"


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal that understands carriage return and erase-line (not TERM=dumb)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def progress_mode(stderr: TextIO, *, quiet: bool) -> Mode:
    """LIVE on a terminal, LINES elsewhere, OFF with `--quiet`."""
    if quiet:
        return Mode.OFF
    return Mode.LIVE if is_terminal(stderr) else Mode.LINES


class Terminal:
    """stdout, stderr and the live line; every write clears the live line first and redraws it after."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self._status = ""
        self._shown = False

    def width(self) -> int:
        """Columns available for the live line (it must never wrap, or a carriage return cannot replace it)."""
        try:
            return max(20, os.get_terminal_size(self.err.fileno()).columns)
        except (AttributeError, ValueError, OSError):
            return 80

    def status(self, text: str) -> None:
        """Show `text` as the live line (cut to the terminal's width)."""
        self._status = text
        self._draw()

    def _draw(self) -> None:
        if self._status:
            write_text(self.err, _CLEAR + self._status[: self.width() - 1])
            self._shown = True

    def clear(self) -> None:
        """Remove the live line for good (before the result is printed)."""
        self._status = ""
        self._hide()

    def _hide(self) -> None:
        if self._shown:
            write_text(self.err, _CLEAR)
            self._shown = False

    def print_out(self, text: str) -> None:
        """A line on stdout."""
        self._hide()
        write_text(self.out, text + "\n")
        self._draw()

    def print_err(self, text: str) -> None:
        """A line on stderr."""
        self._hide()
        write_text(self.err, text + "\n")
        self._draw()


class Reporter:
    """The event sink of one `lean-beam` call (see the module docstring)."""

    def __init__(
        self,
        terminal: Terminal,
        *,
        mode: Mode,
        human: bool,
        sources: Sources | None = None,
        clock: Callable[[], float] = time.monotonic,
        starting: str = "",
    ) -> None:
        """Start showing a call.

        Args:
            terminal: Where everything goes.
            mode: How progress is shown.
            human: Diagnostics are the result (stdout), not progress (stderr).
            sources: The project's files (positions as Lean prints them, line counts).
            clock: Seconds, monotonic.
            starting: The live line until the first event (`sync Demo/A.lean`).
        """
        self.terminal = terminal
        self.mode = mode
        self.human = human
        self.sources = sources
        self.clock = clock
        self.started = clock()
        self.printed: set[str] = set()
        """Keys (`render.diagnostic_key`) of the diagnostics already printed (stdout, or stderr for JSON)."""
        self._last_line: str | None = None
        self._status = starting
        self._hold: str | None = None
        self._held: list[Mapping[str, Any]] = []

    def __call__(self, event: BrokerEvent) -> None:
        """Show one event."""
        if isinstance(event, DiagnosticEvent):
            self.diagnostic(event.item)
        elif self.mode is Mode.LINES:
            line = progress_line(event)
            if line is not None and line != self._last_line:
                self._last_line = line
                self.terminal.print_err(line)
        elif self.mode is Mode.LIVE:
            status = self._live_status(event)
            if status is not None:
                self._status = status
                self.redraw()

    def hold(self, path: str) -> None:
        """Keep the diagnostics of `path` back until `release` (or for good).

        A sync with `--rebuild-imports` first checks the file against its stale imports: what Lean says then
        (`object file ... does not exist`) is not about the file as it is once the imports are saved, and must not
        be printed as if it were. Whether it was can only be known from the answer.
        """
        self._hold = path

    def release(self, *, current: bool) -> None:
        """Hold no more: print the diagnostics held back by `hold` if they are `current`, else drop them."""
        held, self._held, self._hold = self._held, [], None
        for item in held if current else ():
            self.diagnostic(item)

    def diagnostic(self, item: Mapping[str, Any]) -> None:
        """Print a diagnostic once: stdout in human output, else stderr unless quiet."""
        if self._hold is not None and item.get("path") == self._hold:
            self._held.append(item)
        elif self.human:
            key = diagnostic_key(item)
            if key not in self.printed:
                self.printed.add(key)
                self.terminal.print_out(diagnostic_line(item, self.sources))
        elif self.mode is not Mode.OFF:
            self.printed.add(diagnostic_key(item))
            self.terminal.print_err(diagnostic_line(item, self.sources))

    def _live_status(self, event: BrokerEvent) -> str | None:
        if isinstance(event, PreparationEvent):
            return preparation_text(event)
        if isinstance(event, SetupEvent):
            return f"setup: {event.message}"
        if isinstance(event, FileProgressEvent):
            total = self._total_lines(event)
            if event.done:
                return f"{event.path}: {total}/{total} lines" if total else f"{event.path}: elaborated"
            start = event.progress.get("range_start_line")
            if not isinstance(start, int):
                return None
            return f"{event.path}: {max(0, start - 1)}/{total} lines" if total else f"{event.path}: line {start}"
        return None

    def _total_lines(self, event: FileProgressEvent) -> int:
        source = self.sources.get(event.path) if self.sources is not None else None
        if source is not None:
            lines = len(source.lines)
            return lines - 1 if lines > 1 and source.lines[-1] == "" else lines
        end = event.progress.get("range_end_line")
        return end if isinstance(end, int) else 0

    def redraw(self) -> None:
        """Redraw the live line with the current elapsed time (once the call has run for `TICK_SECONDS`)."""
        elapsed = self.clock() - self.started
        if self.mode is Mode.LIVE and self._status and elapsed >= TICK_SECONDS:
            self.terminal.status(f"beam: {self._status}, {elapsed:.1f} s")

    async def tick(self) -> None:
        """Keep the elapsed time of the live line moving while Lean is silent (runs until cancelled)."""
        import anyio

        while self.mode is Mode.LIVE:
            await anyio.sleep(TICK_SECONDS)
            self.redraw()

    def close(self) -> None:
        """The call is over: clear the live line."""
        self.terminal.clear()
