"""Self-checks for the scripted fake Lean server (tests/support/fake_lean.py), driven over real pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_lean.py"
URI = "file:///proj/Demo/Test.lean"
TEXT = "prelude\n\ntheorem t (p : Prop) (hp : p) : p := by\n  exact hp\n\ndef bad : Nat := ERROR_HERE\n"
TIMEOUT = 30.0  # generous: under a loaded 2-core CI machine a cold Python start alone can take seconds

JSON = dict[str, Any]


class Client:
    """A small blocking framed-LSP client over the fake's pipes; all waits are bounded."""

    def __init__(self, config: JSON | None = None, env: dict[str, str] | None = None) -> None:
        args = [sys.executable, str(FAKE)]
        if config is not None:
            args += ["--config", json.dumps(config)]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.raw = bytearray()
        self.pos = 0
        self.msgs: list[JSON] = []
        self.taken: set[int] = set()
        self.eof = False
        self.cond = threading.Condition()
        self.next_id = 1
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:  # the fixture closed the pipe during teardown
                chunk = b""
            with self.cond:
                if not chunk:
                    self.eof = True
                else:
                    self.raw += chunk
                self.cond.notify_all()
            if not chunk:
                return

    def _parse(self) -> None:
        while True:
            head_end = self.raw.find(b"\r\n\r\n", self.pos)
            if head_end < 0:
                return
            headers = bytes(self.raw[self.pos : head_end]).decode("ascii").split("\r\n")
            length = next(int(h.split(":")[1]) for h in headers if h.lower().startswith("content-length"))
            start = head_end + 4
            if len(self.raw) < start + length:
                return
            self.msgs.append(json.loads(self.raw[start : start + length].decode("utf-8")))
            self.pos = start + length

    def send(self, msg: JSON) -> None:
        body = json.dumps(msg).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params if params is not None else {}})

    def request(self, method: str, params: Any = None) -> int:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def wait_for(self, pred: Callable[[JSON], bool], timeout: float = TIMEOUT) -> JSON:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                self._parse()
                for i, m in enumerate(self.msgs):
                    if i not in self.taken and pred(m):
                        self.taken.add(i)
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or (self.eof and not self.cond.wait(0)):
                    raise AssertionError(f"no matching message; got {self.msgs}{self._exit_report()}")
                self.cond.wait(left)

    def _exit_report(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        err = self.proc.stderr.read().decode("utf-8", "replace")[-2000:]
        return f"; the fake exited with {self.proc.returncode}, stderr:\n{err}"

    def response(self, rid: Any, timeout: float = TIMEOUT) -> JSON:
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def call(self, method: str, params: Any = None) -> JSON:
        return self.response(self.request(method, params))

    def nothing_for(self, pred: Callable[[JSON], bool], seconds: float) -> None:
        with pytest.raises(AssertionError):
            self.wait_for(pred, seconds)

    def handshake(self) -> JSON:
        init = self.call("initialize", {"processId": None, "rootUri": "file:///proj", "capabilities": {}})
        self.notify("initialized")
        reg = self.wait_for(lambda m: m.get("method") == "client/registerCapability")
        self.send({"jsonrpc": "2.0", "id": reg["id"], "result": None})
        return init

    def open(self, text: str = TEXT, uri: str = URI) -> None:
        doc = {"uri": uri, "languageId": "lean4", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": doc})

    def wait_diagnostics(self, version: int = 1, uri: str = URI) -> JSON:
        return self.call("textDocument/waitForDiagnostics", {"uri": uri, "version": version})

    def stderr_after_exit(self) -> tuple[int, str]:
        code = self.proc.wait(TIMEOUT)
        self.pump.join(TIMEOUT)  # everything the fake wrote before exiting is in `raw` (the reader is a thread)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read().decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)
        # The reader must be done before its pipe closes: a closed fd number is reused by the next test's
        # pipe, and a reader still looping on the old number would steal the next fake's messages.
        self.pump.join(TIMEOUT)
        for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if s is not None:
                s.close()


def at(line: int, character: int, uri: str = URI) -> JSON:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def method_is(name: str) -> Callable[[JSON], bool]:
    return lambda m: m.get("method") == name


@pytest.fixture
def make() -> Iterator[Callable[..., Client]]:
    clients: list[Client] = []

    def factory(config: JSON | None = None, env: dict[str, str] | None = None) -> Client:
        c = Client(config, env)
        clients.append(c)
        return c

    yield factory
    for c in clients:
        c.close()


def test_initialize_answers_lean_capabilities_and_initialized_triggers_register_lean_watcher(
    make: Callable[..., Client],
) -> None:
    c = make()
    init = c.call("initialize", {"processId": None, "rootUri": "file:///proj", "capabilities": {}})
    caps = init["result"]["capabilities"]
    assert init["result"]["serverInfo"] == {"name": "Lean 4 Server", "version": "0.3.0"}
    assert caps["textDocumentSync"]["change"] == 2 and caps["hoverProvider"] is True
    assert "diagnosticProvider" not in caps
    c.notify("initialized")
    reg = c.wait_for(method_is("client/registerCapability"))
    assert reg["id"] == "register_lean_watcher"
    assert reg["params"]["registrations"][0] == {
        "id": "lean_watcher",
        "method": "workspace/didChangeWatchedFiles",
        "registerOptions": {"watchers": [{"globPattern": "**/*.lean"}, {"globPattern": "**/*.ilean"}]},
    }
    c.send({"jsonrpc": "2.0", "id": reg["id"], "result": None})
    assert c.call("shutdown")["result"] is None


def test_did_open_sends_progress_empty_then_marker_diagnostics_then_done_progress_before_wait_answers(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.open(TEXT + "theorem s : True := sorry\n-- WARN_HERE\n")
    rid = c.request("textDocument/waitForDiagnostics", {"uri": URI, "version": 1})
    assert c.response(rid)["result"] == {}
    doc_msgs = [
        m
        for m in c.msgs
        if m.get("method") in ("$/lean/fileProgress", "textDocument/publishDiagnostics") or m.get("id") == rid
    ]
    kinds = [m.get("method", "response") for m in doc_msgs]
    assert kinds == [
        "$/lean/fileProgress",
        "textDocument/publishDiagnostics",
        "textDocument/publishDiagnostics",
        "$/lean/fileProgress",
        "response",
    ]
    first, empty, diags, done = (m["params"] for m in doc_msgs[:4])
    assert first == {
        "processing": [
            {"kind": 1, "range": {"end": {"character": 0, "line": 8}, "start": {"character": 0, "line": 0}}}
        ],
        "textDocument": {"uri": URI, "version": 1},
    }
    assert empty == {"diagnostics": [], "uri": URI, "version": 1}
    assert done == {"processing": [], "textDocument": {"uri": URI, "version": 1}}
    err, sorry, warn = diags["diagnostics"]
    assert err == {
        "fullRange": {"end": {"character": 27, "line": 5}, "start": {"character": 17, "line": 5}},
        "message": "unknown identifier 'ERROR_HERE'",
        "range": {"end": {"character": 27, "line": 5}, "start": {"character": 17, "line": 5}},
        "severity": 1,
        "source": "Lean 4",
    }
    assert (sorry["severity"], sorry["message"]) == (2, "declaration uses 'sorry'")
    assert (warn["severity"], warn["tags"]) == (2, [1])


def test_wait_for_diagnostics_for_a_future_version_answers_only_after_that_version_is_done(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.open()
    c.wait_diagnostics(1)
    rid = c.request("textDocument/waitForDiagnostics", {"uri": URI, "version": 2})
    c.nothing_for(lambda m: m.get("id") == rid and "method" not in m, 0.2)
    change = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": "prelude\n"}]}
    c.notify("textDocument/didChange", change)
    answer = c.response(rid)
    assert answer["result"] == {}
    done_v2 = [
        i
        for i, m in enumerate(c.msgs)
        if m.get("method") == "$/lean/fileProgress"
        and m["params"] == {"processing": [], "textDocument": {"uri": URI, "version": 2}}
    ]
    assert done_v2 and done_v2[0] < c.msgs.index(answer)


def test_inlay_hint_refresh_is_a_server_request_whose_integer_id_collides_with_a_client_id(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.call("textDocument/hover", at(0, 0))  # id 2 (closed file, error) - the client's latest id
    c.open()
    refresh = c.wait_for(method_is("workspace/inlayHint/refresh"))
    assert refresh == {"id": 2, "jsonrpc": "2.0", "method": "workspace/inlayHint/refresh"}
    c.send({"jsonrpc": "2.0", "id": 2, "result": None})
    assert c.wait_diagnostics()["result"] == {}


def test_hover_answers_markdown_for_the_word_at_the_position_and_null_on_blank_or_missing_lines(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.open()
    hover = c.call("textDocument/hover", at(2, 8))["result"]
    assert hover == {
        "contents": {"kind": "markdown", "value": "```lean\nt\n```"},
        "range": {"end": {"character": 9, "line": 2}, "start": {"character": 8, "line": 2}},
    }
    assert c.call("textDocument/hover", at(1, 0))["result"] is None
    assert c.call("textDocument/hover", at(999, 0))["result"] is None


def test_plain_goal_answers_on_lines_with_by_and_plain_term_goal_is_null(make: Callable[..., Client]) -> None:
    c = make()
    c.handshake()
    c.open()
    assert c.call("$/lean/plainGoal", at(2, 40))["result"] == {
        "goals": ["⊢ True"],
        "rendered": "```lean\n⊢ True\n```",
    }
    assert c.call("$/lean/plainGoal", at(0, 0))["result"] is None
    assert c.call("$/lean/plainTermGoal", at(2, 40))["result"] is None


def test_request_for_a_closed_document_fails_with_content_modified_closed_file(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    resp = c.call("textDocument/hover", at(0, 0, "file:///proj/Nope.lean"))
    assert resp == {
        "error": {
            "code": -32801,
            "message": "Cannot process request to closed file 'file:///proj/Nope.lean'",
        },
        "id": resp["id"],
        "jsonrpc": "2.0",
    }


def test_unknown_method_fails_with_method_not_found(make: Callable[..., Client]) -> None:
    c = make()
    c.handshake()
    resp = c.call("$/lean/noSuchThing", {})
    assert resp["error"] == {"code": -32601, "message": "No request handler found for '$/lean/noSuchThing'"}


def test_did_close_publishes_empty_diagnostics_for_the_last_version_and_closes_the_document(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.open()
    c.wait_diagnostics()
    c.notify("textDocument/didSave", {"textDocument": {"uri": URI}})
    change = {"textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"text": "prelude\n"}]}
    c.notify("textDocument/didChange", change)
    c.wait_diagnostics(3)
    c.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
    assert c.call("textDocument/hover", at(0, 0))["error"]["code"] == -32801
    last = [m for m in c.msgs if m.get("method") == "textDocument/publishDiagnostics"][-1]
    assert last["params"] == {"diagnostics": [], "uri": URI, "version": 3}


def test_shutdown_answers_null_rejects_later_requests_and_exit_ends_with_code_0(
    make: Callable[..., Client],
) -> None:
    c = make()
    c.handshake()
    c.open()
    c.wait_diagnostics()
    assert c.call("shutdown")["result"] is None
    # Like Lean 4.35: every open file's diagnostics are cleared before the answer.
    last = [m for m in c.msgs if m.get("method") == "textDocument/publishDiagnostics"][-1]
    assert last["params"] == {"diagnostics": [], "uri": URI, "version": 1}
    assert c.call("textDocument/hover", at(0, 0))["error"] == {
        "code": -32600,
        "message": "Request received after 'shutdown' request.",
    }
    c.notify("exit")
    assert c.proc.wait(TIMEOUT) == 0


def test_crash_on_kills_the_whole_server_after_the_delay_with_stderr_text(
    make: Callable[..., Client],
) -> None:
    c = make({"crash_on": {"method": "textDocument/hover", "exit_code": 137, "after_ms": 100}})
    c.handshake()
    c.open()
    start = time.monotonic()
    c.request("textDocument/hover", at(0, 0))
    code, err = c.stderr_after_exit()
    assert code == 137 and time.monotonic() - start >= 0.1
    assert "INTERNAL PANIC" in err


def test_worker_crash_fails_pending_requests_with_32902_then_kind_2_progress_and_recovers_on_did_change(
    make: Callable[..., Client],
) -> None:
    c = make({"worker_crash_on": "textDocument/hover", "stall": ["textDocument/documentSymbol"]})
    c.handshake()
    c.open()
    c.wait_diagnostics()
    stalled = c.request("textDocument/documentSymbol", {"textDocument": {"uri": URI}})
    trigger = c.request("textDocument/hover", at(2, 8))
    message = f"Server process for {URI} crashed, likely due to a stack overflow or a bug."
    for rid in (stalled, trigger):
        assert c.response(rid)["error"] == {"code": -32902, "message": message}
    fatal = c.wait_for(
        lambda m: m.get("method") == "$/lean/fileProgress" and [p["kind"] for p in m["params"]["processing"]] == [2]
    )
    assert fatal["params"] == {
        "processing": [
            {"kind": 2, "range": {"end": {"character": 0, "line": 6}, "start": {"character": 0, "line": 0}}}
        ],
        "textDocument": {"uri": URI, "version": 1},
    }
    errors = [i for i, m in enumerate(c.msgs) if m.get("id") in (stalled, trigger) and "error" in m]
    assert len(errors) == 2 and max(errors) < c.msgs.index(fatal)


def test_a_request_to_a_crashed_file_gets_no_answer_until_did_change_restarts_it(
    make: Callable[..., Client],
) -> None:
    c = make({"worker_crash_on": "textDocument/hover"})
    c.handshake()
    c.open()
    c.wait_diagnostics()
    assert c.call("textDocument/hover", at(2, 8))["error"]["code"] == -32902
    queued = c.request("textDocument/hover", at(2, 8))
    c.nothing_for(lambda m: m.get("id") == queued and "method" not in m, 0.2)
    change = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": TEXT}]}
    c.notify("textDocument/didChange", change)
    assert c.response(queued)["result"]["contents"]["value"] == "```lean\nt\n```"
    assert c.call("textDocument/hover", at(2, 8))["result"] is not None


def test_stalled_request_is_never_answered_until_cancelled_then_fails_with_32800_empty_message(
    make: Callable[..., Client],
) -> None:
    c = make({"stall": ["textDocument/hover"]})
    c.handshake()
    c.open()
    rid = c.request("textDocument/hover", at(2, 8))
    c.nothing_for(lambda m: m.get("id") == rid and "method" not in m, 0.2)
    c.notify("$/cancelRequest", {"id": rid})
    assert c.response(rid)["error"] == {"code": -32800, "message": ""}


def test_cancel_of_wait_for_diagnostics_is_ignored_by_default_like_real_lean(
    make: Callable[..., Client],
) -> None:
    c = make({"elab_ms": 300})
    c.handshake()
    c.open()
    rid = c.request("textDocument/waitForDiagnostics", {"uri": URI, "version": 1})
    c.notify("$/cancelRequest", {"id": rid})
    assert c.response(rid)["result"] == {}  # answered normally when elaboration ends, no -32800


def test_ignore_cancel_keeps_a_stalled_request_pending(make: Callable[..., Client]) -> None:
    c = make({"stall": ["textDocument/hover"], "ignore_cancel": ["textDocument/hover"]})
    c.handshake()
    c.open()
    rid = c.request("textDocument/hover", at(2, 8))
    c.notify("$/cancelRequest", {"id": rid})
    c.nothing_for(lambda m: m.get("id") == rid and "method" not in m, 0.3)


def test_delay_ms_delays_the_answer_and_cancel_during_the_delay_gives_32800(
    make: Callable[..., Client],
) -> None:
    c = make({"delay_ms": {"textDocument/hover": 200}})
    c.handshake()
    c.open()
    start = time.monotonic()
    assert c.call("textDocument/hover", at(2, 8))["result"] is not None
    assert time.monotonic() - start >= 0.2
    rid = c.request("textDocument/hover", at(2, 8))
    c.notify("$/cancelRequest", {"id": rid})
    assert c.response(rid)["error"]["code"] == -32800
    c.nothing_for(lambda m: m.get("id") == rid and "method" not in m, 0.3)


def test_content_modified_fails_the_request_with_file_changed(make: Callable[..., Client]) -> None:
    c = make({"content_modified": ["textDocument/hover"]})
    c.handshake()
    c.open()
    assert c.call("textDocument/hover", at(2, 8))["error"] == {"code": -32801, "message": "File changed."}


def test_late_answer_sends_the_normal_result_after_the_request_was_cancelled(
    make: Callable[..., Client],
) -> None:
    c = make({"late_answer": {"textDocument/hover": 100}})
    c.handshake()
    c.open()
    rid = c.request("textDocument/hover", at(2, 8))
    c.nothing_for(lambda m: m.get("id") == rid and "method" not in m, 0.2)
    c.notify("$/cancelRequest", {"id": rid})
    assert c.response(rid)["result"]["contents"]["kind"] == "markdown"


def _raw_after(c: Client, marker: bytes, timeout: float = TIMEOUT) -> bytes:
    deadline = time.monotonic() + timeout
    with c.cond:
        while marker not in c.raw and time.monotonic() < deadline:
            c.cond.wait(0.05)
        idx = c.raw.find(marker)
        assert idx >= 0, bytes(c.raw)
        return bytes(c.raw[idx:])


def test_malformed_bad_json_sends_a_valid_header_with_an_invalid_body_then_keeps_serving(
    make: Callable[..., Client],
) -> None:
    c = make({"malformed": {"on": "textDocument/hover", "kind": "bad_json"}})
    c.handshake()
    before = len(c.raw)
    c.request("textDocument/hover", at(0, 0))
    c.request("shutdown")  # still served after the bad frame
    c.notify("exit")
    assert c.proc.wait(TIMEOUT) == 0
    with c.cond:
        assert c.cond.wait_for(lambda: c.eof, TIMEOUT)
        frames = bytes(c.raw[before:])
    head, _, rest = frames.partition(b"\r\n\r\n")
    assert head.startswith(b"Content-Length: ")
    length = int(head.split(b": ")[1])
    with pytest.raises(ValueError):
        json.loads(rest[:length])
    _, _, body2 = rest[length:].partition(b"\r\n\r\n")
    assert json.loads(body2) == {"id": 3, "jsonrpc": "2.0", "result": None}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("no_content_length", b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{"),
        ("garbage_header", b"\x00\xff\xfegarbage header without colon\r\n\r\n"),
        ("oversized", b"Content-Length: 209715200\r\n\r\n{"),
    ],
)
def test_malformed_frames_are_emitted_on_the_trigger_and_then_the_server_goes_silent(
    make: Callable[..., Client], kind: str, expected: bytes
) -> None:
    c = make({"malformed": {"on": "textDocument/hover", "kind": kind, "send_bytes": 1000}})
    c.handshake()
    before = len(c.raw)
    c.request("textDocument/hover", at(0, 0))
    tail = _raw_after(c, expected)
    assert c.raw.find(expected) >= before
    c.request("textDocument/hover", at(0, 0))  # muted: nothing more is written
    assert c.proc.poll() is None  # the server hangs on rather than exiting
    assert c.proc.stdin is not None
    c.proc.stdin.close()  # the fake handles every message it read, then exits at end of input ...
    assert c.proc.wait(TIMEOUT) == 0
    with c.cond:  # ... so once its output is at end of stream, everything it ever wrote is in c.raw
        assert c.cond.wait_for(lambda: c.eof, TIMEOUT)
        assert len(c.raw) - c.raw.find(expected) == len(tail)
    if kind == "oversized":
        assert len(tail) == len(expected) - 1 + len(b'{"jsonrpc":"2.0","x":"') + 1000


def test_errors_inject_and_stderr_on_start_script_answers_extra_messages_and_stderr(
    make: Callable[..., Client],
) -> None:
    error = {"code": -32603, "message": "scripted", "data": {"k": [1]}}
    log = {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "injected"}}
    raw = '{"jsonrpc":"2.0","method":"x/raw","params":{"a":1,"a":2}}'
    config = {
        "errors": {"textDocument/hover": error},
        "inject": {"on": "workspace/symbol", "send": [log, raw]},
        "stderr_on_start": "hello from the fake",
    }
    c = make(config)
    c.handshake()
    assert c.call("textDocument/hover", at(0, 0))["error"] == error
    rid = c.request("workspace/symbol", {"query": ""})
    c.response(rid)
    methods = [m.get("method") for m in c.msgs]
    assert methods.index("window/logMessage") < methods.index("x/raw")  # both before the answer
    c.request("workspace/symbol", {"query": ""})  # "times" defaults to 1: nothing injected again
    c.response(rid + 1)
    assert methods.count("x/raw") == [m.get("method") for m in c.msgs].count("x/raw") == 1
    c.notify("exit")
    _, err = c.stderr_after_exit()
    assert err.startswith("hello from the fake\n")


def test_malformed_raw_writes_its_data_as_it_is(make: Callable[..., Client]) -> None:
    c = make({"malformed": {"on": "textDocument/hover", "kind": "raw", "data": "junk\r\n\r\n", "then": "close"}})
    c.handshake()
    c.request("textDocument/hover", at(0, 0))
    code, _ = c.stderr_after_exit()
    assert code == 1 and c.raw.endswith(b"junk\r\n\r\n")


def test_malformed_then_close_exits_with_the_configured_code(make: Callable[..., Client]) -> None:
    c = make({"malformed": {"on": "initialized", "kind": "oversized", "then": "close", "exit_code": 3}})
    c.call("initialize", {"capabilities": {}})
    c.notify("initialized")
    code, _ = c.stderr_after_exit()
    assert code == 3
    assert b"Content-Length: 209715200\r\n\r\n" in c.raw


def test_log_env_reveals_env_values_on_stderr_in_log_message_and_in_a_diagnostic(
    make: Callable[..., Client],
) -> None:
    secret = "s3cr3t-token-value"
    cfg = {"log_env": {"vars": ["BEAM_TEST_SECRET"], "diagnostic_var": "BEAM_TEST_SECRET"}}
    c = make(cfg, env={"BEAM_TEST_SECRET": secret})
    c.handshake()
    log_msg = c.wait_for(method_is("window/logMessage"))
    assert log_msg["params"]["type"] == 3 and secret in log_msg["params"]["message"]
    c.open("prelude\n")
    c.wait_diagnostics()
    diags = [m for m in c.msgs if m.get("method") == "textDocument/publishDiagnostics"][-1]["params"]["diagnostics"]
    assert any(secret in d["message"] for d in diags)
    c.notify("exit")
    _, err = c.stderr_after_exit()
    assert secret in err


def test_explicit_diagnostics_config_overrides_the_marker_rule_for_matching_uris(
    make: Callable[..., Client], tmp_path: Path
) -> None:
    cfg = {"diagnostics": {"Test.lean": [{"line": 2, "message": "custom", "severity": 2}]}}
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(cfg), encoding="utf-8")
    c = make()
    c.close()
    c = make(None, env={"FAKE_LEAN_CONFIG": "@" + str(cfg_file)})
    c.handshake()
    c.open()
    c.wait_diagnostics()
    diags = [m for m in c.msgs if m.get("method") == "textDocument/publishDiagnostics"][-1]["params"]["diagnostics"]
    line2 = {"end": {"character": 39, "line": 2}, "start": {"character": 0, "line": 2}}
    assert diags == [{"fullRange": line2, "message": "custom", "range": line2, "severity": 2, "source": "Lean 4"}]
