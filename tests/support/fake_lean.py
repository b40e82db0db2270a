"""A scripted fake Lean 4 language server for the test suite's `fake` lane.

Run as ``python tests/support/fake_lean.py [--config JSON_OR_@FILE]`` (stdlib only, Python >= 3.10).
Without ``--config`` the JSON in the environment variable ``FAKE_LEAN_CONFIG`` is used, if set. Unknown
command-line arguments (``--server``, ``-Dserver.reportDelayMs=0``, ...) are accepted and ignored.
It speaks LSP with ``Content-Length`` framing on stdin/stdout (compact JSON, sorted keys, UTF-8, like
Lean) and writes its own logs only to stderr. Message shapes are copied from real Lean 4.35 traffic
(``/work/shared/spec/lean435-captures.md``) and the wire notes (``lean-wire.md`` §1-§4).

Default behaviour (a faithful mini Lean server)
-----------------------------------------------
* ``initialize`` -> ``{"capabilities": <Lean 4.35 set>, "serverInfo": {"name": "Lean 4 Server",
  "version": "0.3.0"}}``. ``initialized`` -> server-to-client request ``client/registerCapability`` with id
  ``"register_lean_watcher"`` (the lean_watcher registration for ``**/*.lean`` and ``**/*.ilean``).
  Client responses to server requests are accepted (and logged to stderr when ``verbose``).
* ``textDocument/didOpen`` / ``didChange`` (full text or range edits) store text and version, then send
  ``$/lean/fileProgress`` ``processing: [{range: whole file, kind: 1}]``, ``publishDiagnostics`` with
  ``[]`` for that version, then (after ``elab_ms``) ``publishDiagnostics`` with the scripted diagnostics
  (only when there are any), then ``$/lean/fileProgress`` ``processing: []`` and, ``inlay_refresh`` times,
  a ``workspace/inlayHint/refresh`` request (integer id, no params) whose id deliberately equals the
  client's most recent integer request id when that is ahead of the server's own counter (the real
  server's ids share the number space with the client's).
* Diagnostics marker rule (per line, 0-based; disable with ``"markers": false``); every diagnostic has
  keys ``source: "Lean 4"``, ``severity``, ``range``, ``fullRange``, ``message`` (+ ``tags``/``leanTags``):

  - ``ERROR_HERE`` -> severity 1 over the marker, message ``unknown identifier 'ERROR_HERE'``;
  - ``WARN_HERE`` -> severity 2 over the marker, message ``unused variable `WARN_HERE` ...``, ``tags: [1]``;
  - word ``sorry`` -> severity 2 over the word, message ``declaration uses 'sorry'``;
  - ``GOALS_HERE`` -> severity 1, message ``unsolved goals\\n⊢ True``, ``leanTags: [1]``.

  Messages can be overridden with ``marker_messages``. The ``diagnostics`` key replaces the rule per file.
* ``textDocument/waitForDiagnostics {uri, version}`` -> ``{}`` once that version's final progress was sent
  (waits if the version has not arrived yet). ``didSave`` accepted; ``didClose`` fails the file's pending
  requests with -32801 ``The file worker for <uri> has been terminated.`` and publishes ``[]`` for the last
  version.
* ``textDocument/hover`` -> ``{"contents": {"kind": "markdown", "value": "```lean\\n<word>\\n```"},
  "range": <word range>}`` for the identifier at the position, else ``null``.
* ``$/lean/plainGoal`` -> ``{"goals": [goal], "rendered": "```lean\\n<goal>\\n```"}`` on lines containing
  the word ``goal_trigger`` (default ``by``), else ``null``. ``$/lean/plainTermGoal`` -> ``null``, or with
  ``term_goal`` set ``{"goal": term_goal, "range": <word range>}`` for the identifier at the position.
* Lean RPC only with ``"rpc": true`` (otherwise these are unknown methods): ``$/lean/rpc/connect {uri}`` ->
  ``{"sessionId": "<n>"}`` (a new numeric string per connect; the sessions of a file die with its worker:
  crash or ``didClose``). ``$/lean/rpc/call`` with an unknown session -> -32900 ``Outdated RPC session``;
  with method ``Lean.Widget.getInteractiveGoals`` -> ``{"goals": [{"goalPrefix": "⊢ ", "hyps": [], "type":
  {"text": target}}]}`` (the goal text after its last ``⊢ ``) on ``goal_trigger`` lines, else ``null``;
  ``Lean.Widget.getWidgets`` -> ``{"widgets": widgets}``; ``Lean.Widget.getWidgetSource {pos, hash}`` ->
  ``{"sourcetext": <the hash's source in widget_sources>}``, or -32602 ``No widget module with hash <hash>
  registered``; ``Lean.Widget.getInteractiveDiagnostics {lineRange?}`` -> the file's current diagnostics
  (within the range: start inclusive, end exclusive) with each message as ``{"text": message}``;
  other RPC methods -> -32601 ``No RPC method '<method>' found``.
* Other known document requests get neutral answers (definition/references/... ``[]``, documentSymbol
  from ``theorem``/``def``/``lemma`` lines with kind 6, completion ``{"items": [], "isIncomplete": true}``, or
  the ``completions`` setting's items).
* Unknown method -> -32601 ``No request handler found for '<method>'``. Request for a document that is not
  open -> -32801 ``Cannot process request to closed file '<uri>'``.
* ``$/cancelRequest`` for a pending request -> -32800 with message ``""``, except for ``ignore_cancel``
  methods (default: ``textDocument/waitForDiagnostics``, as in real Lean: no answer at all).
* ``shutdown`` -> ``publishDiagnostics`` with ``[]`` for every open document (as Lean 4.35 does), then
  ``null``; later requests -> -32600 ``Request received after 'shutdown' request.``; ``exit`` or stdin EOF ->
  exit code 0.

Config keys (a JSON object; every key is optional)
--------------------------------------------------
``verbose`` (bool, false)
    Log every received message's method/id to stderr.
``elab_ms`` (int, 0)
    Delay between the first progress notification of a version and its diagnostics + final progress.
``inlay_refresh`` (int, 1)
    Number of ``workspace/inlayHint/refresh`` requests sent after each elaboration finishes (0 = none).
``markers`` (bool, true)
    Enable the marker rule above.
``marker_messages`` (object)
    Marker (``ERROR_HERE``, ``WARN_HERE``, ``sorry``, ``GOALS_HERE``) -> message text.
``diagnostics`` (object)
    URI suffix -> list of diagnostics overriding the marker rule for matching files. Each item is a Lean
    diagnostic dict; missing ``source``/``severity``/``fullRange`` default to ``"Lean 4"``/1/``range``;
    the shorthand ``{"line": N, "message": ..., "severity": S}`` spans the whole line N.
``hover`` (object)
    Word -> markdown hover value (default ``"```lean\\n<word>\\n```"``).
``goal_trigger`` (str, "by") / ``goal`` (str, "⊢ True")
    Word that makes ``$/lean/plainGoal`` (and interactive goals) answer on a line, and the goal text.
``rpc`` (bool, false)
    Answer Lean RPC (``$/lean/rpc/connect`` and ``$/lean/rpc/call``) as described above.
``term_goal`` (str, unset)
    What ``$/lean/plainTermGoal`` answers as the goal at an identifier (unset: ``null`` everywhere).
``completions`` (list, [])
    The items ``textDocument/completion`` lists (in this order) at any position, ``isIncomplete: true``.
``widgets`` (list, []) / ``widget_sources`` (object, {})
    The widget instances ``Lean.Widget.getWidgets`` lists, and the source text of each widget hash.
``rpc_outdated`` (int, 0)
    The first N ``$/lean/rpc/call`` requests fail with -32900 ``Outdated RPC session`` and end their session.
``crash_on`` ({"method": M, "exit_code": N = 1, "after_ms": T = 0, "stderr": S?})
    When a message with method M (request or notification) arrives, write S (default: a fake
    ``INTERNAL PANIC`` line) to stderr and exit the whole process with N, after T ms (other messages
    are still served meanwhile). The triggering request is never answered.
``worker_crash_on`` (M, [M...] or {"method": M, "times": K = 1})
    The first K requests with method M (K = -1: every one) crash the "file worker": every pending request
    of that file (the trigger included) gets -32902 ``Server process for <uri> crashed, likely due to a
    stack overflow or a bug.``, then ``$/lean/fileProgress`` ``processing: [{range: whole file, kind: 2}]``.
    Later requests for the file are queued without an answer until the next ``didChange``, which restarts
    elaboration and then answers the queued requests.
``stall`` ([M...])
    Requests with these methods are never answered (until cancelled, unless ``ignore_cancel``).
``ignore_cancel`` ([M...], default ["textDocument/waitForDiagnostics"])
    ``$/cancelRequest`` for these methods is ignored (no -32800; the request stays pending).
``delay_ms`` ({M: T})
    Answer requests with method M only after T ms (cancellable: -32800 instead).
``content_modified`` ([M...])
    Requests with these methods fail with -32801 ``File changed.``.
``late_answer`` ([M...] or {M: T})
    Requests with these methods are held; on ``$/cancelRequest`` the normal result is sent anyway (after
    T ms, default 0) instead of -32800. Never answered if never cancelled.
``malformed`` ({"on": M, "kind": K, "then": W?, "times": N = 1, "declared_length": L?, "send_bytes": B?})
    When a message with method M arrives (the first N times, -1 = always; instead of handling it) write a
    malformed frame of kind K:
    ``bad_json`` (valid header, invalid JSON body), ``no_content_length`` (``Content-Type`` header only,
    then a JSON body), ``garbage_header`` (a header line without a colon and binary junk),
    ``oversized`` (``Content-Length: L`` with L default 209715200 = 200 MiB, followed by only B bytes,
    default 65536), ``raw`` (the text of ``data``, UTF-8, written as it is). Then W: ``continue`` (keep
    serving; default for ``bad_json``), ``hang`` (write nothing more but keep reading until EOF; default
    otherwise) or ``close`` (exit with ``exit_code``, default 1).
``log_env`` ({"vars": [NAME...], "diagnostic_var": NAME?} or [NAME...])
    On ``initialize`` write ``NAME=value`` for each variable to stderr and send a ``window/logMessage``
    (``{"type": 3, "message": ...}``) with the same text (after the initialize result); every elaborated
    file additionally gets an information diagnostic whose message contains the value of
    ``diagnostic_var``.
``server_version`` (str, "0.3.0")
    ``serverInfo.version``.
``stderr_on_start`` (str)
    Written to stderr (plus a newline) as soon as the server starts.
``errors`` ({M: {"code": C, "message": S, "data": D?}})
    Requests with method M (known or not) are answered with this error object.
``inject`` ({"on": M, "send": [item...], "times": N = 1})
    When a message with method M arrives (the first N times, -1 = always), first send each item: an object as
    a JSON message, a string as a raw message body (framed with its Content-Length but otherwise as it is, so
    it may be invalid JSON); then handle the message as usual.
``shutdown_fifo`` (str, a FIFO's path)
    On ``shutdown``, before answering it: write this process's pid and a newline into the FIFO (opening it waits
    for the test to open it for reading), then read the FIFO to its end (opening it waits for the test to open it
    for writing) and only then answer. A test thus knows when the client is stopping Lean and holds it there.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NoReturn

JSON = dict[str, Any]

SEMANTIC_TOKEN_TYPES = [
    "keyword", "variable", "property", "function", "namespace", "type", "class", "enum", "interface",
    "struct", "typeParameter", "parameter", "enumMember", "event", "method", "macro", "modifier", "comment",
    "string", "number", "regexp", "operator", "decorator", "leanSorryLike",
]  # fmt: skip
SEMANTIC_TOKEN_MODIFIERS = [
    "declaration", "definition", "readonly", "static", "deprecated", "abstract", "async", "modification",
    "documentation", "defaultLibrary",
]  # fmt: skip

CAPABILITIES: JSON = {
    "callHierarchyProvider": True,
    "codeActionProvider": {
        "codeActionKinds": ["quickfix", "refactor", "source.organizeImports"],
        "resolveProvider": True,
        "workDoneProgress": False,
    },
    "colorProvider": {"workDoneProgress": False},
    "completionProvider": {"resolveProvider": True, "triggerCharacters": ["."]},
    "declarationProvider": True,
    "definitionProvider": True,
    "documentHighlightProvider": True,
    "documentSymbolProvider": True,
    "experimental": {
        "moduleHierarchyProvider": {},
        "rpcProvider": {"highlightMatchesProvider": {}, "rpcWireFormat": "v1"},
    },
    "foldingRangeProvider": True,
    "hoverProvider": True,
    "inlayHintProvider": {"resolveProvider": False, "workDoneProgress": False},
    "referencesProvider": True,
    "renameProvider": {"prepareProvider": True},
    "semanticTokensProvider": {
        "full": True,
        "legend": {"tokenModifiers": SEMANTIC_TOKEN_MODIFIERS, "tokenTypes": SEMANTIC_TOKEN_TYPES},
        "range": True,
    },
    "textDocumentSync": {
        "change": 2,
        "openClose": True,
        "save": {"includeText": True},
        "willSave": False,
        "willSaveWaitUntil": False,
    },
    "typeDefinitionProvider": True,
    "workspaceSymbolProvider": True,
}

REGISTER_WATCHER_PARAMS: JSON = {
    "registrations": [
        {
            "id": "lean_watcher",
            "method": "workspace/didChangeWatchedFiles",
            "registerOptions": {"watchers": [{"globPattern": "**/*.lean"}, {"globPattern": "**/*.ilean"}]},
        }
    ]
}

DEFAULT_MARKER_MESSAGES = {
    "ERROR_HERE": "unknown identifier 'ERROR_HERE'",
    "WARN_HERE": "unused variable `WARN_HERE`\n\nNote: This linter can be disabled with "
    "`set_option linter.unusedVariables false`",
    "sorry": "declaration uses 'sorry'",
    "GOALS_HERE": "unsolved goals\n⊢ True",
}

# Requests answered by the fake; the value says whether the request is routed to a document.
KNOWN_REQUESTS: dict[str, bool] = {
    "textDocument/waitForDiagnostics": True,
    "textDocument/hover": True,
    "$/lean/plainGoal": True,
    "$/lean/plainTermGoal": True,
    "$/lean/waitForILeans": True,
    "textDocument/definition": True,
    "textDocument/declaration": True,
    "textDocument/typeDefinition": True,
    "textDocument/references": True,
    "textDocument/documentSymbol": True,
    "textDocument/documentHighlight": True,
    "textDocument/foldingRange": True,
    "textDocument/completion": True,
    "textDocument/signatureHelp": True,
    "textDocument/codeAction": True,
    "textDocument/inlayHint": True,
    "textDocument/semanticTokens/full": True,
    "textDocument/semanticTokens/range": True,
    "textDocument/documentColor": True,
    "textDocument/prepareRename": True,
    "$/lean/rpc/connect": True,
    "$/lean/rpc/call": True,
    "workspace/symbol": False,
    "codeAction/resolve": False,
    "completionItem/resolve": False,
}

ERR_INVALID_REQUEST = -32600
ERR_METHOD_NOT_FOUND = -32601
ERR_INVALID_PARAMS = -32602
ERR_REQUEST_CANCELLED = -32800
ERR_CONTENT_MODIFIED = -32801
ERR_WORKER_CRASHED = -32902
ERR_RPC_NEEDS_RECONNECT = -32900

WORD = re.compile(r"[\w.'!?]+")
SORRY = re.compile(r"\bsorry\b")


class LspError(Exception):
    """An LSP error answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def log(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def utf16_to_index(s: str, col: int) -> int:
    units = 0
    for i, ch in enumerate(s):
        if units >= col:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(s)


def pos(line: int, character: int) -> JSON:
    return {"character": character, "line": line}


def rng(l0: int, c0: int, l1: int, c1: int) -> JSON:
    return {"end": pos(l1, c1), "start": pos(l0, c0)}


def end_of(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, utf16_len(lines[-1])


def whole(text: str) -> JSON:
    el, ec = end_of(text)
    return rng(0, 0, el, ec)


@dataclass
class Doc:
    uri: str
    text: str
    version: int
    done_version: int = -1
    crashed: bool = False
    queued: list[JSON] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)


@dataclass
class Pending:
    msg: JSON
    method: str
    uri: str | None
    kind: str  # "stall" | "late" | "delay" | "wait"
    version: int = 0


class FakeLean:
    """The server state machine; all output is written from the main thread."""

    def __init__(self, config: JSON, out: BinaryIO) -> None:
        self.cfg = config
        self.out = out
        self.docs: dict[str, Doc] = {}
        self.pending: dict[Any, Pending] = {}
        self.inbox: queue.Queue[JSON | None] = queue.Queue()
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.server_id = 0
        self.last_client_id = -1
        self.server_requests: dict[Any, str] = {}
        self.shutdown = False
        self.muted = False
        self.worker_crash_left: dict[str, int] = {}
        wc = config.get("worker_crash_on")
        if isinstance(wc, str):
            self.worker_crash_left[wc] = 1
        elif isinstance(wc, list):
            for m in wc:
                self.worker_crash_left[str(m)] = 1
        elif isinstance(wc, dict):
            self.worker_crash_left[str(wc["method"])] = int(wc.get("times", 1))
        self.ignore_cancel: set[str] = set(config.get("ignore_cancel", ["textDocument/waitForDiagnostics"]))
        la = config.get("late_answer", {})
        self.late_answer: dict[str, int] = (
            {str(m): 0 for m in la} if isinstance(la, list) else {str(k): int(v) for k, v in la.items()}
        )
        self.delay_ms: dict[str, int] = {str(k): int(v) for k, v in config.get("delay_ms", {}).items()}
        self.stall: set[str] = set(config.get("stall", []))
        self.content_modified: set[str] = set(config.get("content_modified", []))
        self.verbose = bool(config.get("verbose", False))
        self.rpc_outdated_left = int(config.get("rpc_outdated", 0))
        self.session_ids = itertools.count(1)
        mal = config.get("malformed")
        self.malformed_left = int(mal.get("times", 1)) if isinstance(mal, dict) else 0
        inject = config.get("inject")
        self.inject_left = int(inject.get("times", 1)) if isinstance(inject, dict) else 0
        self.errors: dict[str, JSON] = dict(config.get("errors", {}))

    # ----------------------------------------------------------------- output
    def send(self, msg: JSON) -> None:
        if self.muted:
            return
        body = json.dumps(msg, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def write_raw(self, data: bytes) -> None:
        try:
            self.out.write(data)
            self.out.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)

    def result(self, rid: Any, res: Any) -> None:
        self.send({"id": rid, "jsonrpc": "2.0", "result": res})

    def error(self, rid: Any, code: int, message: str) -> None:
        self.send({"error": {"code": code, "message": message}, "id": rid, "jsonrpc": "2.0"})

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def server_request(self, method: str, params: Any = None, rid: Any = None) -> None:
        if rid is None:
            # Share the number space with the client's ids: jump to the client's latest id when ahead.
            rid = max(self.server_id, self.last_client_id)
            self.server_id = rid + 1
        msg: JSON = {"id": rid, "jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.server_requests[rid] = method
        self.send(msg)

    def progress(self, doc: Doc, processing: list[JSON]) -> None:
        self.notify(
            "$/lean/fileProgress",
            {"processing": processing, "textDocument": {"uri": doc.uri, "version": doc.version}},
        )

    def publish(self, doc: Doc, diagnostics: list[JSON]) -> None:
        self.notify(
            "textDocument/publishDiagnostics",
            {"diagnostics": diagnostics, "uri": doc.uri, "version": doc.version},
        )

    @staticmethod
    def hold_shutdown(fifo: str) -> None:
        """Say "stopping" through `fifo` (our pid), then wait until the test closes it after opening it to write."""
        with open(fifo, "w", encoding="ascii") as say:
            say.write(f"{os.getpid()}\n")
        with open(fifo, "rb") as hold:
            hold.read()

    # ----------------------------------------------------------------- timers
    def later(self, ms: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.timers, (time.monotonic() + ms / 1000.0, next(self.seq), fn))

    def run_timers(self) -> float | None:
        while self.timers and self.timers[0][0] <= time.monotonic():
            _, _, fn = heapq.heappop(self.timers)
            fn()
        return max(0.0, self.timers[0][0] - time.monotonic()) if self.timers else None

    # ----------------------------------------------------------------- main loop
    def run(self) -> NoReturn:
        while True:
            timeout = self.run_timers()
            try:
                msg = self.inbox.get(timeout=timeout)
            except queue.Empty:
                continue
            if msg is None:
                log("fake_lean: stdin closed")
                os._exit(0)
            self.handle(msg)

    def handle(self, msg: JSON) -> None:
        method = msg.get("method")
        if self.verbose:
            log(f"fake_lean: <- {method or 'response'} id={msg.get('id')!r}")
        if not isinstance(method, str):
            rid = msg.get("id")
            name = self.server_requests.pop(rid, None)
            if self.verbose or name is None:
                log(f"fake_lean: client answered server request {rid!r} ({name or 'unknown id'})")
            return
        crash = self.cfg.get("crash_on")
        if isinstance(crash, dict) and crash.get("method") == method:
            self.later(float(crash.get("after_ms", 0)), lambda: self.crash(crash, method))
            return
        inject = self.cfg.get("inject")
        if isinstance(inject, dict) and inject.get("on") == method and self.inject_left != 0:
            self.inject_left -= 1
            for item in inject.get("send", []):
                if isinstance(item, str):
                    body = item.encode("utf-8")
                    self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                else:
                    self.send(item)
        mal = self.cfg.get("malformed")
        if isinstance(mal, dict) and mal.get("on") == method and self.malformed_left != 0 and not self.muted:
            self.malformed_left -= 1
            self.malformed(mal)
            return
        if "id" in msg:
            if isinstance(msg["id"], int):
                self.last_client_id = max(self.last_client_id, msg["id"])
            self.handle_request(msg)
        else:
            self.handle_notification(method, msg.get("params") or {})

    def crash(self, crash: JSON, method: str) -> NoReturn:
        text = crash.get("stderr", f"INTERNAL PANIC: fake_lean crashed while handling '{method}'")
        log(str(text))
        os._exit(int(crash.get("exit_code", 1)))

    def malformed(self, mal: JSON) -> None:
        kind = mal.get("kind", "bad_json")
        if kind == "bad_json":
            body = b'{"jsonrpc":"2.0","id":1,"result":{"broken": tru'
            self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif kind == "no_content_length":
            body = b'{"jsonrpc":"2.0","method":"window/logMessage","params":{"type":3,"message":"x"}}'
            self.write_raw(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body)
        elif kind == "garbage_header":
            self.write_raw(b"\x00\xff\xfegarbage header without colon\r\n\r\n{}")
        elif kind == "oversized":
            declared = int(mal.get("declared_length", 200 * 1024 * 1024))
            chunk = int(mal.get("send_bytes", 65536))
            self.write_raw(b"Content-Length: %d\r\n\r\n" % declared + b'{"jsonrpc":"2.0","x":"' + b"A" * chunk)
        elif kind == "raw":
            self.write_raw(str(mal.get("data", "")).encode("utf-8"))
        else:
            log(f"fake_lean: unknown malformed kind {kind!r}")
        then = mal.get("then", "continue" if kind == "bad_json" else "hang")
        if then == "close":
            os._exit(int(mal.get("exit_code", 1)))
        if then == "hang":
            self.muted = True

    # ----------------------------------------------------------------- notifications
    def handle_notification(self, method: str, params: JSON) -> None:
        if method == "initialized":
            self.server_request("client/registerCapability", REGISTER_WATCHER_PARAMS, "register_lean_watcher")
        elif method == "exit":
            os._exit(0)
        elif method == "textDocument/didOpen":
            td = params["textDocument"]
            doc = Doc(td["uri"], td["text"].replace("\r\n", "\n"), int(td.get("version") or 0))
            self.docs[doc.uri] = doc
            self.elaborate(doc)
        elif method == "textDocument/didChange":
            self.did_change(params)
        elif method == "textDocument/didClose":
            uri = params["textDocument"]["uri"]
            closed = self.docs.pop(uri, None)
            if closed is None:
                return
            for rid, p in list(self.pending.items()):
                if p.uri == uri:
                    del self.pending[rid]
                    self.error(rid, ERR_CONTENT_MODIFIED, f"The file worker for {uri} has been terminated.")
            for q in closed.queued:
                self.error(q["id"], ERR_CONTENT_MODIFIED, f"The file worker for {uri} has been terminated.")
            self.publish(closed, [])
        elif method == "$/cancelRequest":
            self.cancel(params.get("id"))
        # didSave, didChangeWatchedFiles, $/setTrace, rpc notifications, ...: accepted silently.

    def did_change(self, params: JSON) -> None:
        td = params["textDocument"]
        doc = self.docs.get(td["uri"])
        changes = params.get("contentChanges") or []
        if doc is None or not changes:
            return
        text = doc.text
        for ch in changes:
            if "range" not in ch:
                text = ch["text"]
                continue
            lines = text.split("\n")

            def offset(p: JSON, lines: list[str] = lines) -> int:
                ln = min(int(p["line"]), len(lines) - 1)
                return sum(len(x) + 1 for x in lines[:ln]) + utf16_to_index(lines[ln], int(p["character"]))

            a, b = offset(ch["range"]["start"]), offset(ch["range"]["end"])
            text = text[:a] + ch["text"] + text[b:]
        doc.text = text.replace("\r\n", "\n")
        doc.version = int(td.get("version") or 0)
        was_crashed = doc.crashed
        doc.crashed = False
        self.elaborate(doc)
        if was_crashed:
            queued, doc.queued = doc.queued, []
            for q in queued:
                self.handle_request(q)

    def elaborate(self, doc: Doc) -> None:
        version = doc.version
        self.progress(doc, [{"kind": 1, "range": whole(doc.text)}])
        self.publish(doc, [])
        elab = float(self.cfg.get("elab_ms", 0))
        if elab > 0:
            self.later(elab, lambda: self.finish(doc, version))
        else:
            self.finish(doc, version)

    def finish(self, doc: Doc, version: int) -> None:
        if self.docs.get(doc.uri) is not doc or doc.version != version or doc.crashed:
            return
        diags = self.diagnostics_for(doc)
        if diags:
            self.publish(doc, diags)
        self.progress(doc, [])
        doc.done_version = version
        for rid, p in list(self.pending.items()):
            if p.kind == "wait" and p.uri == doc.uri and p.version <= version:
                del self.pending[rid]
                self.result(rid, {})
        for _ in range(int(self.cfg.get("inlay_refresh", 1))):
            self.server_request("workspace/inlayHint/refresh")

    def diagnostics_for(self, doc: Doc) -> list[JSON]:
        lines = doc.text.split("\n")
        out: list[JSON] = []
        explicit = self.cfg.get("diagnostics", {})
        matched = [v for k, v in explicit.items() if doc.uri.endswith(k)]
        if matched:
            for d in matched[0]:
                item = dict(d)
                if "range" not in item:
                    ln = int(item.pop("line", 0))
                    item["range"] = rng(ln, 0, ln, utf16_len(lines[ln]) if ln < len(lines) else 0)
                item.setdefault("fullRange", item["range"])
                item.setdefault("severity", 1)
                item.setdefault("source", "Lean 4")
                out.append(item)
        elif self.cfg.get("markers", True):
            msgs = {**DEFAULT_MARKER_MESSAGES, **self.cfg.get("marker_messages", {})}
            for i, line in enumerate(lines):
                for marker, sev, extra in (
                    ("ERROR_HERE", 1, {}),
                    ("WARN_HERE", 2, {"tags": [1]}),
                    ("GOALS_HERE", 1, {"leanTags": [1]}),
                ):
                    col = line.find(marker)
                    if col >= 0:
                        c0, c1 = utf16_len(line[:col]), utf16_len(line[: col + len(marker)])
                        out.append(self.diag(rng(i, c0, i, c1), sev, msgs[marker], extra))
                m = SORRY.search(line)
                if m:
                    r = rng(i, utf16_len(line[: m.start()]), i, utf16_len(line[: m.end()]))
                    out.append(self.diag(r, 2, msgs["sorry"], {}))
        env_diag = self.log_env_cfg().get("diagnostic_var")
        if env_diag:
            value = os.environ.get(str(env_diag), "")
            out.append(
                self.diag(rng(0, 0, 1, 0), 3, f"fake_lean environment: {env_diag}={value}", {})
                | {"fullRange": whole(doc.text)}
            )
        return out

    @staticmethod
    def diag(r: JSON, severity: int, message: str, extra: JSON) -> JSON:
        return {
            "fullRange": r,
            "message": message,
            "range": r,
            "severity": severity,
            "source": "Lean 4",
            **extra,
        }

    def log_env_cfg(self) -> JSON:
        le = self.cfg.get("log_env")
        if isinstance(le, list):
            return {"vars": le}
        return le if isinstance(le, dict) else {}

    # ----------------------------------------------------------------- requests
    def cancel(self, rid: Any) -> None:
        p = self.pending.get(rid)
        if p is None:
            return
        if p.method in self.ignore_cancel:
            log(f"fake_lean: ignoring $/cancelRequest for {rid!r} ({p.method})")
            return
        del self.pending[rid]
        if p.kind == "late":
            self.later(self.late_answer[p.method], lambda: self.answer(p.msg))
        else:
            self.error(rid, ERR_REQUEST_CANCELLED, "")

    @staticmethod
    def uri_of(msg: JSON) -> str | None:
        params = msg.get("params") or {}
        if not isinstance(params, dict):
            return None
        td = params.get("textDocument")
        if isinstance(td, dict) and isinstance(td.get("uri"), str):
            return str(td["uri"])
        return str(params["uri"]) if isinstance(params.get("uri"), str) else None

    def handle_request(self, msg: JSON) -> None:
        rid, method = msg["id"], str(msg["method"])
        if method == "initialize":
            self.result(rid, self.initialize_result())
            le = self.log_env_cfg()
            if le.get("vars"):
                text = "fake_lean environment: " + " ".join(f"{v}={os.environ.get(str(v), '')}" for v in le["vars"])
                log(text)
                self.notify("window/logMessage", {"message": text, "type": 3})
            return
        if self.shutdown:
            self.error(rid, ERR_INVALID_REQUEST, "Request received after 'shutdown' request.")
            return
        if method in self.errors:
            err = self.errors[method]
            error: JSON = {"code": int(err.get("code", -32603)), "message": str(err.get("message", ""))}
            if "data" in err:
                error["data"] = err["data"]
            self.send({"error": error, "id": rid, "jsonrpc": "2.0"})
            return
        if method == "shutdown":
            self.shutdown = True
            if "shutdown_fifo" in self.cfg:
                self.hold_shutdown(str(self.cfg["shutdown_fifo"]))
            for open_doc in self.docs.values():
                self.publish(open_doc, [])
            self.result(rid, None)
            return
        if method not in KNOWN_REQUESTS or (method.startswith("$/lean/rpc/") and not self.cfg.get("rpc", False)):
            self.error(rid, ERR_METHOD_NOT_FOUND, f"No request handler found for '{method}'")
            return
        uri = self.uri_of(msg) if KNOWN_REQUESTS[method] else None
        doc = self.docs.get(uri) if uri is not None else None
        if KNOWN_REQUESTS[method] and doc is None and not (method == "$/lean/waitForILeans" and uri is None):
            if method == "$/lean/waitForILeans":  # Lean 4.35 answers `{}` for no document at all
                self.error(rid, ERR_CONTENT_MODIFIED, f"Cannot process '{method}' request to closed file '{uri}'")
            else:
                self.error(rid, ERR_CONTENT_MODIFIED, f"Cannot process request to closed file '{uri}'")
            return
        if doc is not None and doc.crashed:
            doc.queued.append(msg)
            return
        left = self.worker_crash_left.get(method, 0)
        if doc is not None and left != 0:
            self.worker_crash_left[method] = left - 1
            self.pending[rid] = Pending(msg, method, uri, "stall")
            self.worker_crash(doc)
            return
        if method in self.content_modified:
            self.error(rid, ERR_CONTENT_MODIFIED, "File changed.")
            return
        if method in self.stall:
            self.pending[rid] = Pending(msg, method, uri, "stall")
            return
        if method in self.late_answer:
            self.pending[rid] = Pending(msg, method, uri, "late")
            return
        if method in self.delay_ms:
            p = Pending(msg, method, uri, "delay")
            self.pending[rid] = p

            def fire() -> None:
                if self.pending.get(rid) is p:
                    del self.pending[rid]
                    self.answer(msg)

            self.later(self.delay_ms[method], fire)
            return
        self.answer(msg)

    def worker_crash(self, doc: Doc) -> None:
        for rid, p in list(self.pending.items()):
            if p.uri == doc.uri:
                del self.pending[rid]
                self.error(
                    rid,
                    ERR_WORKER_CRASHED,
                    f"Server process for {doc.uri} crashed, likely due to a stack overflow or a bug.",
                )
        self.progress(doc, [{"kind": 2, "range": whole(doc.text)}])
        doc.crashed = True
        doc.sessions.clear()

    def answer(self, msg: JSON) -> None:
        rid, method = msg["id"], str(msg["method"])
        uri = self.uri_of(msg)
        doc = self.docs.get(uri) if uri is not None else None
        params: JSON = msg.get("params") or {}
        if method == "textDocument/waitForDiagnostics":
            version = int(params.get("version") or 0)
            if doc is not None and doc.done_version < version:
                self.pending[rid] = Pending(msg, method, uri, "wait", version)
            else:
                self.result(rid, {})
            return
        try:
            self.result(rid, self.compute(method, params, doc))
        except LspError as exc:
            self.error(rid, exc.code, exc.message)

    def initialize_result(self) -> JSON:
        return {
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": "Lean 4 Server", "version": str(self.cfg.get("server_version", "0.3.0"))},
        }

    def compute(self, method: str, params: JSON, doc: Doc | None) -> Any:
        lines = doc.text.split("\n") if doc is not None else []
        position = params.get("position") or {}
        ln = int(position.get("line", -1))
        line = lines[ln] if 0 <= ln < len(lines) else None
        if method == "textDocument/hover":
            if line is None:
                return None
            idx = utf16_to_index(line, int(position.get("character", 0)))
            for m in WORD.finditer(line):
                if m.start() <= idx < m.end():
                    word = m.group(0)
                    value = self.cfg.get("hover", {}).get(word, f"```lean\n{word}\n```")
                    r = rng(ln, utf16_len(line[: m.start()]), ln, utf16_len(line[: m.end()]))
                    return {"contents": {"kind": "markdown", "value": value}, "range": r}
            return None
        if method == "$/lean/plainGoal":
            trigger = str(self.cfg.get("goal_trigger", "by"))
            if line is None or not re.search(rf"(?<![\w.']){re.escape(trigger)}(?![\w.'])", line):
                return None
            goal = str(self.cfg.get("goal", "⊢ True"))
            return {"goals": [goal], "rendered": f"```lean\n{goal}\n```"}
        if method == "$/lean/rpc/connect" and doc is not None:
            session = str(next(self.session_ids))
            doc.sessions.add(session)
            return {"sessionId": session}
        if method == "$/lean/rpc/call" and doc is not None:
            return self.rpc_call(params, doc, line)
        if method == "textDocument/documentSymbol":
            out: list[JSON] = []
            for i, text in enumerate(lines):
                d = re.match(r"(theorem|lemma|def|abbrev|instance)\s+([^\s:(]+)", text)
                if d:
                    c0, c1 = utf16_len(text[: d.start(2)]), utf16_len(text[: d.end(2)])
                    out.append(
                        {
                            "kind": 6,
                            "name": d.group(2),
                            "range": rng(i, 0, i, utf16_len(text)),
                            "selectionRange": rng(i, c0, i, c1),
                        }
                    )
            return out
        if method == "textDocument/completion":
            return {"isIncomplete": True, "items": list(self.cfg.get("completions", []))}
        if method in ("textDocument/semanticTokens/full", "textDocument/semanticTokens/range"):
            return {"data": []}
        if method in ("$/lean/waitForILeans",):
            return {}
        if method in ("codeAction/resolve", "completionItem/resolve"):
            return params
        if method == "$/lean/plainTermGoal" and "term_goal" in self.cfg and line is not None:
            idx = utf16_to_index(line, int(position.get("character", 0)))
            for m in WORD.finditer(line):
                if m.start() <= idx < m.end():
                    r = rng(ln, utf16_len(line[: m.start()]), ln, utf16_len(line[: m.end()]))
                    return {"goal": str(self.cfg["term_goal"]), "range": r}
            return None
        if method in ("$/lean/plainTermGoal", "textDocument/signatureHelp", "textDocument/prepareRename"):
            return None
        return []

    def rpc_call(self, params: JSON, doc: Doc, line: str | None) -> Any:
        session = str(params.get("sessionId"))
        if self.rpc_outdated_left > 0 or session not in doc.sessions:
            self.rpc_outdated_left = max(0, self.rpc_outdated_left - 1)
            doc.sessions.discard(session)
            raise LspError(ERR_RPC_NEEDS_RECONNECT, "Outdated RPC session")
        method = str(params.get("method"))
        raw = params.get("params")
        args: JSON = raw if isinstance(raw, dict) else {}
        if method == "Lean.Widget.getWidgets":
            return {"widgets": list(self.cfg.get("widgets", []))}
        if method == "Lean.Widget.getWidgetSource":
            sources = self.cfg.get("widget_sources", {})
            if args.get("hash") not in sources:
                raise LspError(ERR_INVALID_PARAMS, f"No widget module with hash {args.get('hash')} registered")
            return {"sourcetext": sources[args["hash"]]}
        if method == "Lean.Widget.getInteractiveDiagnostics":
            span = args.get("lineRange") or {"start": 0, "end": 2**30}
            return [
                {**d, "message": {"text": d["message"]}}
                for d in self.diagnostics_for(doc)
                if span["start"] <= d["range"]["start"]["line"] < span["end"]
            ]
        if method != "Lean.Widget.getInteractiveGoals":
            raise LspError(ERR_METHOD_NOT_FOUND, f"No RPC method '{method}' found")
        trigger = str(self.cfg.get("goal_trigger", "by"))
        if line is None or not re.search(rf"(?<![\w.']){re.escape(trigger)}(?![\w.'])", line):
            return None
        goal = str(self.cfg.get("goal", "⊢ True"))
        return {"goals": [{"goalPrefix": "⊢ ", "hyps": [], "type": {"text": goal.rsplit("⊢ ", 1)[-1]}}]}


def reader(fake: FakeLean, stream: BinaryIO) -> None:
    """Parse Content-Length frames from stdin into the inbox; None marks EOF."""
    try:
        while True:
            length: int | None = None
            while True:
                line = stream.readline()
                if not line:
                    fake.inbox.put(None)
                    return
                line = line.rstrip(b"\r\n")
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is None:
                log("fake_lean: frame without Content-Length header")
                continue
            body = stream.read(length)
            if len(body) < length:
                fake.inbox.put(None)
                return
            try:
                msg = json.loads(body.decode("utf-8"))
            except ValueError as exc:
                log(f"fake_lean: invalid JSON from client: {exc}")
                continue
            if isinstance(msg, dict):
                fake.inbox.put(msg)
    except Exception as exc:  # pragma: no cover - defensive: never leave the main loop waiting forever
        log(f"fake_lean: reader failed: {exc!r}")
        fake.inbox.put(None)


def load_config(arg: str | None) -> JSON:
    raw = arg if arg is not None else os.environ.get("FAKE_LEAN_CONFIG")
    if not raw:
        return {}
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as f:
            raw = f.read()
    cfg = json.loads(raw)
    if not isinstance(cfg, dict):
        raise SystemExit("fake_lean: --config must be a JSON object")
    return cfg


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(description="Scripted fake Lean 4 language server (tests only).")
    parser.add_argument("--config", help="JSON object, or @FILE holding one")
    args, _unknown = parser.parse_known_args(argv)
    fake = FakeLean(load_config(args.config), sys.stdout.buffer)
    if "stderr_on_start" in fake.cfg:
        log(str(fake.cfg["stderr_on_start"]))
    threading.Thread(target=reader, args=(fake, sys.stdin.buffer), daemon=True).start()
    fake.run()


if __name__ == "__main__":
    main()
