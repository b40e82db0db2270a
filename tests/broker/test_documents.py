"""Document state beside Lean's mirror: text hashes, header imports, module history, reading sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from beam_broker import BrokerError
from beam_broker import errors as codes
from beam_broker._documents import Documents, header_imports, read_source, text_hash
from beam_broker._verdict import ProgressTracker

pytestmark = pytest.mark.anyio


def test_header_imports_skip_comments_and_stop_at_the_first_command() -> None:
    text = "/- doc\n comment -/\nprelude\n-- note\nimport A.B C\nimport A.B\n\ndef x := 1\nimport Z\n"
    assert header_imports(text) == ("A.B", "C")
    assert header_imports("module\npublic import D\nimport all E\n") == ("D", "E")
    assert header_imports("/- one line -/\nimport F\n") == ("F",)


def test_text_hash_ignores_line_ending_style() -> None:
    assert text_hash("a\r\nb\n") == text_hash("a\nb\n") != text_hash("a\nc\n")
    assert len(text_hash("")) == 16


def documents(root: Path) -> Documents:
    return Documents(str(root), lambda path: path.relative_to(root).as_posix())


def test_a_changed_and_saved_import_makes_its_importer_stale_until_resynced(tmp_path: Path) -> None:
    docs = documents(tmp_path)
    basic = docs.track(tmp_path / "Demo/Basic.lean", "def one := 1\n")
    proofs = docs.track(tmp_path / "Demo/Proofs.lean", "import Demo.Basic\n")
    basic.opened(1, "def one := 1\n")
    proofs.opened(1, "import Demo.Basic\n")
    assert (basic.module, proofs.imports) == ("Demo.Basic", ("Demo.Basic",))
    docs.record_sync(basic, ProgressTracker())
    docs.record_sync(proofs, ProgressTracker())
    assert docs.stale_deps(proofs) == []
    basic.changed(2, "def one := 2\n")
    docs.record_sync(basic, ProgressTracker())
    assert docs.stale_deps(proofs) == [{"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": True}]
    docs.record_save(basic)
    assert basic.checkpointed_version == 2
    assert docs.stale_deps(proofs) == [{"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": False}]
    docs.record_sync(proofs, ProgressTracker())
    assert docs.stale_deps(proofs) == [] and proofs.synced_version == 1


def test_documents_outside_the_root_have_no_module_and_closing_forgets_them(tmp_path: Path) -> None:
    docs = documents(tmp_path / "root")
    outside = docs.track(tmp_path / "Outside.lean", "")
    assert outside.module is None and docs.is_current(outside)
    docs.record_sync(outside, ProgressTracker())
    docs.record_save(outside)
    assert docs.pop(tmp_path / "Outside.lean") is outside and not docs.is_current(outside)
    assert docs.pop(tmp_path / "Outside.lean") is None


async def test_reading_a_source_reports_what_is_wrong_with_it(tmp_path: Path) -> None:
    (tmp_path / "A.lean").write_text("ok\n")
    (tmp_path / "Bad.lean").write_bytes(b"\xff")
    (tmp_path / "Dir.lean").mkdir()
    (tmp_path / "Locked.lean").write_text("x")
    (tmp_path / "Locked.lean").chmod(0)
    assert await read_source(tmp_path / "A.lean") == "ok\n"
    for name, needle, code in [
        ("Missing.lean", "file not found", codes.INVALID_PARAMS),
        ("Bad.lean", "not UTF-8", codes.INVALID_PARAMS),
        ("Dir.lean", "not a file", codes.INVALID_PARAMS),
    ]:
        with pytest.raises(BrokerError) as info:
            await read_source(tmp_path / name)
        assert info.value.code == code and needle in info.value.message
    if os_can_lock_out(tmp_path / "Locked.lean"):
        with pytest.raises(BrokerError) as locked:
            await read_source(tmp_path / "Locked.lean")
        assert locked.value.code == codes.INTERNAL_ERROR and "cannot read" in locked.value.message


def os_can_lock_out(path: Path) -> bool:
    """Whether a mode-0 file is unreadable here (root reads anything)."""
    try:
        path.read_bytes()
    except PermissionError:
        return True
    return False
