"""Snapshot tokens (upstream Beam's current contract) beside document versions, on the fake lane.

`update`, `sync`, `refresh` and `save` answer an opaque per-file `snapshot`; every operation that takes a `version`
takes a `snapshot` instead (exactly one of the two). The rules are upstream's: an unchanged source keeps its token;
a source change, a refresh, a close and reopen, a restarted Lean and a dropped workspace each give a fresh token,
even for identical text; a token of another file is never current; a stale token is `contentModified` with
`data.reason = "snapshotMismatch"`, `expectedSnapshot`, `currentSnapshot` and `uri`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_lsp import path_to_uri
from tests.support.fixtures import fake_broker

from .support import call, error_of, fake_lake, fake_project, open_broker
from .test_governor import metered

pytestmark = pytest.mark.anyio
CLEAN = "theorem x : True := trivial\n"


async def _symbols(broker: Broker, root: Path, path: str, **pin: Any) -> dict[str, Any]:
    return await call(broker, "document_symbols", root, path=path, **pin)


async def _stale(broker: Broker, root: Path, path: str, snapshot: str, current: str) -> None:
    """A document call with `snapshot` fails with upstream's error naming `current` as the current token."""
    err = await error_of(broker, "document_symbols", root, path=path, snapshot=snapshot)
    uri = path_to_uri(root / path)
    assert err.code == codes.CONTENT_MODIFIED
    assert err.data == {
        "reason": "snapshotMismatch",
        "expectedSnapshot": snapshot,
        "currentSnapshot": current,
        "uri": uri,
    }
    assert err.message == (
        f"source snapshot changed for {uri}; read the source and resolve the intended target again before retrying"
    )


