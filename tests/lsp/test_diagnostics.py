"""beam_lsp.diagnostics: availability, spellings, bounds, eviction, restart, logs, redaction, and the per-URI
progress the sync barrier reads (document lifetimes, pinning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beam_lsp import Availability, DiagnosticsCache, Elaboration, LeanFileProgressParams, Redactor
from beam_lsp import diagnostics as dmod
from beam_lsp.diagnostics import DocumentProgress
from beam_lsp.documents import path_to_uri


def diag(line: int, message: str, severity: int = 1, **extra: Any) -> dict[str, Any]:
    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 5}}
    return {"range": rng, "fullRange": rng, "severity": severity, "message": message, "source": "Lean 4", **extra}


def test_a_file_nothing_was_published_for_is_pending_and_untracked(tmp_path: Path) -> None:
    snap = DiagnosticsCache().get(str(tmp_path / "A.lean"))
    assert snap.availability is Availability.PENDING
    assert snap.tracked is False and snap.diagnostics == ()


def test_an_empty_publish_reads_as_published_clean(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 3, [])
    snap = cache.get(uri)
    assert snap.availability is Availability.PUBLISHED and snap.version == 3 and snap.diagnostics == ()


def test_lean_fields_survive_the_round_trip(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(2, "unsolved goals\n⊢ p", leanTags=[1], isSilent=False, futureField={"x": 1})])
    snapshot: Any = cache.get(uri).wire()
    wire = snapshot["diagnostics"][0]
    assert wire["leanTags"] == [1] and wire["fullRange"]["start"]["line"] == 2 and wire["futureField"] == {"x": 1}


def test_symlink_spellings_share_one_entry_and_return_the_union_without_duplicates(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "A.lean").write_text("")
    (tmp_path / "alias").symlink_to(real)
    cache = DiagnosticsCache()
    a = path_to_uri(real / "A.lean")
    b = path_to_uri(tmp_path / "alias" / "A.lean")
    cache.publish(a, 1, [diag(1, "one"), diag(3, "shared")])
    cache.publish(b, 1, [diag(3, "shared"), diag(0, "zero")])
    snap = cache.get(str(tmp_path / "alias" / "A.lean"))
    assert snap.path == str(real / "A.lean")
    assert [d.message for d in snap.diagnostics] == ["zero", "one", "shared"]
    assert len(cache) == 1


def test_a_new_publish_replaces_the_previous_one_for_the_same_spelling(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(1, "old")])
    cache.publish(uri, 2, [])
    snap = cache.get(uri)
    assert snap.version == 2 and snap.diagnostics == ()


def test_eviction_prefers_clean_files_and_reports_evicted_not_clean(tmp_path: Path) -> None:
    cache = DiagnosticsCache(max_files=3)
    uris = [path_to_uri(tmp_path / f"F{i}.lean") for i in range(4)]
    changed: list[str] = []
    cache.add_listener(changed.append)
    cache.publish(uris[0], 1, [diag(0, "err")])
    cache.publish(uris[1], 1, [])  # clean: first to go
    cache.publish(uris[2], 1, [diag(0, "err")])
    cache.publish(uris[3], 1, [diag(0, "err")])
    assert cache.get(uris[1]).availability is Availability.EVICTED
    assert cache.get(uris[1]).tracked is True
    assert cache.get(uris[0]).availability is Availability.PUBLISHED
    assert str(tmp_path / "F1.lean") in changed
    assert len(cache) == 3


def test_the_cache_holds_at_most_1000_files(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    for i in range(1005):
        cache.publish(path_to_uri(tmp_path / f"F{i}.lean"), 1, [diag(0, "e")])
    assert len(cache) == dmod.MAX_FILES
    assert cache.get(path_to_uri(tmp_path / "F0.lean")).availability is Availability.EVICTED
    assert cache.get(path_to_uri(tmp_path / "F1004.lean")).availability is Availability.PUBLISHED


def test_a_server_restart_returns_every_file_to_pending_and_tells_listeners(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(0, "e")])
    seen: list[str] = []
    cache.add_listener(seen.append)
    epoch = cache.epoch
    cleared = cache.server_restarted()
    assert cleared == [str(tmp_path / "A.lean")] == seen
    assert cache.get(uri).availability is Availability.PENDING
    assert cache.epoch == epoch + 1


def test_file_progress_gives_the_elaboration_state(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}}

    def progress(version: int, processing: list[dict[str, Any]]) -> None:
        cache.progress(
            LeanFileProgressParams.from_json(
                {"textDocument": {"uri": uri, "version": version}, "processing": processing}
            )
        )

    progress(1, [{"range": rng, "kind": 1}])
    assert cache.get(uri).elaboration is Elaboration.PROCESSING
    assert cache.get(uri).availability is Availability.PENDING  # progress alone publishes nothing
    progress(1, [])
    assert cache.get(uri).elaboration is Elaboration.COMPLETE
    progress(2, [{"range": rng, "kind": 2}])
    assert cache.get(uri).elaboration is Elaboration.FAILED
    progress(1, [])  # an older version never overrides a newer one
    assert cache.get(uri).elaboration is Elaboration.FAILED


def test_diagnostic_text_is_redacted_but_uris_and_data_keys_are_kept(tmp_path: Path) -> None:
    cache = DiagnosticsCache(Redactor({"LAKE_TOKEN": "tok-123456789"}))
    uri = path_to_uri(tmp_path / "A.lean")
    related = [
        {
            "location": {"uri": "file:///tok-123456789.lean", "range": diag(0, "")["range"]},
            "message": "see tok-123456789",
        }
    ]
    cache.publish(
        uri,
        1,
        [
            diag(
                0,
                "bad tok-123456789",
                code="tok-123456789",
                relatedInformation=related,
                data={"tok-123456789": "tok-123456789"},
            )
        ],
    )
    snapshot: Any = cache.get(uri).wire()
    wire = snapshot["diagnostics"][0]
    assert wire["message"] == "bad [redacted:LAKE_TOKEN]"
    assert wire["code"] == "[redacted:LAKE_TOKEN]"
    assert wire["relatedInformation"][0]["message"] == "see [redacted:LAKE_TOKEN]"
    assert wire["relatedInformation"][0]["location"]["uri"] == "file:///tok-123456789.lean"
    assert wire["data"] == {"tok-123456789": "[redacted:LAKE_TOKEN]"}


def test_huge_messages_are_truncated_and_huge_files_keep_the_most_severe_first(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(0, "x" * (dmod.MAX_MESSAGE_BYTES + 100))])
    msg = cache.get(uri).diagnostics[0].message
    assert len(msg.encode()) <= dmod.MAX_MESSAGE_BYTES and msg.endswith("over 256 KiB]")
    big = "y" * 200_000
    items = [diag(i, big, severity=3) for i in range(5)] + [diag(10 + i, big, severity=1) for i in range(5)]
    cache.publish(uri, 2, items)
    snap = cache.get(uri)
    assert snap.truncated > 0
    assert all(d.severity == 1 for d in snap.diagnostics)
    assert len(snap.diagnostics) == 10 - snap.truncated


def test_log_buffers_keep_the_newest_100_logs_and_50_messages_redacted() -> None:
    cache = DiagnosticsCache(Redactor({"A_SECRET": "hunter2hunter2"}))
    for i in range(120):
        cache.log("log", 3, f"log {i} hunter2hunter2")
    for i in range(60):
        cache.log("show", 1, f"msg {i}")
    logs = cache.logs.entries()
    assert len(logs) == 100 and logs[0].message.startswith("log 20 ") and cache.logs.dropped == 20
    assert logs[-1].message == "log 119 [redacted:A_SECRET]"
    assert len(cache.messages.entries()) == 50


def _params(uri: str, version: int | None, *kinds: int) -> dict[str, Any]:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
    processing = [{"range": rng, "kind": kind} for kind in kinds]
    return {"textDocument": {"uri": uri, "version": version}, "processing": processing}


def _progress(cache: DiagnosticsCache, uri: str, version: int | None, *kinds: int) -> None:
    cache.progress(LeanFileProgressParams.from_json(_params(uri, version, *kinds)))


def test_document_progress_is_what_lean_said_about_that_uri(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    assert cache.document_progress(uri) == DocumentProgress()
    _progress(cache, uri, 2, 1)
    assert cache.document_progress(uri).elaboration is Elaboration.PROCESSING
    cache.publish(uri, 2, [diag(0, "e")])
    _progress(cache, uri, 2)
    report = cache.document_progress(uri)
    assert (report.progress_version, report.done, report.fatal, report.diagnostics_version) == (2, True, False, 2)
    assert report.processing == () and report.elaboration is Elaboration.COMPLETE


def test_an_older_publish_of_the_same_uri_never_replaces_a_newer_one(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 3, [diag(0, "v3")])
    cache.publish(uri, 2, [diag(0, "v2")])
    assert [d.message for d in cache.get(uri).diagnostics] == ["v3"]
    assert cache.document_progress(uri).diagnostics_version == 3


def test_reopening_a_document_starts_a_new_lifetime_where_versions_restart(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    cache.publish(uri, 3, [diag(0, "old")])
    _progress(cache, uri, 3)
    changed: list[str] = []
    cache.add_listener(changed.append)
    cache.document_closed(uri)
    cache.document_opened(uri)
    assert cache.document_progress(uri) == DocumentProgress() and changed == [str(tmp_path / "A.lean")] * 2
    snap = cache.get(uri)  # fresh: what the closed lifetime said is not about the reopened text
    assert (snap.availability, snap.tracked, snap.open, snap.diagnostics) == (Availability.PENDING, True, True, ())
    _progress(cache, uri, 1, 1)
    cache.publish(uri, 1, [diag(0, "new")])
    assert cache.document_progress(uri).progress_version == 1
    assert [d.message for d in cache.get(uri).diagnostics] == ["new"]


# ---- closed documents: never a false clean ------------------------------------------------------------------
def test_a_closed_document_keeps_what_lean_said_while_it_was_open(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    cache.publish(uri, 2, [diag(0, "unknown identifier")])
    _progress(cache, uri, 2)
    assert cache.get(uri).open is True
    cache.document_closed(uri, server_clears=True)
    assert cache.publish(uri, 2, []) is False  # Lean clears the editor's view on didClose: not a clean bill
    assert cache.publish(uri, 3, [diag(1, "later")]) is False  # and nothing it says about a closed URI counts
    assert cache.progress(LeanFileProgressParams.from_json(_params(uri, 3, 1))) is False
    snap = cache.get(uri)
    assert (snap.availability, snap.version, snap.elaboration, snap.open) == (
        Availability.PUBLISHED,
        2,
        Elaboration.COMPLETE,
        False,
    )
    assert [d.message for d in snap.diagnostics] == ["unknown identifier"]
    wire: Any = snap.wire()
    assert (wire["availability"], wire["open"], len(wire["diagnostics"])) == ("published", False, 1)


def test_a_document_closed_before_any_publish_stays_pending(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    _progress(cache, uri, 1, 1)
    cache.document_closed(uri, server_clears=True)
    cache.publish(uri, 1, [])
    snap = cache.get(uri)
    assert (snap.availability, snap.elaboration, snap.open) == (Availability.PENDING, Elaboration.PROCESSING, False)


def test_reports_of_a_closed_lifetime_arriving_after_a_reopen_are_ignored(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    cache.publish(uri, 2, [diag(0, "v2 of the old lifetime")])
    cache.document_closed(uri, server_clears=True)
    cache.document_opened(uri)  # versions restart at 1, while Lean still owes the clearing publish of version 2
    assert cache.progress(LeanFileProgressParams.from_json(_params(uri, 2))) is False  # in flight: old
    assert cache.publish(uri, 2, [diag(0, "in flight")]) is False
    assert cache.publish(uri, 2, []) is False  # the clearing publish ends the old lifetime
    assert cache.get(uri).availability is Availability.PENDING
    assert cache.publish(uri, 1, [diag(0, "new")]) is True
    assert cache.document_progress(uri).diagnostics_version == 1
    assert [d.message for d in cache.get(uri).diagnostics] == ["new"]


def test_every_close_sent_owes_its_own_clearing_publish(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    for _ in range(2):
        cache.document_opened(uri)
        cache.document_closed(uri, server_clears=True)
    cache.document_opened(uri)
    assert cache.publish(uri, 1, []) is False
    assert cache.publish(uri, 1, []) is False
    assert cache.publish(uri, 1, []) is True


def test_closing_a_document_that_is_not_open_changes_nothing(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(0, "e")])
    changed: list[str] = []
    cache.add_listener(changed.append)
    cache.document_closed(uri, server_clears=True)
    assert changed == [] and cache.publish(uri, 2, []) is True


def test_the_remembered_closed_documents_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dmod, "MAX_REMEMBERED_CLOSED", 2)
    cache = DiagnosticsCache()
    uris = [path_to_uri(tmp_path / f"F{i}.lean") for i in range(3)]
    for uri in uris:
        cache.document_opened(uri)
        cache.document_closed(uri, server_clears=True)
    assert cache.publish(uris[0], 1, [diag(0, "e")]) is True  # forgotten: taken as it comes
    assert cache.publish(uris[2], 1, [diag(0, "e")]) is False


def test_a_restart_forgets_closed_documents_too(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    cache.document_closed(uri, server_clears=True)
    cache.server_restarted()
    assert cache.publish(uri, 1, []) is True


def test_each_uri_spelling_has_its_own_progress_and_the_snapshot_shows_the_newest(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    cache = DiagnosticsCache()
    a, b = path_to_uri(real / "A.lean"), path_to_uri(tmp_path / "alias" / "A.lean")
    _progress(cache, a, 5)
    _progress(cache, b, 1, 1)
    assert cache.document_progress(a).progress_version == 5 and cache.document_progress(b).progress_version == 1
    snap = cache.get(a)
    assert snap.elaboration is Elaboration.PROCESSING and snap.progress_version == 1
    _progress(cache, a, 4)  # older than a's own last progress: ignored, and the snapshot keeps b's
    assert cache.get(a).progress_version == 1


def test_open_documents_are_never_evicted(tmp_path: Path) -> None:
    cache = DiagnosticsCache(max_files=2)
    uris = [path_to_uri(tmp_path / f"F{i}.lean") for i in range(4)]
    for uri in uris[:2]:
        cache.document_opened(uri)
        cache.publish(uri, 1, [])
    _progress(cache, uris[0], 1)
    cache.publish(uris[2], 1, [diag(0, "e")])  # no room, and nothing may go: over the bound
    assert len(cache) == 3
    assert cache.document_progress(uris[0]).done
    cache.document_closed(uris[1])
    cache.publish(uris[3], 1, [diag(0, "e")])
    assert cache.get(uris[1]).availability is Availability.EVICTED
    assert cache.get(uris[0]).availability is Availability.PUBLISHED


def test_progress_for_a_new_file_makes_room_like_a_publish(tmp_path: Path) -> None:
    cache = DiagnosticsCache(max_files=1)
    first, second = path_to_uri(tmp_path / "A.lean"), path_to_uri(tmp_path / "B.lean")
    cache.publish(first, 1, [])
    _progress(cache, second, 1, 1)
    assert cache.get(first).availability is Availability.EVICTED
    snap = cache.get(second)
    assert snap.availability is Availability.PENDING and snap.tracked and snap.elaboration is Elaboration.PROCESSING


def test_a_restart_forgets_which_documents_are_open(tmp_path: Path) -> None:
    cache = DiagnosticsCache(max_files=1)
    first, second = path_to_uri(tmp_path / "A.lean"), path_to_uri(tmp_path / "B.lean")
    cache.document_opened(first)
    cache.publish(first, 1, [])
    cache.server_restarted()
    cache.publish(first, 1, [])
    cache.publish(second, 1, [])
    assert cache.get(first).availability is Availability.EVICTED


def test_forgetting_a_file_drops_it_without_marking_it_evicted(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "Probe.lean")
    cache.publish(uri, 1, [diag(0, "e")])
    seen: list[str] = []
    remove = cache.add_listener(seen.append)
    cache.forget(uri)
    cache.forget(uri)  # unknown now: nothing happens
    remove()
    remove()  # removing twice is harmless
    cache.publish(uri, 2, [])
    assert seen == [str(tmp_path / "Probe.lean")]
    assert cache.files() == [str(tmp_path / "Probe.lean")]


def test_the_snapshot_wire_form_has_the_mcpls_fields(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    _progress(cache, uri, 1, 2)
    assert cache.get(uri).wire() == {
        "path": str(tmp_path / "A.lean"),
        "tracked": True,
        "availability": "pending",
        "diagnostics": [],
        "open": False,
        "elaboration": "failed",
        "processing": [{"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}],
    }
    cache.publish(uri, 1, [diag(0, "e")])
    wire: Any = cache.get(uri).wire()
    assert wire["version"] == 1 and wire["availability"] == "published" and "truncated" not in wire


def test_the_total_bound_evicts_other_files_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dmod, "MAX_TOTAL_BYTES", 600)
    cache = DiagnosticsCache()
    a, b = path_to_uri(tmp_path / "A.lean"), path_to_uri(tmp_path / "B.lean")
    cache.publish(a, 1, [diag(0, "x" * 200)])
    cache.publish(b, 1, [diag(0, "y" * 200), diag(1, "z" * 200)])
    assert cache.get(a).availability is Availability.EVICTED
    assert cache.get(b).availability is Availability.PUBLISHED


def test_a_file_keeps_at_most_eight_uri_spellings(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    # `./` repeated i times: nine spellings of one canonical path
    uris = [f"file://{tmp_path}/{'./' * i}A.lean" for i in range(dmod.MAX_SPELLINGS_PER_FILE + 1)]
    for i, uri in enumerate(uris):
        cache.publish(uri, 1, [diag(i, f"from spelling {i}")])
    messages = [d.message for d in cache.get(uris[0]).diagnostics]
    assert "from spelling 0" not in messages and len(messages) == dmod.MAX_SPELLINGS_PER_FILE


def test_the_remembered_evictions_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dmod, "MAX_REMEMBERED_EVICTIONS", 2)
    cache = DiagnosticsCache(max_files=1)
    uris = [path_to_uri(tmp_path / f"F{i}.lean") for i in range(5)]
    for uri in uris:
        cache.publish(uri, 1, [])
    assert cache.get(uris[0]).availability is Availability.PENDING  # forgotten: back to unknown
    assert cache.get(uris[3]).availability is Availability.EVICTED


def test_an_incremental_publish_appends_to_the_same_version_and_says_what_it_added(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    changed: list[str] = []
    cache.add_listener(changed.append)
    cache.publish(uri, 2, [diag(1, "one")])
    assert cache.publish(uri, 2, [diag(4, "four"), diag(5, "five")], incremental=True)
    stored, added = cache.published(uri)
    assert [d.message for d in stored] == ["one", "four", "five"] and [d.message for d in added] == ["four", "five"]
    assert [d.message for d in cache.get(uri).diagnostics] == ["one", "four", "five"]
    assert len(changed) == 2
    assert cache.publish(uri, 2, [], incremental=True)  # Lean adds nothing: nothing changes, nobody is told
    assert len(changed) == 2 and cache.published(uri)[0] == stored
    cache.publish(uri, 2, [diag(0, "full")])  # a full publish replaces
    assert [d.message for d in cache.published(uri)[0]] == ["full"] == [d.message for d in cache.published(uri)[1]]
    assert cache.published(path_to_uri(tmp_path / "B.lean")) == ((), ())


def test_an_incremental_publish_for_a_version_with_nothing_stored_is_the_whole_set(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(1, "old")])
    cache.publish(uri, 2, [diag(2, "new")], incremental=True)
    snap = cache.get(uri)
    assert [d.message for d in snap.diagnostics] == ["new"] and snap.version == 2


def test_an_empty_incremental_publish_is_not_the_clearing_publish_a_close_owes(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.document_opened(uri)
    cache.publish(uri, 3, [diag(1, "kept")])
    cache.document_closed(uri, server_clears=True)
    cache.document_opened(uri)
    assert not cache.publish(uri, 3, [], incremental=True)  # still the old lifetime: ignored, owes nothing
    assert not cache.publish(uri, 3, [])  # the clearing publish Lean owed
    assert cache.publish(uri, 1, [diag(0, "fresh")])
    assert [d.message for d in cache.get(uri).diagnostics] == ["fresh"]


def test_incremental_publishes_over_the_file_bound_keep_the_most_severe(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    big = "y" * 200_000
    cache.publish(uri, 1, [diag(i, big, severity=3) for i in range(4)])
    assert cache.get(uri).truncated == 0
    cache.publish(uri, 1, [diag(10 + i, big, severity=1) for i in range(3)], incremental=True)
    first = cache.get(uri)
    assert first.truncated > 0 and sum(d.severity == 1 for d in first.diagnostics) == 3
    cache.publish(uri, 1, [diag(20, big, severity=1)], incremental=True)
    again = cache.get(uri)
    assert again.truncated > first.truncated and sum(d.severity == 1 for d in again.diagnostics) == 4


def test_an_unchanged_file_reads_the_same_merged_diagnostics_until_a_publish(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    cache.publish(uri, 1, [diag(1, "one"), diag(1, "one")])
    first = cache.get(uri).diagnostics
    assert [d.message for d in first] == ["one"] and cache.get(uri).diagnostics is first
    cache.publish(uri, 1, [diag(2, "two")], incremental=True)
    assert [d.message for d in cache.get(uri).diagnostics] == ["one", "two"]


def test_progress_ranges_are_decoded_only_when_read(tmp_path: Path) -> None:
    from beam_lsp._progress import FileProgress

    cache = DiagnosticsCache()
    uri = path_to_uri(tmp_path / "A.lean")
    rng = {"start": {"line": 4, "character": 0}, "end": {"line": 9, "character": 0}}
    document = {"uri": uri, "version": 1}
    report = FileProgress.from_params({"processing": [{"range": rng, "kind": 1}], "textDocument": document})
    assert cache.progress(report)
    progress = cache.document_progress(uri)
    assert progress.report is report and "processing" not in vars(report)
    assert progress.elaboration is Elaboration.PROCESSING and progress.processing[0].end.line == 9
