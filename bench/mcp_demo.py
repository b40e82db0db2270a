"""What an agent sees: `lean-beam-mcp` end to end on the demo workspace (`python -m bench.mcp_demo`).

Not a benchmark: a transcript for `tox -e demo` to print. It starts the installed `lean-beam-mcp` over stdio
with the real toolchain, discovers it, lists its tools, syncs the clean, broken, warning and unsolved-goals
files (with a progress token, a per-request log level and `diagnostic_scope: "all"`), asks for a hover and
goals, an outline and completions, runs speculative text (a handle chain, a batch of alternative attempts at one
position, a standalone scratch snippet), checks a declaration's axioms, and drops the workspace, printing every
message the client receives.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from bench._common import built_project
from bench.mcp_overhead import StdioMcp, server_binary

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "beam-demo", "version": "1"},
}


class Transcript(StdioMcp):
    """Prints notifications as they arrive."""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        rid = self.next_id
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        await self.proc.stdin.send(line.encode() + b"\n")
        while True:
            while b"\n" not in self.buf:
                self.buf += await self.proc.stdout.receive()
            raw, self.buf = self.buf.split(b"\n", 1)
            message = json.loads(raw)
            if message.get("method") == "notifications/progress":
                print(f"    progress {message['params']['progress']}: {message['params']['message']}")
            elif message.get("method") == "notifications/message":
                p = message["params"]
                data = p["data"]
                text = data.get("message", "").splitlines()[0] if isinstance(data, dict) else data
                print(f"    log {p['logger']} [{p['level']}]: {text}")
            elif message.get("id") == rid:
                if "error" in message:
                    print(f"    JSON-RPC error {message['error']}")
                    return None
                return message["result"]


def show(label: str, value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    print(f"  {label}: {text if len(text) < 600 else text[:600] + ' ...'}")


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        ws = {"root": str(root)}
        cmd = [*server_binary(), "--lean-cmd", shlex.join(tc.server_cmd())]
        print(f"$ {shlex.join(cmd)}   (workspace {root})")
        proc = await anyio.open_process(cmd, env=tc.env(), stderr=subprocess.DEVNULL)
        async with proc:
            mcp = Transcript(proc)
            found = await mcp.request("server/discover", {"_meta": META})
            info = found["_meta"]["io.modelcontextprotocol/serverInfo"]
            print(f"\nserver/discover -> {info}, {found['supportedVersions']}")
            listed = await mcp.request("tools/list", {"_meta": META})
            print(f"tools/list -> {len(listed['tools'])} tools: {', '.join(t['name'] for t in listed['tools'])}")

            async def call(tool: str, label: str, **arguments: Any) -> Any:
                print(f"\ntools/call {tool} {label}")
                meta = {**META, "progressToken": f"{tool}-{label}", "io.modelcontextprotocol/logLevel": "debug"}
                result = await mcp.request(
                    "tools/call", {"name": tool, "arguments": {"workspace": ws, **arguments}, "_meta": meta}
                )
                if result is not None:
                    show("isError" if result["isError"] else "result", result["structuredContent"])
                    return result["structuredContent"]
                return None

            versions = {}
            for name in ("Proofs", "Broken", "Warn", "Goals"):
                path = f"Demo/{name}.lean"
                out = await call("lean_sync", path, path=path, diagnostic_scope="all")
                versions[path] = out["version"] if out else 1
            await call("lean_hover", "myTrue", path="Demo/Proofs.lean", version=versions["Demo/Proofs.lean"], line=3,
                       character=29)  # fmt: skip
            await call("lean_goals", "before skip", path="Demo/Goals.lean", version=versions["Demo/Goals.lean"], line=4,
                       character=2, mode="before")  # fmt: skip
            proofs = versions["Demo/Proofs.lean"]
            await call("lean_outline", "Demo/Proofs.lean", path="Demo/Proofs.lean", version=proofs)
            await call("lean_completions", "MyNat.su|", path="Demo/Proofs.lean", version=proofs, line=8, character=27,
                       limit=5)  # fmt: skip
            probe = await call(
                "lean_run_at_handle",
                "speculative command",
                path="Demo/Proofs.lean",
                version=proofs,
                line=8,
                character=0,
                text="def three : MyNat := MyNat.succ two",
            )
            await call(
                "lean_run_with",
                "continue from the handle",
                path="Demo/Proofs.lean",
                handle=probe["next_handle"],
                text="#check three",
            )
            await call(
                "lean_run_at",
                "speculative tactic (no Init: fails, goals at the basis)",
                path="Demo/Goals.lean",
                version=versions["Demo/Goals.lean"],
                line=4,
                character=2,
                text="exact hp",
            )
            batch = await call(
                "lean_attempts",
                "three alternatives after byTerm, each on its own",
                path="Demo/Proofs.lean",
                version=proofs,
                line=3,
                character=0,
                texts=["#check byTerm", "theorem t1 : MyTrue := MyNat.zero", "theorem t2 : MyTrue := byTerm"],
            )
            if batch is not None:
                print(f"  each attempt's success, in order: {[a['success'] for a in batch['attempts']]}")
            await call("lean_axioms", "byTerm", path="Demo/Proofs.lean", version=proofs, line=3, character=0)
            await call(
                "lean_run_code",
                "a scratch snippet (never on disk)",
                text="prelude\nimport Demo.Basic\n#check MyNat.one\n#print axioms myTrue\n",
            )
            await call("lean_hover", "stale version", path="Demo/Proofs.lean", version=99, line=3, character=29)
            await call("lean_drop_workspace", "")
            assert proc.stdin is not None
            await proc.stdin.aclose()
            code = await proc.wait()
            print(f"\nstdin closed -> lean-beam-mcp exited with {code}")
            return code


if __name__ == "__main__":
    sys.exit(anyio.run(main))
