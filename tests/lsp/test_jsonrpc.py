"""beam_lsp.jsonrpc: correlation, cancellation both ways, strict JSON objects, broken streams.

Most tests drive one peer over in-memory byte streams from a scripted "wire" on the other end; a few put two
peers back to back. The client-level tests over the fake Lean server are at the end.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from beam_lsp import (
    ContentModified,
    LeanClient,
    Position,
    Redactor,
    RequestCancelled,
    ResponseError,
    ServerExited,
    TransportError,
    path_to_uri,
)
from beam_lsp import errors as codes
from beam_lsp._framing import FrameReader, frame
from beam_lsp.errors import BeamLspError
from beam_lsp.jsonrpc import JsonRpcPeer, decode_message, encode_message
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio
P = Position


class _Send(ByteSendStream):
    def __init__(self, inner: MemoryObjectSendStream[bytes]) -> None:
        self.inner = inner

    async def send(self, item: bytes) -> None:
        await self.inner.send(item)

    async def send_eof(self) -> None:
        await self.inner.aclose()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Receive(ByteReceiveStream):
    def __init__(self, inner: MemoryObjectReceiveStream[bytes]) -> None:
        self.inner = inner

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


_open_pipes: list[tuple[_Send, _Receive]] = []


def _pipe() -> tuple[_Send, _Receive]:
    send, receive = anyio.create_memory_object_stream[bytes](100)
    _open_pipes.append((_Send(send), _Receive(receive)))
    return _open_pipes[-1]


@pytest.fixture(autouse=True)
def _close_pipes() -> Iterator[None]:
    yield
    while _open_pipes:
        send, receive = _open_pipes.pop()
        send.inner.close()
        receive.inner.close()


class Wire:
    """The scripted other end of one peer: raw frames in, decoded messages out."""

    def __init__(self, peer: JsonRpcPeer, to_peer: _Send, from_peer: _Receive) -> None:
        self.peer = peer
        self.notifications: list[tuple[str, Any]] = []
        self.to_peer = to_peer
        self.from_peer = from_peer
        self._reader = FrameReader(from_peer)
        self.served: BaseException | str | None = "running"

    async def raw(self, body: bytes) -> None:
        await self.to_peer.send(frame(body))

    async def send(self, message: dict[str, Any]) -> None:
        await self.raw(json.dumps(message).encode())

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            return decode_message(await self._reader.receive())

    async def close_output(self) -> None:
        await self.to_peer.aclose()


@asynccontextmanager
async def wired(**kw: Any) -> AsyncIterator[Wire]:
    """A peer serving in a task group, with the `Wire` at its other end."""
    to_peer, peer_in = _pipe()
    peer_out, from_peer = _pipe()
    notifications: list[tuple[str, Any]] = []
    kw.setdefault("redactor", Redactor())
    peer = JsonRpcPeer(peer_out, FrameReader(peer_in), on_notification=lambda m, p: notifications.append((m, p)), **kw)
    wire = Wire(peer, to_peer, from_peer)
    wire.notifications = notifications
    async with anyio.create_task_group() as tg:

        async def serve() -> None:
            wire.served = await peer.serve()

        tg.start_soon(serve)
        yield wire
        tg.cancel_scope.cancel()


async def _settle() -> None:
    """Let every in-process task run until it blocks (all streams here are in memory)."""
    with anyio.fail_after(10):
        await anyio.wait_all_tasks_blocked()


# ---- correlation --------------------------------------------------------------------------------------
async def test_answers_are_matched_to_requests_by_id_in_any_order() -> None:
    async with wired() as wire, anyio.create_task_group() as tg:
        results: dict[str, Any] = {}

        async def ask(name: str) -> None:
            results[name] = await wire.peer.request(name, {"n": name})

        tg.start_soon(ask, "first")
        first = await wire.receive()
        tg.start_soon(ask, "second")
        second = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": second["id"], "result": "two"})
        await wire.send({"jsonrpc": "2.0", "id": first["id"], "result": "one"})
    assert results == {"first": "one", "second": "two"}
    assert first["params"] == {"n": "first"} and first["id"] != second["id"]


async def test_string_and_integer_ids_are_distinct() -> None:
    async with wired() as wire, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def ask() -> None:
            results.append(await wire.peer.request("m"))

        tg.start_soon(ask)
        rid = (await wire.receive())["id"]
        await wire.send({"jsonrpc": "2.0", "id": str(rid), "result": "as a string"})
        await _settle()
        assert results == [] and wire.peer.late_answers_dropped == 1
        await wire.send({"jsonrpc": "2.0", "id": rid, "result": "as an integer"})
    assert results == ["as an integer"] and wire.peer.pending_count == 0


async def test_a_request_from_the_other_side_reusing_a_pending_id_is_answered_not_confused() -> None:
    async with wired() as wire, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def ask() -> None:
            results.append(await wire.peer.request("m"))

        async def configuration(params: Any) -> list[None]:
            return [None] * len(params["items"])

        wire.peer.set_handler("workspace/configuration", configuration)
        tg.start_soon(ask)
        rid = (await wire.receive())["id"]
        await wire.send({"jsonrpc": "2.0", "id": rid, "method": "workspace/configuration", "params": {"items": [1, 2]}})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": rid, "result": [None, None]}
        assert results == []
        await wire.send({"jsonrpc": "2.0", "id": rid, "result": "mine"})
    assert results == ["mine"]


async def test_error_answers_become_typed_errors_with_redacted_text() -> None:
    redactor = Redactor({"A_TOKEN": "tok-123456789"})
    async with wired(redactor=redactor) as wire, anyio.create_task_group() as tg:
        caught: list[BaseException] = []

        async def ask(method: str) -> None:
            try:
                await wire.peer.request(method)
            except ResponseError as exc:
                caught.append(exc)

        for method, error in [
            ("a", {"code": codes.CONTENT_MODIFIED, "message": "changed tok-123456789", "data": ["tok-123456789"]}),
            ("b", {"code": "not a number", "message": 5}),
            ("c", {"code": True, "message": "bool code"}),
        ]:
            tg.start_soon(ask, method)
            rid = (await wire.receive())["id"]
            await wire.send({"jsonrpc": "2.0", "id": rid, "error": error})
            await _settle()
    first, second, third = caught
    assert isinstance(first, ContentModified) and first.code == codes.CONTENT_MODIFIED
    assert first.message == "changed [redacted:A_TOKEN]" and first.data == ["[redacted:A_TOKEN]"]
    assert second.code == codes.INTERNAL_ERROR and second.message == ""  # type: ignore[attr-defined]
    assert third.code == codes.INTERNAL_ERROR  # type: ignore[attr-defined]


# ---- the other side's requests ------------------------------------------------------------------------
async def test_the_other_sides_requests_are_answered_by_handler_or_refused() -> None:
    async def ok(params: Any) -> Any:
        return {"echo": params}

    async def refuse(_params: Any) -> Any:
        raise ResponseError(codes.REQUEST_FAILED, "no")

    async def broken(_params: Any) -> Any:
        raise ServerExited("internal trouble")

    async def buggy(_params: Any) -> Any:
        raise RuntimeError("a bug")

    async with wired() as wire:
        for name, handler in (("ok", ok), ("refuse", refuse), ("broken", broken), ("buggy", buggy)):
            wire.peer.set_handler(name, handler)
        await wire.send({"jsonrpc": "2.0", "id": "s1", "method": "ok", "params": [1]})
        assert (await wire.receive())["result"] == {"echo": [1]}
        await wire.send({"jsonrpc": "2.0", "id": "s2", "method": "refuse"})
        assert (await wire.receive())["error"] == {"code": codes.REQUEST_FAILED, "message": "no"}
        await wire.send({"jsonrpc": "2.0", "id": "s3", "method": "broken"})
        assert (await wire.receive())["error"] == {"code": codes.INTERNAL_ERROR, "message": "internal trouble"}
        await wire.send({"jsonrpc": "2.0", "id": "s4", "method": "buggy"})
        assert (await wire.receive())["error"] == {
            "code": codes.INTERNAL_ERROR,
            "message": "internal error answering buggy",
        }
        await wire.send({"jsonrpc": "2.0", "id": 4, "method": "nobody/handles"})
        reply = await wire.receive()
    assert reply["id"] == 4 and reply["error"]["code"] == codes.METHOD_NOT_FOUND


async def test_a_handler_answer_that_is_not_json_is_an_internal_error_and_the_peer_goes_on() -> None:
    # A caller's handler returning what JSON cannot carry (an lsprotocol object, NaN) must fail that one answer,
    # as a raising handler does, not the task that reads the other side's messages.
    async def unencodable(_params: Any) -> Any:
        return object()

    async def nan(_params: Any) -> Any:
        return {"x": float("nan")}

    async def data(_params: Any) -> Any:
        raise ResponseError(codes.REQUEST_FAILED, "no", {"why": "refused"})

    async with wired() as wire:
        for name, handler in (("unencodable", unencodable), ("nan", nan), ("data", data)):
            wire.peer.set_handler(name, handler)
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "unencodable"})
        first = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "nan"})
        second = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": 3, "method": "data"})
        third = await wire.receive()
    error = {"code": codes.INTERNAL_ERROR, "message": "internal error answering unencodable"}
    assert first == {"jsonrpc": "2.0", "id": 1, "error": error}
    assert second["id"] == 2 and second["error"]["code"] == codes.INTERNAL_ERROR
    assert third["error"] == {"code": codes.REQUEST_FAILED, "message": "no", "data": {"why": "refused"}}


class SlowHandler:
    """A handler that never answers by itself; says when it started and when it was cancelled."""

    def __init__(self) -> None:
        self.started, self.finished = anyio.Event(), anyio.Event()

    async def __call__(self, _params: Any) -> Any:
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.finished.set()

    async def running_for(self, wire: Wire, rid: int) -> None:
        wire.peer.set_handler("slow", self)
        await wire.send({"jsonrpc": "2.0", "id": rid, "method": "slow"})
        with anyio.fail_after(10):
            await self.started.wait()


async def test_a_cancel_from_the_other_side_cancels_the_handler_and_answers_request_cancelled() -> None:
    slow = SlowHandler()
    async with wired() as wire:
        await slow.running_for(wire, 7)
        await wire.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}})
        reply = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}})  # unknown: ignored
        await wire.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": "junk"})
        await _settle()
    assert slow.finished.is_set()
    assert reply == {"jsonrpc": "2.0", "id": 7, "error": {"code": codes.REQUEST_CANCELLED, "message": "cancelled"}}
    assert wire.peer.cancellations_received == 1 and wire.notifications == []


async def test_handlers_still_running_when_reading_stops_are_cancelled() -> None:
    slow = SlowHandler()
    async with wired() as wire:
        await slow.running_for(wire, 1)
        await wire.close_output()
        with anyio.fail_after(10):
            await slow.finished.wait()
        await _settle()
    assert wire.served is None


# ---- our cancellations --------------------------------------------------------------------------------
async def test_an_abandoned_request_sends_cancel_and_its_late_answer_is_dropped() -> None:
    async with wired() as wire:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    await wire.peer.request("slow")

                tg.start_soon(ask)
                rid = (await wire.receive())["id"]
                scope.cancel()
        cancel = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": rid, "result": "too late"})
        await _settle()
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}}
    assert wire.peer.cancellations_sent == 1 and wire.peer.late_answers_dropped == 1 and wire.peer.pending_count == 0


async def test_two_peers_back_to_back_cancel_each_other_both_ways() -> None:
    a_out, b_in = _pipe()
    b_out, a_in = _pipe()
    a = JsonRpcPeer(a_out, FrameReader(a_in), on_notification=lambda m, p: None, redactor=Redactor())
    b = JsonRpcPeer(b_out, FrameReader(b_in), on_notification=lambda m, p: None, redactor=Redactor())
    started = anyio.Event()

    async def slow(_params: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    b.set_handler("slow", slow)
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.serve)
        tg.start_soon(b.serve)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as asking:
                asking.start_soon(a.request, "slow")
                await started.wait()
                asking.cancel_scope.cancel()
            await _settle()
        tg.cancel_scope.cancel()
    assert a.cancellations_sent == 1 and b.cancellations_received == 1 and a.late_answers_dropped == 1


# ---- strict input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","method":"x","method":"y"}',
        b'{"jsonrpc":"2.0","method":"x","params":{"n":NaN}}',
        b"[1,2]",
        b"{not json",
        b'"\xff"',
    ],
)
async def test_a_body_that_is_not_one_strict_json_object_is_skipped_and_counted(body: bytes) -> None:
    async with wired() as wire:
        await wire.raw(body)
        await wire.send({"jsonrpc": "2.0", "method": "after", "params": 1})
        await _settle()
    assert wire.peer.protocol_errors == 1 and wire.notifications == [("after", 1)]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": None, "result": 1},
        {"jsonrpc": "2.0", "id": True, "result": 1},
        {"jsonrpc": "2.0", "id": 1.5, "result": 1},
        {"jsonrpc": "2.0", "result": 1},
        {"jsonrpc": "2.0", "id": [1], "method": "x"},
    ],
)
async def test_messages_with_invalid_ids_are_counted_not_answered(message: dict[str, Any]) -> None:
    async with wired() as wire:
        await wire.send(message)
        await _settle()
    assert wire.peer.protocol_errors == 1 and wire.peer.late_answers_dropped == 0


async def test_a_failing_notification_handler_is_counted_and_reading_goes_on() -> None:
    seen: list[str] = []

    def handler(method: str, _params: Any) -> None:
        if method == "bad":
            raise RuntimeError("boom")
        seen.append(method)

    to_peer, peer_in = _pipe()
    peer_out, _from_peer = _pipe()
    peer = JsonRpcPeer(peer_out, FrameReader(peer_in), on_notification=handler, redactor=Redactor())
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.serve)
        await to_peer.send(encode_message({"jsonrpc": "2.0", "method": "bad"}))
        await to_peer.send(encode_message({"jsonrpc": "2.0", "method": "good"}))
        await _settle()
        tg.cancel_scope.cancel()
    assert peer.protocol_errors == 1 and seen == ["good"]


def test_messages_are_compact_utf8_and_never_carry_nan() -> None:
    assert encode_message({"a": "é"}) == b'Content-Length: 10\r\n\r\n{"a":"\xc3\xa9"}'
    with pytest.raises(ValueError, match="JSON compliant"):
        encode_message({"a": float("nan")})
    with pytest.raises(TransportError, match="strict JSON object"):
        decode_message(b'{"a":1,"a":2}')


# ---- the end of the stream ----------------------------------------------------------------------------
async def test_reading_returns_none_at_the_end_and_the_error_of_broken_framing() -> None:
    async with wired() as wire:
        await wire.close_output()
        await _settle()
    assert wire.served is None
    async with wired() as wire:
        await wire.to_peer.send(b"garbage without a colon\r\n\r\n")
        await _settle()
    assert isinstance(wire.served, TransportError)


async def test_closing_fails_every_pending_request_at_once_and_the_first_error_wins() -> None:
    first, second = ServerExited("first"), ServerExited("second")
    caught: list[BaseException] = []
    async with wired() as wire, anyio.create_task_group() as tg:

        async def ask() -> None:
            try:
                await wire.peer.request("m")
            except ServerExited as exc:
                caught.append(exc)

        tg.start_soon(ask)
        tg.start_soon(ask)
        await wire.receive()
        await wire.receive()
        wire.peer.close(first)
        wire.peer.close(second)
    assert caught == [first, first] and wire.peer.closed is first
    with pytest.raises(ServerExited) as info:
        await wire.peer.request("later")
    assert info.value is first
    with pytest.raises(ServerExited):
        await wire.peer.notify("later")


async def test_a_broken_output_stream_raises_server_exited_and_closes_the_peer() -> None:
    async with wired() as wire, anyio.create_task_group() as tg:
        caught: list[BaseException] = []

        async def ask() -> None:
            try:
                await wire.peer.request("pending")
            except BeamLspError as exc:
                caught.append(exc)

        tg.start_soon(ask)
        await wire.receive()
        await wire.from_peer.aclose()  # the other side stops reading
        with pytest.raises(ServerExited, match="broke while writing") as info:
            await wire.peer.notify("x")
    assert wire.peer.closed is info.value and caught == [info.value]
    assert isinstance(info.value.__cause__, anyio.BrokenResourceError)


async def test_a_closed_output_stream_uses_the_error_on_lost_gives() -> None:
    given = ServerExited("from the owner", returncode=9)
    seen: list[BaseException] = []

    async def on_lost(exc: BaseException) -> ServerExited:
        seen.append(exc)
        return given

    async with wired(on_lost=on_lost) as wire:
        await wire.peer._send.aclose()  # our own side was closed
        with pytest.raises(ServerExited) as info:
            await wire.peer.request("m")
    assert info.value is given and wire.peer.closed is given
    assert len(seen) == 1 and isinstance(seen[0], anyio.ClosedResourceError)


async def test_an_answer_to_a_request_of_a_closed_peer_is_not_written() -> None:
    async def ok(_params: Any) -> Any:
        return 1

    async with wired() as wire:
        wire.peer.set_handler("ok", ok)
        wire.peer.close(ServerExited("gone"))
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "ok"})
        await _settle()
        with pytest.raises(anyio.WouldBlock):
            wire.from_peer.inner.receive_nowait()


# ---- through the client and the fake Lean server ------------------------------------------------------
async def _opened(client: LeanClient, tmp_path: Path) -> str:
    uri = path_to_uri(tmp_path / "A.lean")
    await client.open(uri, "theorem x : True := trivial\n")
    return uri


async def test_cancelled_requests_send_cancel_and_drop_late_answers(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"late_answer": ["textDocument/hover"]}), cwd=tmp_path) as client:
        uri = await _opened(client, tmp_path)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.hover, uri, P(line=0, character=8))
                while client.stats().pending == 0:
                    await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
            # The late answer arrives after our cancel; it must be dropped, not mistaken for another reply.
            assert (await client.sync(uri)).complete
            while client.stats().late_answers_dropped == 0:
                await client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        stats = client.stats()
        assert stats.cancellations_sent == 1 and stats.late_answers_dropped == 1 and stats.pending == 0


async def test_server_side_cancellation_and_content_modified_map_to_typed_errors(tmp_path: Path) -> None:
    config: dict[str, object] = {
        "content_modified": ["textDocument/definition"],
        "stall": ["textDocument/hover"],
        "ignore_cancel": [],
    }
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = await _opened(client, tmp_path)
        with anyio.fail_after(10):
            with pytest.raises(ContentModified) as info:
                await client.definition(uri, P(line=0, character=8))
            assert info.value.code == codes.CONTENT_MODIFIED and info.value.message == "File changed."
            with pytest.raises(ResponseError) as unknown:
                await client.request("$/lean/noSuchMethod", {})
            assert unknown.value.code == codes.METHOD_NOT_FOUND


async def test_lean_answering_cancel_with_request_cancelled_is_a_typed_error(tmp_path: Path) -> None:
    # Lean answers a cancelled request with -32800; a cancel sent by someone else surfaces as RequestCancelled.
    async with LeanClient.start(fake_cmd({"stall": ["textDocument/hover"], "ignore_cancel": []}), cwd=tmp_path) as c:
        uri = await _opened(c, tmp_path)
        caught: list[RequestCancelled] = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    try:
                        await c.hover(uri, P(line=0, character=8))
                    except RequestCancelled as exc:
                        caught.append(exc)

                tg.start_soon(ask)
                while c.stats().pending == 0:
                    await anyio.wait_all_tasks_blocked()
                await c._rpc.notify("$/cancelRequest", {"id": c._rpc.last_request_id})
        assert caught and caught[0].code == codes.REQUEST_CANCELLED


async def test_an_undecodable_message_is_skipped_and_counted(tmp_path: Path) -> None:
    config: dict[str, object] = {"malformed": {"on": "textDocument/hover", "kind": "bad_json", "then": "continue"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = await _opened(client, tmp_path)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.hover, uri, P(line=0, character=8))  # its answer is the malformed frame
                while client.stats().protocol_errors == 0:
                    await client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
                tg.cancel_scope.cancel()
            assert (await client.sync(uri)).complete
        assert client.stats().protocol_errors == 1 and client.exited is None


async def test_server_requests_with_colliding_ids_are_answered_and_never_confused(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"inlay_refresh": 3}), cwd=tmp_path) as client:
        uris = []
        for i in range(3):
            uri = path_to_uri(tmp_path / f"F{i}.lean")
            await client.open(uri, f"theorem x{i} : True := trivial\n")
            uris.append(uri)
        with anyio.fail_after(10):
            for uri in uris:
                assert (await client.sync(uri)).complete
                hover = await client.hover(uri, P(line=0, character=8))
                assert hover is not None
        assert client.stats().late_answers_dropped == 0


# ---- bodies taken before decoding ----------------------------------------------------------------------
async def test_a_body_handler_takes_bodies_before_they_are_decoded_and_its_failures_are_counted() -> None:
    taken: list[bytes] = []

    def on_body(body: bytes) -> bool:
        if body.startswith(b"boom"):
            raise RuntimeError("boom")
        if body.startswith(b"{not json, but mine"):
            taken.append(body)
            return True
        return False

    async with wired(on_body=on_body) as wire:
        await wire.raw(b"{not json, but mine}")  # taken: never decoded, so no protocol error
        await wire.raw(b"boom")  # the handler fails (counted), then the body is decoded (and fails, counted)
        await wire.send({"jsonrpc": "2.0", "method": "after", "params": 1})  # not taken: decoded as usual
        await _settle()
    assert taken == [b"{not json, but mine}"]
    assert wire.peer.protocol_errors == 2 and wire.notifications == [("after", 1)]
