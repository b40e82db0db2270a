"""Request dispatch (`_dispatch`): envelopes, id ownership, cancellation, channels and outlets, output, shutdown.

Driven in-process line by line (the stdio channel) and through `McpServer.channel`/`handle` (what the HTTP
transport uses), over the real broker and the scripted fake Lean server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import BY_NAME
from beam_mcp import McpServer, ServerConfig
from beam_mcp._dispatch import Channel, Dispatcher, Outlet
from beam_mcp._jsonrpc import Request, classify, loads
from beam_mcp.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR
from tests.support.fixtures import fake_cmd, gated_cmd

from .support import LeanGate, Sink, call_message, harness, modern_meta, progress, structured

pytestmark = pytest.mark.anyio

SYNC_KEY = BY_NAME["sync"].key


@pytest.fixture
def root(fake_project: Callable[..., Path]) -> Path:
    return fake_project("proj", {"A.lean": "def a := 1\n", "B.lean": "def b := 2\n"})


def ws(root: str | Path, **arguments: Any) -> dict[str, Any]:
    return {"workspace": {"root": str(root)}, **arguments}


def message(obj: dict[str, Any]) -> Any:
    return classify(loads(json.dumps(obj)))


def discover(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": modern_meta()}}


# ---- envelopes ----------------------------------------------------------------------------------------------------
async def test_parse_errors_answer_with_a_null_id_and_the_reader_keeps_going() -> None:
    async with harness() as h:
        for line in (b"\n", b"{oops\n", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}\n', b"[1,2]\n"):
            await h.send(line)
            response = await h.recv()
            assert response["id"] is None and "error" in response
            assert response["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST)
        discovered = await h.request("server/discover", {"_meta": modern_meta()})
        assert "result" in discovered


async def test_an_oversized_stdio_line_is_a_parse_error_with_a_null_id() -> None:
    async with harness() as h:
        h.server.receive_oversized()
        response = await h.recv()
        assert response["id"] is None and response["error"]["code"] == PARSE_ERROR
        assert "result" in await h.request("server/discover", {"_meta": modern_meta()})


async def test_a_message_nested_deeper_than_512_levels_is_a_parse_error_with_a_null_id() -> None:
    deep = '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"x":' + "[" * 511
    async with harness() as h:
        await h.send((deep + "]" * 511 + "}}}\n").encode())  # 514 levels with the envelope: docs/mcp.md#limits
        response = await h.recv()
        assert response["id"] is None and response["error"]["code"] == PARSE_ERROR, response
        assert "result" in await h.request("server/discover", {"_meta": modern_meta()})


async def test_client_responses_are_rejected_echoing_their_id() -> None:
    async with harness() as h:
        await h.send({"jsonrpc": "2.0", "id": 9, "result": {}})
        response = await h.recv()
        assert response["id"] == 9 and response["error"]["code"] == INVALID_REQUEST


async def test_undeclared_envelope_members_are_rejected_for_requests_and_notifications() -> None:
    async with harness() as h:
        await h.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}, "extra": 1})
        response = await h.recv()
        assert response["id"] == 1 and response["error"]["code"] == INVALID_REQUEST
        assert "extra" in response["error"]["message"]
        await h.send({"jsonrpc": "2.0", "method": "notifications/initialized", "token": 1})
        response = await h.recv()
        assert response["id"] is None and response["error"]["code"] == INVALID_REQUEST


async def test_string_and_integer_ids_are_distinct_and_echoed_as_sent() -> None:
    async with harness() as h:
        await h.send(b'{"jsonrpc":"2.0","id":7.0,"method":"server/discover","params":{"_meta":'
                     b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
                     b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n')  # fmt: skip
        raw = await h.out.receive()
        assert raw.startswith(b'{"jsonrpc":"2.0","id":7.0,"result"')
        a = await h.request("server/discover", {"_meta": modern_meta()}, rid="7")
        b = await h.request("server/discover", {"_meta": modern_meta()}, rid=7)
        assert a["id"] == "7" and b["id"] == 7


async def test_a_lone_surrogate_in_an_id_method_or_tool_name_is_echoed_as_an_escape() -> None:
    async with harness() as h:
        meta = json.dumps({"_meta": modern_meta()})
        await h.send(b'{"jsonrpc":"2.0","id":"\\ud800","method":"server/discover","params":' + meta.encode() + b"}")
        raw = await h.out.receive()
        assert raw.startswith(b'{"jsonrpc":"2.0","id":"\\ud800","result"')
        await h.send(b'{"jsonrpc":"2.0","id":2,"method":"x\\udfff","params":' + meta.encode() + b"}")
        unknown = await h.recv()
        assert unknown["id"] == 2 and unknown["error"]["code"] == METHOD_NOT_FOUND
        assert "x\udfff" in unknown["error"]["message"]
        response = await h.request("tools/call", {"name": "\ud800", "_meta": modern_meta()})
        assert response["error"]["code"] == INVALID_PARAMS and "\ud800" in response["error"]["message"]
        assert "result" in await h.request("server/discover", {"_meta": modern_meta()})  # still serving


async def test_unknown_notifications_are_ignored_and_malformed_cancels_too() -> None:
    async with harness() as h:
        await h.notify("notifications/whatever", {"x": 1})
        await h.notify("notifications/cancelled", {"requestId": 1, "extra": 2})
        await h.notify("notifications/cancelled", {"requestId": [1]})
        await h.notify("notifications/cancelled", "nope")
        await h.notify("notifications/cancelled")
        assert await h.quiet() == []


# ---- id ownership -------------------------------------------------------------------------------------------------
async def test_a_request_reusing_an_active_id_is_ignored_and_the_id_is_reusable_after_the_answer(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        await h.send(call_message(5, "lean_sync", ws(root, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        await h.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": modern_meta()}})
        await h.send({"jsonrpc": "2.0", "id": 5, "bad": True})  # malformed, same id: ignored too
        assert await h.quiet() == []
        gate.open()
        response, _ = await h.until(5)
        assert structured(response)["version"] == 1
        assert await h.quiet() == []
        again = await h.request("tools/list", {"_meta": modern_meta()}, rid=5)
        assert "tools" in again["result"]


async def test_an_invalid_message_never_releases_the_id_of_an_active_request(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        await h.send({"jsonrpc": "2.0", "id": 8, "extra": 1, "method": "x"})  # invalid, id 8 echoed
        await h.send(call_message(8, "lean_sync", ws(root, path="A.lean")))
        invalid = await h.recv()
        assert invalid["id"] == 8 and "error" in invalid
        with anyio.fail_after(10):
            await gate.reached()
        await h.send({"jsonrpc": "2.0", "id": 8, "extra": 1, "method": "x"})  # ignored while 8 is active
        await h.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": modern_meta()}})
        gate.open()
        response, others = await h.until(8)
        assert structured(response)["version"] == 1 and others == []
        assert await h.quiet() == []


async def test_ids_are_owned_per_channel_until_the_response_is_flushed(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        first, second = h.server.channel(family="modern"), h.server.channel(family="modern")
        held, other = Sink(), Sink()
        request = message(call_message(1, "lean_sync", ws(root, path="A.lean")))
        await h.server.handle(first, request, held)
        await h.server.handle(second, message(discover(1)), other)  # the same id on another channel
        assert other.response is not None and "result" in other.response
        assert first.owns(request.id) and not second.owns(request.id)
        with anyio.fail_after(10):
            await gate.reached()
        gate.open()
        with anyio.fail_after(10):
            await held.done.wait()
        assert held.response is not None and not first.owns(request.id)


# ---- cancellation -------------------------------------------------------------------------------------------------
async def test_cancelled_calls_stop_broker_work_and_get_no_response(root: Path) -> None:
    async with harness({"stall": ["textDocument/waitForDiagnostics"]}) as h:
        await h.send(call_message("c1", "lean_sync", ws(root, path="A.lean"), progressToken="t"))
        while not any("processing A.lean" in p["message"] for p in progress([await h.recv()])):
            pass  # until Lean reports that it works on the file
        await anyio.wait_all_tasks_blocked()  # the broker is waiting for Lean's barrier answer
        await h.notify("notifications/cancelled", {"requestId": "c1", "reason": "user"})
        await h.fence()  # the cancelled call has ended
        version, seen = await h.call("beam_version", rid="c1")  # the id is free again
        assert version["id"] == "c1" and "result" in version
        assert [m for m in seen if "id" in m] == []
        assert (await h.ops(root))[SYNC_KEY]["cancelledCount"] == 1
        await h.notify("notifications/cancelled", {"requestId": "c1"})  # a late cancel is inert
        assert await h.quiet() == []


async def test_a_call_cancelled_while_lean_is_busy_is_cancelled_in_the_broker(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        await h.send(call_message("c", "lean_sync", ws(root, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        await h.notify("notifications/cancelled", {"requestId": "c"})
        await h.fence()
        assert await h.quiet() == []
        assert (await h.ops(root))[SYNC_KEY]["cancelledCount"] == 1
        gate.open()
        synced, _ = await h.call("lean_sync", ws(root, path="A.lean"))  # the workspace starts again
        assert structured(synced)["version"] == 1


# ---- channels and outlets (the transport interface) ---------------------------------------------------------------
async def test_handle_returns_once_a_call_is_admitted_and_its_outlet_ends_with_the_response(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        channel, sink = h.server.channel(family="modern"), Sink()
        request = message(call_message("u", "lean_sync", ws(root, path="A.lean"), progressToken=1))
        with anyio.fail_after(10):
            await h.server.handle(channel, request, sink)
            assert channel.owns(request.id)
            await gate.reached()
        assert not sink.done.is_set()  # admitted: the response comes later
        gate.open()
        with anyio.fail_after(10):
            await sink.done.wait()
        assert sink.response is not None and sink.response["result"]["structuredContent"]["version"] == 1
        assert sink.messages and {m["method"] for m in sink.messages} == {"notifications/progress"}


async def test_cancel_on_a_channel_abandons_the_call(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        channel, sink = h.server.channel(family="modern"), Sink()
        request = message(call_message("u", "lean_sync", ws(root, path="A.lean")))
        await h.server.handle(channel, request, sink)
        with anyio.fail_after(10):
            await gate.reached()
        assert channel.owns(request.id)
        h.server.cancel(channel, request.id)
        with anyio.fail_after(10):
            await sink.done.wait()
        assert sink.abandoned and sink.response is None and not channel.owns(request.id)
        h.server.cancel(channel, request.id)  # unknown by now: inert


async def test_closing_a_channel_cancels_its_calls_lets_a_drop_finish_and_refuses_later_requests(
    root: Path, fake_project: Callable[..., Path]
) -> None:
    other = fake_project("other", {"A.lean": "def a := 1\n"})
    async with harness() as h, LeanGate.install(root) as gate:
        await h.call("lean_update", ws(other, path="A.lean"))
        channel = h.server.channel(family="modern")
        held, drop = Sink(), Sink()
        await h.server.handle(channel, message(call_message(1, "lean_sync", ws(root, path="A.lean"))), held)
        await h.server.handle(channel, message(call_message(2, "lean_drop_workspace", ws(other))), drop)
        with anyio.fail_after(10):
            await gate.reached()
        h.server.close_channel(channel)
        h.server.close_channel(channel)  # idempotent
        with anyio.fail_after(10):
            await held.done.wait()
            await drop.done.wait()
        assert held.abandoned
        assert drop.response is not None and drop.response["result"]["structuredContent"]["dropped"] is True
        assert channel.closed
        late = Sink()
        await h.server.handle(channel, message(discover(3)), late)
        assert late.response is not None and late.response["error"]["code"] == INVALID_REQUEST


async def test_a_message_with_an_active_id_sends_nothing_to_its_outlet(root: Path) -> None:
    async with harness() as h, LeanGate.install(root) as gate:
        channel = h.server.channel(family="modern")
        request = message(call_message("x", "lean_sync", ws(root, path="A.lean")))
        first, second = Sink(), Sink()
        await h.server.handle(channel, request, first)
        await h.server.handle(channel, message(discover("x")), second)
        with anyio.fail_after(10):
            await gate.reached()
        assert second.messages == [] and not second.done.is_set()
        gate.open()
        with anyio.fail_after(10):
            await first.done.wait()
        assert second.messages == [] and not second.done.is_set()


async def test_a_request_the_transport_gives_up_on_before_admission_frees_its_id() -> None:
    async def waits(channel: Channel, req: Request, outlet: Outlet) -> dict[str, Any] | None:
        await anyio.sleep_forever()  # routing that waits (an HTTP client disconnects meanwhile)
        return None

    async def answers(channel: Channel, req: Request, outlet: Outlet) -> dict[str, Any] | None:
        return {"answered": req.method}

    async with anyio.create_task_group() as tg:
        dispatcher, channel, sink = Dispatcher(tg, fence_grace=1.0), Channel(None, "modern"), Sink()
        request = message(discover(1))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await dispatcher.handle(channel, request, sink, route=waits, notification=lambda c, n: None)
        assert not channel.owns(request.id) and not sink.done.is_set()
        await dispatcher.handle(channel, request, sink, route=answers, notification=lambda c, n: None)  # free again
        assert sink.response is not None and sink.response["result"] == {"answered": "server/discover"}


# ---- output -------------------------------------------------------------------------------------------------------
async def test_a_closed_output_is_survived_quietly() -> None:
    attempts = 0

    async def broken(data: bytes) -> None:
        nonlocal attempts
        attempts += 1
        raise BrokenPipeError

    async with McpServer.open(ServerConfig(lean_cmd=fake_cmd()), broken) as server:
        for rid in range(3):
            await server.receive(json.dumps(discover(rid)).encode() + b"\n")
        sink = Sink()
        await server.handle(server.channel(family="modern"), message(discover(9)), sink)  # still serving
        assert sink.response is not None and "result" in sink.response
    assert attempts == 1  # nothing is written once the client closed our output


async def test_a_server_without_a_writer_has_no_stdio_channel() -> None:
    async with McpServer.open(ServerConfig(lean_cmd=fake_cmd())) as server:
        with pytest.raises(RuntimeError):
            await server.receive(json.dumps(discover(1)).encode())
        sink = Sink()
        await server.handle(server.channel(family="modern"), message(discover(1)), sink)
        assert sink.response is not None and "result" in sink.response


# ---- shutdown -----------------------------------------------------------------------------------------------------
async def test_eof_cancels_cooperative_calls_but_lets_a_drop_finish(
    root: Path, fake_project: Callable[..., Path]
) -> None:
    other = fake_project("other", {"A.lean": "def a := 1\n"})
    outputs: list[dict[str, Any]] = []
    async with harness() as h, LeanGate.install(root) as gate:
        await h.call("lean_update", ws(other, path="A.lean"))
        await h.send(call_message(1, "lean_sync", ws(root, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        await h.send(call_message(2, "lean_drop_workspace", ws(other)))  # waits behind the held sync
        with anyio.fail_after(30):
            await h.server.shutdown()
        outputs = [json.loads(line) for line in h.raw_available()]
    assert [o["id"] for o in outputs] == [2]
    assert outputs[0]["result"]["structuredContent"]["dropped"] is True


async def test_eof_gives_up_on_a_drop_stuck_past_the_grace_period(root: Path) -> None:
    lean = {"crash_on": {"method": "shutdown", "after_ms": 120000}}  # a Lean server that hangs on shutdown
    async with harness(lean, shutdown_grace=0.05) as h:
        await h.call("lean_update", ws(root, path="A.lean"))
        await h.send(call_message(1, "lean_drop_workspace", ws(root)))
        await anyio.wait_all_tasks_blocked()  # the drop waits for Lean to shut down
        with anyio.fail_after(60):
            await h.server.shutdown()
        assert h.raw_available() == []


async def test_requests_after_shutdown_began_are_refused() -> None:
    async with harness() as h:
        await h.server.shutdown()
        await h.server.shutdown()  # idempotent
        sink = Sink()
        await h.server.handle(h.server.channel(family="modern"), message(discover(1)), sink)
        assert sink.response is not None
        assert sink.response["error"] == {"code": INVALID_REQUEST, "message": "MCP server is shutting down"}
        # On stdio the writer is closed: nothing can be answered any more, and nothing breaks.
        await h.send(discover(2))
        await anyio.wait_all_tasks_blocked()
        assert h.raw_available() == []


async def test_eof_ends_calls_of_every_channel_and_stops_lean(root: Path) -> None:
    sent: list[bytes] = []

    async def write(data: bytes) -> None:
        sent.append(data)

    async with McpServer.open(ServerConfig(lean_cmd=gated_cmd(fake_cmd())), write) as server:
        async with LeanGate.install(root) as gate:
            sink = Sink()
            request = message(call_message(1, "lean_sync", ws(root, path="A.lean")))
            await server.handle(server.channel(family="modern"), request, sink)
            with anyio.fail_after(10):
                await gate.reached()
            with anyio.fail_after(30):
                await server.shutdown()
            assert sink.abandoned
    assert sent == []


async def test_answers_keep_the_order_of_requests_answered_at_once() -> None:
    async with harness() as h:
        for rid in range(50):
            await h.send(discover(rid))
        assert [(await h.recv())["id"] for _ in range(50)] == list(range(50))
