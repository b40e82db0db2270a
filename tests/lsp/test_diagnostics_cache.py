"""The diagnostics cache: availability, spellings, bounds, eviction, restart, logs, redaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from beam_lsp import Availability, DiagnosticsCache, Elaboration, LeanFileProgressParams, Redactor
from beam_lsp import diagnostics as dmod
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
    wire = cache.get(uri).wire()["diagnostics"][0]
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
            LeanFileProgressParams.model_validate(
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
    wire = cache.get(uri).wire()["diagnostics"][0]
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
