"""Document state beside Lean's mirror: versions, held texts, recency and the open-document bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from beam_broker import errors as codes
from beam_broker._documents import UNKNOWN_STATE, ClosedStates, DocState, Documents, check_pin, text_hash
from beam_broker._verdict import ProgressTracker
from beam_broker.errors import BrokerError
from beam_broker.models import PinnedInput

pytestmark = pytest.mark.anyio


def test_a_new_version_forgets_the_goal_modes_of_the_old_one() -> None:
    doc = DocState(Path("/w/A.lean"), "file:///w/A.lean", "A", "", 1)
    doc.goal_modes[(0, 0)] = True
    doc.changed(2, "def x := 1\n", "s/2")
    assert doc.goal_modes == {} and doc.version == 2
    doc.goal_modes[(1, 0)] = False
    doc.opened(1, "def x := 1\n", "s/1")
    assert doc.goal_modes == {}


def documents(root: Path) -> Documents:
    return Documents(str(root), lambda path: path.relative_to(root).as_posix())


def test_held_texts_are_the_open_modules_and_a_sync_or_save_is_recorded_on_the_document(tmp_path: Path) -> None:
    docs = documents(tmp_path)
    basic = docs.track(tmp_path / "Demo/Basic.lean", "def one := 1\n")
    outside = docs.track(tmp_path.parent / "Outside.lean", "def q := 1\n")
    basic.opened(1, "def one := 1\n", "s/1")
    outside.opened(1, "def q := 1\n", "s/1")
    assert docs.held() == {"Demo.Basic": text_hash("def one := 1\n")}  # a file outside the root is no module
    basic.changed(2, "def one := 2\n", "s/2")
    assert docs.held() == {"Demo.Basic": text_hash("def one := 2\n")}
    assert (basic.synced_version, basic.checkpointed_version) == (None, None)
    docs.record_sync(basic, ProgressTracker(done=True))
    docs.record_save(basic)
    assert (basic.synced_version, basic.checkpointed_version, basic.progress.done) == (2, 2, True)


def test_documents_outside_the_root_have_no_module_and_closing_forgets_them(tmp_path: Path) -> None:
    docs = documents(tmp_path / "root")
    outside = docs.track(tmp_path / "Outside.lean", "")
    assert outside.module is None and docs.is_current(outside)
    docs.record_sync(outside, ProgressTracker())
    docs.record_save(outside)
    assert docs.pop(tmp_path / "Outside.lean") is outside and not docs.is_current(outside)
    assert docs.pop(tmp_path / "Outside.lean") is None


def test_the_open_document_bound_closes_the_least_recently_used_idle_documents(tmp_path: Path) -> None:
    docs = documents(tmp_path)
    a, b, c, d = (docs.track(tmp_path / f"{n}.lean", "") for n in "ABCD")
    assert docs.beyond(4, keep=d) == [] and docs.beyond(2, keep=d) == [a, b]
    docs.track(tmp_path / "A.lean", "")  # used again: now the most recent
    assert docs.beyond(2, keep=d) == [b, c]
    b.users = 1  # a call in flight holds it
    assert docs.beyond(2, keep=d) == [c, a]
    assert docs.beyond(0, keep=d) == [c, a]  # held and kept documents stay even beyond the bound


def test_closed_states_are_kept_per_root_and_once_one_was_forgotten_an_unknown_open_is_refused_not_trusted() -> None:
    """The bound on kept states must not turn a reopen into a first open: a forgotten state reads `UNKNOWN_STATE`,
    which no version names (trusting it answered a version 1 of the old text against the new one)."""
    closed = ClosedStates(limit=2)
    one, two = Documents("/w", str, closed=closed), Documents("/v", str, closed=closed)
    for docs, name in ((one, "/w/A.lean"), (two, "/w/A.lean"), (one, "/w/B.lean")):
        doc = docs.track(Path(name), "x\n")
        doc.opened(1, "x\n", "s/1")
        docs.evict(Path(name))
    assert one.reopening(Path("/w/B.lean")) == (1, text_hash("x\n"))
    assert two.reopening(Path("/w/A.lean")) == (1, text_hash("x\n"))  # a root of its own: kept apart
    assert one.reopening(Path("/w/A.lean")) == UNKNOWN_STATE  # the oldest, forgotten for the bound
    doc = one.track(Path("/w/A.lean"), "x\n")
    doc.opened(1, "x\n", "s/2")
    doc.reopened_over = UNKNOWN_STATE
    pin = PinnedInput.model_validate({"path": "A.lean", "version": 1})
    with pytest.raises(BrokerError) as info:
        check_pin(doc, pin, reopened=True)
    assert info.value.code == codes.CONTENT_MODIFIED and info.value.data is not None
    assert info.value.data["reason"] == "documentVersionMismatch"
    assert "not kept" in info.value.message
    check_pin(doc, pin)  # the next call finds it open: its version 1 is the one the refusal named
    assert ClosedStates().take("/w", "/w/A.lean") is None  # nothing forgotten: a first open
