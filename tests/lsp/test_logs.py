"""beam_lsp._logs: the bounded rings of the server's log records."""

from __future__ import annotations

from beam_lsp._logs import LogBuffer, LogEntry


def test_a_log_buffer_keeps_its_capacity_and_counts_what_it_dropped() -> None:
    ring = LogBuffer(2)
    for i in range(3):
        ring.append(LogEntry(3, str(i), 0.0))
    assert [e.message for e in ring.entries()] == ["1", "2"] and ring.dropped == 1
