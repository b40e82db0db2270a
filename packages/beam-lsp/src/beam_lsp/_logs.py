"""The server's log records: `window/logMessage` and `window/showMessage` entries, and the ring that keeps them.

Owns the entry type and the bounded FIFO ring; the diagnostics cache keeps one ring of each kind and redacts
what goes in. It never talks to Lean and knows nothing about documents.
"""

from __future__ import annotations

import collections
import dataclasses

__all__ = ["LogBuffer", "LogEntry"]


@dataclasses.dataclass(frozen=True)
class LogEntry:
    """One `window/logMessage` or `window/showMessage` notification, redacted."""

    type: int
    message: str
    time: float


class LogBuffer:
    """A FIFO ring of the most recent log entries."""

    def __init__(self, capacity: int) -> None:
        """Keep at most `capacity` entries."""
        self._ring: collections.deque[LogEntry] = collections.deque(maxlen=capacity)
        self.dropped: int = 0

    def append(self, entry: LogEntry) -> None:
        """Add an entry, forgetting the oldest when full."""
        if len(self._ring) == self._ring.maxlen:
            self.dropped += 1
        self._ring.append(entry)

    def entries(self) -> list[LogEntry]:
        """Oldest first."""
        return list(self._ring)
