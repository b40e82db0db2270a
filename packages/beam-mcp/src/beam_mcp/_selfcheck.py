"""`lean-beam-mcp --self-check FILE`: prove that an installation can serve a real Lean sync end to end.

It starts `python -m beam_mcp` as a child over stdio (exactly what an MCP client does), sends a modern
`server/discover`, then `lean_sync` on FILE with the descriptor of FILE's project, checks the result shape,
closes stdin and waits for a clean exit. Each phase is bounded (120 s, or
`LEAN_BEAM_MCP_SELF_CHECK_TIMEOUT_MS`). It never edits files.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import Process

from beam_lsp import Redactor, StderrBuffer, kill_tree
from beam_lsp.project import PROJECT_MARKERS, find_project_root

from .__about__ import __version__
from ._protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    SERVER_NAME,
)
from .errors import SelfCheckError

TIMEOUT_ENV: Final = "LEAN_BEAM_MCP_SELF_CHECK_TIMEOUT_MS"
DEFAULT_TIMEOUT: Final = 120.0
_STDERR_TAIL: Final = 4000
"""Bytes of the server's stderr kept for a failure's message."""


def phase_timeout() -> float:
    """Seconds allowed per phase.

    Raises:
        SelfCheckError: The environment override is not a positive integer.
    """
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT
    if not raw.isdigit() or int(raw) <= 0:
        raise SelfCheckError(f"{TIMEOUT_ENV} must be a positive integer (milliseconds), got {raw!r}")
    return int(raw) / 1000


def _meta() -> dict[str, Any]:
    return {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: {"name": f"{SERVER_NAME}-self-check", "version": __version__},
    }


class _Child:
    """A line-oriented JSON-RPC client over a child server's stdio, and the tail of its stderr (redacted)."""

    def __init__(self, proc: Process, redactor: Redactor) -> None:
        self.proc = proc
        self.buf = b""
        self.stderr = StderrBuffer(_STDERR_TAIL)
        self.redactor = redactor
        self.progress = 0

    def stderr_tail(self) -> str:
        text = self.stderr.tail(self.redactor).strip()
        return f"\nserver stderr:\n{text}" if text else ""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            await self.proc.stdin.send(json.dumps(message).encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise SelfCheckError(
                "the server closed its input before the request was sent" + self.stderr_tail()
            ) from None

    async def response(self, rid: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            while b"\n" not in self.buf:
                try:
                    chunk = await self.proc.stdout.receive()
                except anyio.EndOfStream:
                    raise SelfCheckError("the server closed its output before answering" + self.stderr_tail()) from None
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError as exc:
                raise SelfCheckError(f"the server wrote a line that is not JSON ({exc}): {line[:200]!r}") from None
            if message.get("method") == "notifications/progress":
                self.progress += 1
            if "method" not in message and message.get("id") == rid:
                return dict(message)


async def _phases(child: _Child, file: Path, root: Path, timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """Discover, sync, shut down; returns the server identity and the sync result."""
    proc = child.proc
    try:
        with anyio.fail_after(timeout):
            await child.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": _meta()}})
            discovered = await child.response(1)
    except TimeoutError:
        raise SelfCheckError(f"server/discover: no answer within {timeout:g} s" + child.stderr_tail()) from None
    result = discovered.get("result")
    if not isinstance(result, dict) or MODERN_VERSION not in result.get("supportedVersions", []):
        raise SelfCheckError(f"server/discover: unexpected answer {json.dumps(discovered)[:500]}")
    server = result.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {})
    call = {
        "name": "lean_sync",
        "arguments": {"workspace": {"root": str(root)}, "path": str(file)},
        "_meta": {**_meta(), "progressToken": "self-check"},
    }
    try:
        with anyio.fail_after(timeout):
            await child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            synced = await child.response(2)
    except TimeoutError:
        raise SelfCheckError(f"lean_sync: no answer within {timeout:g} s" + child.stderr_tail()) from None
    if "error" in synced:
        error = synced["error"]
        raise SelfCheckError(f"lean_sync: JSON-RPC error {error.get('code')}: {error.get('message')}")
    out = synced.get("result", {})
    structured = out.get("structuredContent", {})
    if out.get("resultType") != "complete":
        raise SelfCheckError(f"lean_sync: result has no resultType 'complete': {json.dumps(out)[:500]}")
    if out.get("isError"):
        raise SelfCheckError(f"lean_sync: tool error {structured.get('code')}: {structured.get('message')}")
    if "document_progress" not in structured:
        raise SelfCheckError(f"lean_sync: result has no document_progress: {json.dumps(structured)[:500]}")
    assert proc.stdin is not None
    await proc.stdin.aclose()
    try:
        with anyio.fail_after(timeout):
            code = await proc.wait()
    except TimeoutError:
        raise SelfCheckError(f"shutdown: the server did not exit within {timeout:g} s of EOF") from None
    if code != 0:
        raise SelfCheckError(f"shutdown: the server exited with status {code}" + child.stderr_tail())
    return server, structured


async def check(file: Path, root: Path, lean_cmd: list[str] | None, timeout: float) -> str:
    """Run the check; returns the success summary.

    Raises:
        SelfCheckError: Which phase failed and why.
    """
    started = time.monotonic()
    cmd = [sys.executable, "-m", "beam_mcp"]
    if lean_cmd:
        cmd += ["--lean-cmd", shlex.join(lean_cmd)]
    try:
        proc = await anyio.open_process(cmd, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise SelfCheckError(f"could not start the server {cmd!r}: {exc}") from exc
    child = _Child(proc, Redactor.from_sources(os.environ, cmd))
    error: SelfCheckError | None = None
    async with proc:
        async with anyio.create_task_group() as tg:
            assert proc.stderr is not None
            tg.start_soon(child.stderr.pump, proc.stderr)
            try:
                server, structured = await _phases(child, file, root, timeout)
            except SelfCheckError as exc:  # re-raised below, not wrapped in an exception group
                error = exc
            finally:
                if proc.returncode is None:
                    # A failed phase leaves the child running: neither it nor the Lean servers it started (each in
                    # a session of its own, so not in the child's group) may outlive the check.
                    kill_tree(proc.pid)
                tg.cancel_scope.cancel()
    if error is not None:
        raise error
    counts = structured.get("diagnostics", {}).get("counts", {})
    readiness = structured.get("readiness", {})
    return "\n".join(
        [
            f"{SERVER_NAME} self-check: ok ({time.monotonic() - started:.1f} s)",
            f"  server: {server.get('name', '?')} {server.get('version', '?')}, MCP {MODERN_VERSION}",
            f"  workspace: {structured.get('workspace', {}).get('root', root)}",
            f"  {structured.get('path', file)} version {structured.get('version')}: "
            f"{counts.get('error', 0)} error(s), {counts.get('warning', 0)} warning(s), "
            f"save_ready={str(readiness.get('save_ready')).lower()}",
            f"  progress notifications: {child.progress}",
        ]
    )


def run(file: str, lean_cmd: list[str] | None) -> int:
    """The `--self-check` command; returns its exit code (0 ok, 1 failed, 2 bad FILE: missing, not `.lean`, outside)."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        print(f"{SERVER_NAME}: error: --self-check: not a file: {file}", file=sys.stderr)
        return 2
    if path.suffix != ".lean":  # refused before a server starts, as the tools would refuse it after
        message = f"--self-check: {file} is not a Lean source file (a `.lean` file of the project)"
        print(f"{SERVER_NAME}: error: {message}", file=sys.stderr)
        return 2
    root = find_project_root(path)
    if root is None:
        print(
            f"{SERVER_NAME}: error: --self-check: {file} is not inside a Lean/Lake project "
            f"(no {', '.join(PROJECT_MARKERS)} at or above it)",
            file=sys.stderr,
        )
        return 2
    try:
        summary = anyio.run(check, path, root, lean_cmd, phase_timeout())
    except SelfCheckError as exc:
        print(f"{SERVER_NAME} self-check failed: {exc}", file=sys.stderr)
        return 1
    print(summary)
    return 0
