"""Proof handles: the per-session store and the opaque objects clients pass back (no Lean)."""

from __future__ import annotations

import pytest

from beam_broker import BrokerError
from beam_broker import _handles as handles
from beam_broker import _probe_text as probe
from beam_broker import errors as codes
from beam_lsp import Position, TextDocument

BASIS = probe.command_basis(TextDocument("file:///x/A.lean", "def a := 1\n", 1), Position(line=0, character=0))


def test_handles_are_per_document_and_die_with_edits() -> None:
    store = handles.HandleStore()
    raw = store.mint("tok", "file:///x/A.lean", 1, BASIS, ("def a := 1",))
    assert store.get(raw, "file:///x/A.lean").texts == ("def a := 1",)
    with pytest.raises(BrokerError) as other:
        store.get(raw, "file:///x/B.lean")
    assert other.value.code == codes.INVALID_PARAMS
    store.invalidate_document("file:///x/A.lean", keep_version=2)
    with pytest.raises(BrokerError) as stale:
        store.get(raw, "file:///x/A.lean")
    assert stale.value.code == codes.CONTENT_MODIFIED
    with pytest.raises(BrokerError) as unknown:
        store.get("runAt:nope", "file:///x/A.lean")
    assert unknown.value.code == codes.INVALID_PARAMS and "unknown handle" in unknown.value.message


@pytest.mark.parametrize(
    "handle",
    [
        None,
        {},
        {"workspaceId": "w", "backend": "lean", "epoch": "1", "session": "s", "raw": {"value": "r"}},
        {"workspaceId": "w", "backend": "rocq", "epoch": 1, "session": "s", "raw": {"value": "r"}},
        {"workspaceId": "w", "backend": "lean", "epoch": 1, "session": "s", "raw": "r"},
    ],
)
def test_malformed_handles_are_invalid_params(handle: object) -> None:
    with pytest.raises(BrokerError, match="malformed handle") as info:
        handles.unwrap(handle)  # type: ignore[arg-type]
    assert info.value.code == codes.INVALID_PARAMS


def test_wrap_and_unwrap_round_trip() -> None:
    wrapped = handles.wrap("local:/r", 3, "123-456", "runAt:x")
    assert handles.unwrap(wrapped) == ("local:/r", 3, "123-456", "runAt:x")


def test_taking_a_handle_forgets_it_and_clearing_forgets_everything() -> None:
    store = handles.HandleStore()
    a = store.mint("tok", "file:///x/A.lean", 1, BASIS, ("x",))
    b = store.mint("tok", "file:///x/A.lean", 1, BASIS, ("y",))
    assert a != b and len(store) == 2
    store.take(a)
    with pytest.raises(BrokerError) as info:
        store.get(a, "file:///x/A.lean")
    assert info.value.code == codes.INVALID_PARAMS
    store.invalidate_document("file:///x/A.lean")
    store.clear()
    assert len(store) == 0
    with pytest.raises(BrokerError) as stale_forgotten:
        store.get(b, "file:///x/A.lean")
    assert stale_forgotten.value.code == codes.INVALID_PARAMS  # after a restart a stale handle is just unknown
