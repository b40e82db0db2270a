"""beam_lsp on each anyio backend: the same client sessions on asyncio and on trio.

On asyncio the client reads Lean's output from the event loop's read callback (`_process.PipeReader.pump`); on
trio (and any other backend) it waits with `anyio.wait_readable`. These tests run one session of each kind a
caller relies on (documents and the barrier, typed requests, a request the server sends, cancellation, a server
that dies, broken framing) on both, against the scripted fake server, and one against real Lean.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from beam_lsp import JsonValue, LeanClient, Point0, Position, ServerExited, path_to_uri
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio

TEXT = "theorem x : True := by\n  trivial\n\ndef y := x\n"
BROKEN = "theorem t : True := ERROR_HERE\n"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both backends beam-lsp supports (this module's own, over the suite's asyncio)."""
    backend: str = request.param
    return backend


async def test_a_session_of_documents_barrier_and_requests(tmp_path: Path, anyio_backend: str) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        with anyio.fail_after(30):
            assert await client.open(uri, BROKEN) == 1
            first = await client.sync(uri)
            assert await client.change(uri, TEXT) == 2
            second = await client.sync(uri)
            hover = await client.hover(uri, Position(line=0, character=8))
            async with anyio.create_task_group() as tg:  # pipelined: answers reach the right callers
                hovers: list[object] = [None] * 8
                for i in range(8):

                    async def ask(i: int = i) -> None:
                        hovers[i] = await client.hover(uri, Position(line=0, character=8))

                    tg.start_soon(ask)
            await client.close(uri)
    assert [d.message for d in first.errors] == ["unknown identifier 'ERROR_HERE'"] and first.diagnostics_version == 1
    assert second.complete and not second.errors and second.diagnostics_version == 2
    assert hover is not None and hovers == [hover] * 8
    assert client.stats().protocol_errors == 0


async def test_a_request_from_the_server_is_answered_by_the_callers_handler(tmp_path: Path, anyio_backend: str) -> None:
    edit = {"jsonrpc": "2.0", "id": "e1", "method": "workspace/applyEdit", "params": {"edit": {"changes": {}}}}
    config: dict[str, object] = {"inject": {"on": "textDocument/hover", "send": [edit], "times": -1}}
    asked: list[JsonValue] = []
    answered = anyio.Event()

    async def apply(params: JsonValue) -> JsonValue:
        asked.append(params)
        answered.set()
        return {"applied": True}

    async with LeanClient.start(fake_cmd(config), cwd=tmp_path, server_requests={"workspace/applyEdit": apply}) as c:
        uri = path_to_uri(tmp_path / "A.lean")
        await c.open(uri, TEXT)
        with anyio.fail_after(10):
            await c.hover(uri, Position(line=0, character=8))
            await answered.wait()
    assert asked == [{"edit": {"changes": {}}}]


async def test_a_cancelled_request_sends_cancel_and_its_late_answer_is_dropped(
    tmp_path: Path, anyio_backend: str
) -> None:
    config: dict[str, object] = {"late_answer": ["textDocument/hover"]}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, TEXT)
        with anyio.move_on_after(0.2) as scope:
            await client.hover(uri, Position(line=0, character=8))
        assert scope.cancelled_caught
        with anyio.fail_after(10):
            while client.stats().late_answers_dropped == 0:  # the late answer comes before this one's
                await client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
            assert (await client.sync(uri)).complete  # the client goes on
        stats = client.stats()
    assert stats.cancellations_sent == 1 and stats.pending == 0


async def test_a_server_that_dies_mid_request_is_server_exited(tmp_path: Path, anyio_backend: str) -> None:
    config: dict[str, object] = {"crash_on": {"method": "textDocument/hover", "exit_code": 7, "stderr": "PANIC"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, TEXT)
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.hover(uri, Position(line=0, character=8))
    assert info.value.returncode == 7 and "PANIC" in info.value.stderr_tail


async def test_broken_framing_ends_the_session_with_a_typed_error(tmp_path: Path, anyio_backend: str) -> None:
    config: dict[str, object] = {"malformed": {"on": "textDocument/hover", "kind": "garbage_header", "then": "hang"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, TEXT)
        with anyio.fail_after(10), pytest.raises(ServerExited, match="unrecoverable protocol error"):
            await client.hover(uri, Position(line=0, character=8))


@pytest.mark.lean
async def test_real_lean_answers_the_same_on_both_backends(
    lean_toolchain: Toolchain, demo_root: Path, anyio_backend: str
) -> None:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        doc = client.file("Demo/Goals.lean")
        await doc.open()
        with anyio.fail_after(60):
            result = await doc.sync()
            hover = await doc.hover(Point0(3, 15))  # `p` of `(p : Prop)`
            goal = await doc.plain_goal(Point0(3, 43))  # after `by`
    assert result.complete and sorted(d.range.start.line for d in result.errors) == [3, 4]  # Goals.lean's own
    assert hover is not None and "Prop" in str(hover.contents)
    assert goal is not None and goal.goals and "⊢" in goal.goals[0]