async def test_update_sync_refresh_and_save_answer_the_token_and_an_unchanged_source_keeps_it(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        updated = await call(broker, "update", root, path="A.lean")
        token = updated["snapshot"]
        assert isinstance(token, str) and token
        synced = await call(broker, "sync", root, path="A.lean")
        saved = await call(broker, "save", root, path="A.lean")
        again = await call(broker, "update", root, path="A.lean")
        assert synced["snapshot"] == saved["snapshot"] == saved["sync"]["snapshot"] == again["snapshot"] == token
        assert again["changed"] is False
        listed = await _symbols(broker, root, "A.lean", snapshot=token)
        assert listed["result"], "a current token answers like its version"
        refreshed = await call(broker, "refresh", root, path="A.lean")
        assert refreshed["snapshot"] != token and refreshed["version"] == 1, "same version, fresh token"
        await _stale(broker, root, "A.lean", token, refreshed["snapshot"])


async def test_a_source_change_gives_a_fresh_token_even_back_to_the_same_text(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        first = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        (root / "A.lean").write_text(CLEAN + "-- more\n")
        second = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        (root / "A.lean").write_text(CLEAN)
        third = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        assert len({first, second, third}) == 3
        await _stale(broker, root, "A.lean", first, third)
        await _stale(broker, root, "A.lean", second, third)
        assert (await _symbols(broker, root, "A.lean", snapshot=third))["result"]


async def test_a_change_on_disk_since_the_token_is_found_by_the_call_itself(tmp_path: Path) -> None:
    # The call reads the file first (as with versions): an edit nobody synced still makes the token stale.
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        token = (await call(broker, "sync", root, path="A.lean"))["snapshot"]
        (root / "A.lean").write_text(CLEAN + "theorem y : True := trivial\n")
        err = await error_of(broker, "hover", root, path="A.lean", snapshot=token, line=0, character=8)
        assert err.code == codes.CONTENT_MODIFIED and err.data is not None
        assert err.data["reason"] == "snapshotMismatch" and err.data["currentSnapshot"] != token


async def test_close_and_reopen_give_a_fresh_token_for_identical_text(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        token = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        await call(broker, "close", root, path="A.lean")
        reopened = await call(broker, "update", root, path="A.lean")
        assert reopened["changed"] is True and reopened["snapshot"] != token
        await _stale(broker, root, "A.lean", token, reopened["snapshot"])


async def test_a_restarted_lean_gives_fresh_tokens(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker({"crash_on": {"method": "textDocument/hover"}}) as broker:
        token = (await call(broker, "sync", root, path="A.lean"))["snapshot"]
        err = await error_of(broker, "hover", root, path="A.lean", snapshot=token, line=0, character=8)
        assert err.code == codes.WORKER_EXITED
        again = await call(broker, "update", root, path="A.lean")
        assert again["version"] == 1 and again["snapshot"] != token, "same version on the new server, fresh token"
        await _stale(broker, root, "A.lean", token, again["snapshot"])


async def test_a_dropped_workspace_gives_fresh_tokens(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        token = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        await call(broker, "drop_workspace", root)
        again = await call(broker, "update", root, path="A.lean")
        assert again["version"] == 1 and again["snapshot"] != token
        await _stale(broker, root, "A.lean", token, again["snapshot"])


async def test_a_token_of_another_file_is_rejected(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN, "B.lean": CLEAN})
    async with open_broker() as broker:
        a = (await call(broker, "update", root, path="A.lean"))["snapshot"]
        b = (await call(broker, "update", root, path="B.lean"))["snapshot"]
        assert a != b, "identical text in two files: two tokens"
        await _stale(broker, root, "B.lean", a, b)
        assert (await _symbols(broker, root, "B.lean", version=1))["result"], "B's own version still answers"


@pytest.mark.parametrize(
    ("pin", "needle"),
    [
        ({}, "pass exactly one of version and snapshot"),
        ({"version": 1, "snapshot": "x/1"}, "pass exactly one of version and snapshot"),
        ({"snapshot": ""}, "snapshot"),
        ({"snapshot": 1}, "snapshot"),
        ({"snapshot": "x" * 257}, "snapshot"),
    ],
)
async def test_a_call_names_the_document_state_by_exactly_one_of_version_and_snapshot(
    tmp_path: Path, pin: dict[str, Any], needle: str
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        err = await error_of(broker, "goals", root, path="A.lean", line=0, character=8, mode="before", **pin)
        assert err.code == codes.INVALID_INPUT and needle in err.message
        assert not broker.active, "refused before any Lean started"


async def test_a_stale_version_keeps_the_seeds_error(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        err = await error_of(broker, "document_symbols", root, path="A.lean", version=2)
    assert err.code == codes.CONTENT_MODIFIED and err.data is not None
    assert err.data["reason"] == "documentVersionMismatch" and "currentSnapshot" not in err.data


async def test_a_document_closed_by_the_open_document_bound_gives_a_fresh_token(tmp_path: Path) -> None:
    # Beam's own close of an unchanged file is a close all the same (versions may still name version 1 there).
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN, "B.lean": CLEAN})
    async with fake_broker(max_open_documents=1) as broker:
        token = (await call(broker, "sync", root, path="A.lean"))["snapshot"]
        await call(broker, "sync", root, path="B.lean")  # closes A, the least recently used
        await _stale(broker, root, "A.lean", token, await _current(broker, root, "A.lean"))


async def test_a_document_closed_by_the_memory_budget_gives_a_fresh_token(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN, "B.lean": CLEAN})
    async with fake_broker(memory_budget_mib=150) as broker:
        on = metered(broker)
        token = (await call(broker, "sync", root, path="A.lean"))["snapshot"]
        await call(broker, "sync", root, path="B.lean")
        on["on"] = True  # 160 MiB: closing A, the least recently used, is enough
        await broker.governor.govern()
        assert broker.status()["evictions"] == [{"kind": "document", "reason": "memory", "count": 1}]
        on["on"] = False
        await _stale(broker, root, "A.lean", token, await _current(broker, root, "A.lean"))


async def test_a_runtime_shut_down_by_the_idle_timeout_gives_fresh_tokens(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with fake_broker(idle_timeout=3600) as broker:
        token = (await call(broker, "sync", root, path="A.lean"))["snapshot"]
        runtime = broker.cached(str(root))
        assert runtime is not None
        runtime.occupancy.last_active -= 7200
        await broker.governor.govern()
        assert broker.workspace_count == 0
        await _stale(broker, root, "A.lean", token, await _current(broker, root, "A.lean"))


async def test_tokens_differ_across_workspaces_and_brokers_for_the_same_text(tmp_path: Path) -> None:
    # Two projects, or one project in two daemons one after the other: a token names one runtime's state only.
    a = fake_project(tmp_path / "a", {"A.lean": CLEAN})
    b = fake_project(tmp_path / "b", {"A.lean": CLEAN})
    async with open_broker() as broker:
        first = (await call(broker, "update", a, path="A.lean"))["snapshot"]
        other = (await call(broker, "update", b, path="A.lean"))["snapshot"]
        await _stale(broker, b, "A.lean", first, other)
    async with open_broker() as broker:
        await _stale(broker, a, "A.lean", first, await _current(broker, a, "A.lean"))


async def _current(broker: Broker, root: Path, path: str) -> str:
    token: str = (await call(broker, "update", root, path=path))["snapshot"]
    return token
