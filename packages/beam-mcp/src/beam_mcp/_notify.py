"""Request-scoped notifications of one tool call: progress, the `beam.status` notice, `lean.diagnostic` logs.

This module owns the projection of broker events onto the MCP stream and its rules: one contextual
preparation update, throttled Lake-setup and file-progress updates, at most one terminal `done=true`,
strictly increasing progress values, at most one no-token liveness notice, log-level gating, and nothing
after the call's final response (`close()`). It must not decide what a broker event means for Lean; the
broker already scoped and deduplicated diagnostics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from beam_broker.events import DiagnosticEvent, FileProgressEvent, PreparationEvent, Progress, SetupEvent

from . import _jsonrpc
from ._jsonrpc import RequestId
from ._protocol import admits

PROGRESS_HINT: Final = "For detailed live updates, pass tools/call params._meta.progressToken."
STATUS_LOGGER: Final = "beam.status"
DIAGNOSTIC_LOGGER: Final = "lean.diagnostic"
FILE_PROGRESS_STEP: Final = 25
"""A non-terminal file-progress update is sent once Lean reported this many more updates."""
SETUP_EVERY: Final = 10
"""Lake setup lines: the first one, then every tenth, become progress updates."""
MAX_SETUP_LINE: Final = 200

# Lean diagnostic severity -> MCP log level.
_SEVERITY_LEVEL: Final = {
    "error": "error",
    "warning": "warning",
    "information": "info",
    "hint": "debug",
    "unknown": "info",
}


def file_progress_message(tool: str, path: str | None, progress: dict[str, Any]) -> str:
    """`<tool>: processing|processed <path> (range=S..E updates=N done=false|true)`."""
    done = bool(progress.get("done"))
    start, end = progress.get("range_start_line"), progress.get("range_end_line")
    if start is not None and end is not None:
        where = f"range={start}..{end} "
    elif start is not None:
        where = f"rangeStartLine={start} "
    elif end is not None:
        where = f"rangeEndLine={end} "
    else:
        where = ""
    verb = "processed" if done else "processing"
    updates = progress.get("updates", 0)
    return f"{tool}: {verb} {path or 'the Lean file'} ({where}updates={updates} done={str(done).lower()})"


def setup_message(tool: str, path: str | None, line: str) -> str:
    """`<tool> on <path>: preparing Lean dependencies — <trimmed Lake line>`."""
    text = " ".join(line.split())
    if len(text) > MAX_SETUP_LINE:
        text = text[: MAX_SETUP_LINE - 1] + "…"
    where = f" on {path}" if path else ""
    return f"{tool}{where}: preparing Lean dependencies — {text}"


class CallNotifier:
    """Turns one call's events into notifications, enforcing the per-request rules.

    Args:
        send: Enqueues one encoded notification on the stream (synchronous, in order).
        tool: The tool name.
        request_id: The call's JSON-RPC id (echoed in `beam.status`).
        token: `_meta.progressToken`, or None.
        path: The call's `path` argument, if any.
        kinds: Which progress the tool reports (its registry entry's `progress`).
        log_level: The active minimum log level at emit time (None: no logs).
        status: Whether the tool may emit a `beam.status` notice.
    """

    def __init__(
        self,
        *,
        send: Callable[[bytes], None],
        tool: str,
        request_id: RequestId,
        token: Any,
        path: str | None,
        kinds: Progress,
        log_level: Callable[[], str | None],
        status: bool,
    ) -> None:
        self._send = send
        self.tool = tool
        self.request_id = request_id
        self.token = token
        self.path = path
        self.kinds = kinds
        self._log_level = log_level
        self.status_enabled = status and token is None
        self._closed = False
        self._progress = 0
        self._prepared = False
        self._setup_seen = 0
        self._last_file: dict[str, Any] | None = None
        self._status_sent = False

    # -- progress
    def _progress_update(self, message: str) -> None:
        if self._closed or self.token is None:
            return
        self._progress += 1
        params = {"progressToken": self.token, "progress": self._progress, "message": message}
        self._send(_jsonrpc.notification("notifications/progress", params))

    def preparation(self, message: str) -> None:
        """The one contextual preparation update (later ones are dropped)."""
        if self._prepared or Progress.PREPARATION not in self.kinds:
            return
        self._prepared = True
        self._progress_update(message)

    def setup(self, line: str, path: str | None = None) -> None:
        """A Lake setup line: throttled progress with a token, else the first one triggers the status notice."""
        if Progress.SETUP not in self.kinds:
            return
        self._setup_seen += 1
        message = setup_message(self.tool, path or self.path, line)
        if self.token is not None:
            if self._setup_seen == 1 or self._setup_seen % SETUP_EVERY == 0:
                self._progress_update(message)
        else:
            self.status("preparing_dependencies", message)

    def file_progress(self, progress: dict[str, Any], path: str | None = None) -> None:
        """Lean file progress: the first observation, then every 25 updates or the terminal one, once."""
        if Progress.FILE not in self.kinds or self.token is None:
            return
        last = self._last_file
        if last is not None:
            if last.get("done"):
                return
            if not progress.get("done") and progress.get("updates", 0) < last.get("updates", 0) + FILE_PROGRESS_STEP:
                return
        self._last_file = dict(progress)
        self._progress_update(file_progress_message(self.tool, path or self.path, progress))

    # -- logs
    def _log(self, level: str, logger: str, data: Any) -> None:
        if self._closed or not admits(self._log_level(), level):
            return
        params = {"level": level, "logger": logger, "data": data}
        self._send(_jsonrpc.notification("notifications/message", params))

    def status(self, state: str = "running", message: str | None = None) -> None:
        """The at-most-one `beam.status` liveness notice (only without a progress token)."""
        if not self.status_enabled or self._status_sent or self._closed:
            return
        if not admits(self._log_level(), "notice"):
            return
        self._status_sent = True
        where = f" on {self.path}" if self.path else ""
        data: dict[str, Any] = {
            "requestId": self.request_id.value,
            "tool": self.tool,
            "state": state,
            "message": message or f"{self.tool}{where} is still working.",
        }
        if self.path is not None:
            data["path"] = self.path
        data["progressHint"] = PROGRESS_HINT
        self._log("notice", STATUS_LOGGER, data)

    def diagnostic(self, item: dict[str, Any]) -> None:
        """One streamed Lean diagnostic as a `lean.diagnostic` log event (never `save_blocking`)."""
        level = _SEVERITY_LEVEL.get(str(item.get("severity")), "info")
        self._log(level, DIAGNOSTIC_LOGGER, {k: v for k, v in item.items() if k != "save_blocking"})

    # -- broker events
    def on_event(self, event: object) -> None:
        """Dispatch one `beam_broker.events` object (unknown kinds are ignored)."""
        if isinstance(event, PreparationEvent):
            self.preparation(event.message)
        elif isinstance(event, SetupEvent):
            self.setup(event.message, event.path)
        elif isinstance(event, FileProgressEvent):
            self.file_progress(event.progress, event.path)
        elif isinstance(event, DiagnosticEvent):
            self.diagnostic(event.item)

    def close(self) -> None:
        """The final response is next: nothing more is sent for this request."""
        self._closed = True
