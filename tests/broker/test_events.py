"""Call events and the call context."""

from __future__ import annotations

from beam_broker import CallContext, FileProgressEvent, PreparationEvent


def test_file_progress_events_say_when_elaboration_is_done() -> None:
    assert FileProgressEvent("A.lean", {"updates": 2, "done": True}).done
    assert not FileProgressEvent("A.lean", {"updates": 1}).done


def test_a_default_context_discards_events() -> None:
    ctx = CallContext()
    ctx.emit(PreparationEvent("lean_sync on A.lean: preparing the Lean workspace"))
    assert ctx.request_id is None
