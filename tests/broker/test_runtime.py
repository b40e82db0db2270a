"""One workspace runtime on the fake Lean: its own task group, session restarts, documents, reaper, reports."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import BrokerConfig, BrokerError
from beam_broker import errors as codes
from beam_broker._mirrors import MirrorPool
from beam_broker.runtime import WorkspaceRuntime
from beam_lsp import Redactor
from tests.support.fixtures import fake_cmd

from .support import SYSTEM_PATH, call, fake_project, open_broker

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def runtime_for(root: Path, **config: Any) -> AsyncIterator[tuple[WorkspaceRuntime, list[str]]]:
    changed: list[str] = []
    settings = BrokerConfig(lean_cmd=fake_cmd(config.pop("lean", None)), **config)
    async with WorkspaceRuntime.open(
        str(root),
        settings,
        env={"PATH": SYSTEM_PATH},
        redactor=Redactor(),
        save_lock=anyio.Lock(),
        on_diagnostics=changed.append,
    ) as runtime:
        yield runtime, changed


async def test_a_runtime_starts_lean_on_first_use_and_stops_it_when_left(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "ERROR_HERE\n"})
    async with runtime_for(root) as (runtime, changed):
        assert (runtime.epoch, runtime.session_token(), runtime.live_client()) == (None, None, None)
        assert runtime.stats()["sessions"]["lean"] == {"active": False}
        client = await runtime.client()
        assert await runtime.client() is client and runtime.live_client() is client
        assert runtime.epoch == 1 and str(client.pid) in (runtime.session_token() or "")
        doc, changed_now = await runtime.update(client, "A.lean")
        assert (doc.version, changed_now) == (1, True)
        await client.sync(doc.uri)
        assert runtime.files() == [str(root / "A.lean")] and runtime.open_paths() == [str(root / "A.lean")]
        assert str(root / "A.lean") in changed
        diagnostics = runtime.diagnostics(str(root / "A.lean"))
        assert diagnostics is not None and diagnostics["tracked"] is True
        assert runtime.diagnostics(str(root / "Other.lean")) is None
    assert client.exited is not None and runtime.closed


async def test_a_dead_server_is_restarted_with_a_new_epoch_and_fresh_state(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        client = await runtime.client()
        await runtime.update(client, "A.lean")
        runtime.pool((root / "A.lean").as_uri())
        os.kill(client.pid, signal.SIGKILL)
        with anyio.fail_after(20):
            await client.wait_exited()
        assert runtime.live_client() is None
        restarted = await runtime.client()
        assert restarted is not client and runtime.epoch == 2
        assert runtime.documents.docs == {} and runtime.pools == {}
        metrics = runtime.metrics.wire()
    assert (metrics["sessionStarts"], metrics["sessionRestarts"]) == (2, 1)


async def test_a_closed_runtime_starts_no_server(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        pass
    with pytest.raises(BrokerError) as info:
        await runtime.client()
    assert info.value.code == codes.CONTENT_MODIFIED


async def test_a_document_closed_while_an_update_waits_is_opened_again(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        client = await runtime.client()
        doc, _ = await runtime.update(client, "A.lean")
        async with anyio.create_task_group() as tg:
            await doc.lock.acquire()
            results: list[Any] = []

            async def update() -> None:
                results.append(await runtime.update(client, "A.lean"))

            tg.start_soon(update)
            await anyio.wait_all_tasks_blocked()
            runtime.documents.pop(doc.path)  # closed meanwhile
            await client.close(doc.uri)
            doc.lock.release()
        [(again, sent)] = results
        assert again is not doc and sent is True and again.version == 1


async def test_closing_a_document_without_a_live_server_only_forgets_it(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        client = await runtime.client()
        await runtime.update(client, "A.lean")
        await runtime.close_doc(None, "A.lean")
        assert runtime.documents.docs == {} and client.is_open((root / "A.lean").as_uri())
        await runtime.close_doc(client, "Missing.lean")


async def test_the_idle_reaper_outlives_a_failing_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    attempts = anyio.Event()
    calls: list[float] = []

    async def failing(self: MirrorPool, client: Any, idle_seconds: float) -> None:
        calls.append(idle_seconds)
        if len(calls) == 2:
            attempts.set()
        raise RuntimeError("close failed")

    monkeypatch.setattr(MirrorPool, "close_idle", failing)
    with caplog.at_level(logging.ERROR, logger="beam_broker"):
        async with runtime_for(root, mirror_idle_seconds=0.01) as (runtime, _):
            runtime.pool((root / "A.lean").as_uri())
            runtime.pool((root / "A.lean").as_uri())  # one pool, one reaper
            with anyio.fail_after(10):
                await attempts.wait()
    assert calls[:2] == [0.01, 0.01] and "closing idle probe mirrors" in caplog.text


async def test_the_bound_leaves_a_document_open_that_a_call_started_to_hold_meanwhile(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        client = await runtime.client()
        held: list[Any] = []
        doc, _ = await runtime.update(client, "A.lean", hold=held)
        assert doc.users == 1 and held == [doc]
        await runtime.close_doc(client, "A.lean", idle_only=True)
        assert client.is_open(doc.uri) and runtime.documents.is_current(doc)
        runtime.release(held)
        assert doc.users == 0 and held == []
        await runtime.close_doc(client, "A.lean", idle_only=True)
        assert not client.is_open(doc.uri) and runtime.open_paths() == []


async def test_a_close_waits_for_the_messages_of_an_update_and_closes_once(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with runtime_for(root) as (runtime, _):
        client = await runtime.client()
        doc, _ = await runtime.update(client, "A.lean")
        async with anyio.create_task_group() as tg:
            await doc.lock.acquire()  # an update is sending its messages
            tg.start_soon(runtime.close_doc, client, "A.lean")
            tg.start_soon(runtime.close_doc, client, "A.lean")
            await anyio.wait_all_tasks_blocked()
            assert runtime.documents.is_current(doc) and client.is_open(doc.uri)
            doc.lock.release()
        assert runtime.documents.docs == {} and not client.is_open(doc.uri)


async def test_a_lean_command_without_report_delay_zero_is_logged_once_per_runtime(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "def x := 1\n"})
    fast = fake_project(tmp_path / "q", {"A.lean": "def x := 1\n"})
    with caplog.at_level(logging.INFO, logger="beam_broker"):
        async with open_broker() as broker:
            await call(broker, "sync", root, path="A.lean")
            await call(broker, "drop_workspace", root)
            await call(broker, "sync", root, path="A.lean")  # a new runtime warns again: once per runtime
        async with open_broker(cmd=[*fake_cmd(), "-Dserver.reportDelayMs=0"]) as broker:
            await call(broker, "sync", fast, path="A.lean")
    warned = [r.getMessage() for r in caplog.records if "reportDelayMs" in r.getMessage()]
    assert len(warned) == 2 and all(str(root) in w and "200 ms" in w for w in warned)


async def test_beam_refuses_every_edit_lean_asks_a_client_to_apply() -> None:
    from beam_broker.runtime import SERVER_REQUESTS

    answer = await SERVER_REQUESTS["workspace/applyEdit"]({"edit": {"changes": {}}})
    assert answer == {"applied": False, "failureReason": "Beam never edits sources"}
