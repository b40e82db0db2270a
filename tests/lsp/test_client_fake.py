"""beam-lsp against the scripted fake Lean server: the faults real Lean cannot produce on demand.

Every fake message shape is copied from real Lean 4.35 traffic (see tests/support/fake_lean.py).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_lsp import (
    ContentModified,
    Elaboration,
    LeanClient,
    Position,
    RequestCancelled,
    ResponseError,
    ServerExited,
    WorkerCrashed,
    path_to_uri,
)
from beam_lsp import errors as codes
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio
P = Position


@asynccontextmanager
async def fake(tmp_path: Path, config: dict[str, Any] | None = None, **kw: Any) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path, **kw) as client:
        yield client


async def opened(client: LeanClient, tmp_path: Path, text: str, name: str = "A.lean") -> str:
    uri = path_to_uri(tmp_path / name)
    await client.open(uri, text)
    return uri


async def test_a_server_crash_mid_request_fails_it_at_once_with_the_stderr_tail(tmp_path: Path) -> None:
    config = {"crash_on": {"method": "textDocument/hover", "exit_code": 3, "stderr": "PANIC at Lean.Server"}}
    async with fake(tmp_path, config) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.hover(uri, P(line=0, character=8))
        assert info.value.returncode == 3
        assert "PANIC at Lean.Server" in info.value.stderr_tail
        assert client.exited is info.value
        with pytest.raises(ServerExited):
            await client.sync(uri)


async def test_a_crashed_file_worker_is_a_typed_error_and_the_next_change_restarts_it(tmp_path: Path) -> None:
    async with fake(tmp_path, {"worker_crash_on": "textDocument/hover"}) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            assert (await client.sync(uri)).complete
            with pytest.raises(WorkerCrashed) as info:
                await client.hover(uri, P(line=0, character=8))
            assert info.value.code == codes.WORKER_CRASHED
            assert (await client.sync(uri)).elaboration is Elaboration.FAILED
            await client.restart_document(uri)
            assert (await client.sync(uri)).complete
            assert await client.hover(uri, P(line=0, character=8)) is not None
        assert client.stats().worker_crashes == 1


async def test_cancelled_requests_send_cancel_and_drop_late_answers(tmp_path: Path) -> None:
    async with fake(tmp_path, {"late_answer": ["textDocument/hover"]}) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.move_on_after(0.2):
            await client.hover(uri, P(line=0, character=8))
        with anyio.fail_after(10):
            # The late answer arrives after our cancel; it must be dropped, not mistaken for another reply.
            assert (await client.sync(uri)).complete
            while client.stats().late_answers_dropped == 0:
                await client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        stats = client.stats()
        assert stats.cancellations_sent == 1 and stats.late_answers_dropped == 1 and stats.pending == 0


async def test_server_side_cancellation_and_content_modified_map_to_typed_errors(tmp_path: Path) -> None:
    config = {"content_modified": ["textDocument/definition"], "stall": ["textDocument/hover"], "ignore_cancel": []}
    async with fake(tmp_path, config) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            with pytest.raises(ContentModified) as info:
                await client.definition(uri, P(line=0, character=8))
            assert info.value.code == codes.CONTENT_MODIFIED and info.value.message == "File changed."
            with pytest.raises(ResponseError) as unknown:
                await client.request("$/lean/noSuchMethod", {})
            assert unknown.value.code == codes.METHOD_NOT_FOUND


async def test_lean_answering_cancel_with_request_cancelled_is_a_typed_error(tmp_path: Path) -> None:
    # Lean answers a cancelled request with -32800; another task's cancel must surface as RequestCancelled.
    async with fake(tmp_path, {"stall": ["textDocument/hover"], "ignore_cancel": []}) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                caught: list[BaseException] = []

                async def ask() -> None:
                    try:
                        await client.hover(uri, P(line=0, character=8))
                    except RequestCancelled as exc:
                        caught.append(exc)

                tg.start_soon(ask)
                await anyio.wait_all_tasks_blocked()  # the hover is in flight
                rid = client._rpc._next_id
                await client._rpc.notify("$/cancelRequest", {"id": rid})
        assert caught and caught[0].code == codes.REQUEST_CANCELLED  # type: ignore[attr-defined]


async def test_an_undecodable_message_is_skipped_and_counted(tmp_path: Path) -> None:
    config = {"malformed": {"on": "textDocument/hover", "kind": "bad_json", "then": "continue"}}
    async with fake(tmp_path, config) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.move_on_after(0.5):
            await client.hover(uri, P(line=0, character=8))  # its answer was the malformed frame
        with anyio.fail_after(10):
            assert (await client.sync(uri)).complete
        assert client.stats().protocol_errors == 1 and client.exited is None


@pytest.mark.parametrize("kind", ["oversized", "no_content_length", "garbage_header"])
async def test_broken_framing_ends_the_session_with_a_typed_error(tmp_path: Path, kind: str) -> None:
    config = {"malformed": {"on": "textDocument/hover", "kind": kind, "then": "hang"}}
    async with fake(tmp_path, config, max_message_bytes=1024 * 1024) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.hover(uri, P(line=0, character=8))
        assert "unrecoverable protocol error" in str(info.value)


async def test_server_requests_with_colliding_ids_are_answered_and_never_confused(tmp_path: Path) -> None:
    async with fake(tmp_path, {"inlay_refresh": 3}) as client:
        uris = [await opened(client, tmp_path, f"theorem x{i} : True := trivial\n", f"F{i}.lean") for i in range(3)]
        with anyio.fail_after(10):
            for uri in uris:
                assert (await client.sync(uri)).complete
                hover = await client.hover(uri, P(line=0, character=8))
                assert hover is not None
        assert client.stats().late_answers_dropped == 0


async def test_secrets_in_logs_stderr_and_diagnostics_are_redacted(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "MY_API_TOKEN": "supersecret-0123456789"}
    config = {"log_env": {"vars": ["MY_API_TOKEN"], "diagnostic_var": "MY_API_TOKEN"}}
    async with fake(tmp_path, config, env=env) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            # The log notification precedes the elaboration messages in the stream, so it is in by now.
            result = await client.sync(uri)
        texts = [d.message for d in result.diagnostics] + [e.message for e in client.cache.logs.entries()]
        texts.append(client.stderr_tail())
        assert all("supersecret" not in t for t in texts)
        assert all("[redacted:MY_API_TOKEN]" in t for t in texts)


async def test_shutdown_is_clean_and_leaves_no_process(tmp_path: Path) -> None:
    async with fake(tmp_path) as client:
        pid = client.pid
    exited = client.exited
    assert exited is not None and exited.returncode == 0
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


async def test_a_command_that_cannot_start_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        async with LeanClient.start([str(tmp_path / "no-such-lean"), "--server"], cwd=tmp_path):
            pass


async def test_a_server_that_exits_during_the_handshake_is_server_exited(tmp_path: Path) -> None:
    with pytest.raises(ServerExited) as info:
        async with LeanClient.start(
            [sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(2)"], cwd=tmp_path
        ):
            pass
    assert info.value.returncode == 2 and "boom" in info.value.stderr_tail
