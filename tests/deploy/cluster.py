"""HAProxy in front of `lean-beam-mcp --http` replicas on loopback: the deploy tests' and `bench/deploy.py`'s setup.

`cluster(n, lean_cmd)` starts `n` replicas (each on a free port; the URL is read from its stderr line), then HAProxy
with the shipped `deploy/haproxy/haproxy.cfg` (addresses passed through its environment variables, the stats page
on another free port), waits until HAProxy listens and reports every replica UP, and stops everything at exit
(SIGTERM, then SIGKILL after a bound). Every child's stderr is drained into a bounded tail, so a chatty child never
blocks and a failure can show what it said. `Cluster` reads HAProxy's view of the replicas (its CSV stats),
asks a replica directly which workspaces it holds (`beam_stats`, bypassing HAProxy), kills a replica, and drains
one (SIGTERM: a rolling restart's step) and starts it again at the same address.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc
import httpx

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
MODERN = "2026-07-28"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "beam-deploy", "version": "1"},
}


def haproxy_binary() -> str | None:
    """The `haproxy` executable (Debian installs it in /usr/sbin, which a user's PATH may lack), or None."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")


def server_binary() -> list[str]:
    """The `lean-beam-mcp` command of this environment."""
    found = shutil.which("lean-beam-mcp", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "beam_mcp"]


def free_ports(count: int) -> list[int]:
    """Distinct loopback ports free right now (HAProxy binds them a moment later)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


class Child:
    """A child process whose stderr is drained into a bounded tail of lines."""

    def __init__(self, name: str, process: anyio.abc.Process) -> None:
        self.name = name
        self.process = process
        self.tail: collections.deque[str] = collections.deque(maxlen=200)
        self.line_seen = anyio.Event()
        self.wanted = ""
        self.found = ""

    async def drain(self) -> None:
        """Read stderr to its end, keeping the last lines (and the first one containing `wanted`)."""
        assert self.process.stderr is not None
        buffer = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in self.process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    self.tail.append(line)
                    if self.wanted and not self.found and self.wanted in line:
                        self.found = line
                        self.line_seen.set()
        self.line_seen.set()  # the child ended: nobody waits forever

    def said(self) -> str:
        return "\n".join(self.tail)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within the stop bound."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(STOP_TIMEOUT):
                await self.process.wait()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()


@dataclasses.dataclass
class Replica:
    """One `lean-beam-mcp --http` replica, named as in the HAProxy configuration (`r1`, `r2`, ...)."""

    name: str
    child: Child
    url: str

    @property
    def address(self) -> str:
        """`host:port` of its endpoint."""
        return self.url.split("//", 1)[1].split("/", 1)[0]

    @property
    def alive(self) -> bool:
        return self.child.process.returncode is None


Launch = Callable[[str, str], Awaitable[Replica]]
"""`launch(name, "host:port")`: start a replica of the cluster's command at an address, once it listens."""


@dataclasses.dataclass
class Cluster:
    """HAProxy (`url`, the MCP endpoint clients use) in front of `replicas`."""

    url: str
    stats_url: str
    replicas: list[Replica]
    haproxy: Child
    http: httpx.AsyncClient
    launch: Launch | None = None

    def replica(self, name: str) -> Replica:
        return next(replica for replica in self.replicas if replica.name == name)

    async def states(self) -> dict[str, str]:
        """HAProxy's status of each replica (`UP`, `DOWN`, `MAINT`, `UP 1/2`, ...), from its CSV stats."""
        response = await self.http.get(f"{self.stats_url};csv")
        response.raise_for_status()
        header, *rows = response.text.lstrip("# ").splitlines()
        columns = header.split(",")
        out: dict[str, str] = {}
        for row in rows:
            fields = dict(zip(columns, row.split(","), strict=False))
            if fields.get("pxname") == "replicas" and fields.get("svname", "").startswith("r"):
                out[fields["svname"]] = fields["status"]
        return out

    async def wait_states(self, wanted: Mapping[str, str], timeout: float = START_TIMEOUT) -> None:
        """Poll HAProxy's stats until each named replica has the wanted status (HAProxy has no push channel)."""
        with anyio.fail_after(timeout):
            while True:
                if self.haproxy.process.returncode is not None:
                    raise RuntimeError(f"haproxy exited ({self.haproxy.process.returncode}):\n{self.haproxy.said()}")
                try:
                    states = await self.states()
                except httpx.TransportError:  # not listening yet
                    states = {}
                if all(states.get(name) == status for name, status in wanted.items()):
                    return
                await anyio.sleep(0.05)

    async def workspaces(self, replica: Replica) -> set[str]:
        """The workspace roots `replica` holds a runtime for, asked directly (`beam_stats`, bypassing HAProxy)."""
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "beam_stats", "arguments": {}, "_meta": META},
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": "tools/call",
            "mcp-name": "beam_stats",
        }
        response = await self.http.post(replica.url, content=json.dumps(message).encode(), headers=headers)
        response.raise_for_status()
        keys = response.json()["result"]["structuredContent"]["workspaces"]
        return {key.removeprefix("local:") for key in keys}

    async def placement(self) -> dict[str, str]:
        """Which live replica holds each workspace root (a root held by two replicas fails the check)."""
        out: dict[str, str] = {}
        for replica in self.replicas:
            if not replica.alive:
                continue
            for root in await self.workspaces(replica):
                assert root not in out, f"{root} is held by both {out[root]} and {replica.name}"
                out[root] = replica.name
        return out

    async def drain_restart(self, name: str, between: Callable[[], Awaitable[None]] | None = None) -> int:
        """SIGTERM one replica (it drains and exits), start it again at its address, wait until HAProxy has it UP.

        Returns the drained replica's exit status. `between` runs after it exited and before the new one starts.
        """
        if self.launch is None:
            raise RuntimeError("this cluster cannot start replicas")
        replica = self.replica(name)
        replica.child.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(STOP_TIMEOUT + 30):  # its drain deadline, then stopping Lean
            code = await replica.child.process.wait()
        await self.wait_states({name: "DOWN"})
        if between is not None:
            await between()
        fresh = await self.launch(name, replica.address)
        self.replicas[self.replicas.index(replica)] = fresh
        await self.wait_states({name: "UP"})
        return code

    async def kill(self, name: str) -> float:
        """SIGKILL one replica (as a crash or a lost machine would end it); the `time.monotonic()` of the kill."""
        replica = self.replica(name)
        killed = time.monotonic()
        replica.child.process.kill()
        with anyio.fail_after(STOP_TIMEOUT):
            await replica.child.process.wait()
        return killed


async def _start(
    tg: anyio.abc.TaskGroup, name: str, cmd: Sequence[str], env: Mapping[str, str], wanted: str = ""
) -> Child:
    process = await anyio.open_process(
        list(cmd), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    child = Child(name, process)
    child.wanted = wanted
    tg.start_soon(child.drain)
    return child


async def _listening(child: Child) -> Replica:
    """The replica a started child is, once it said where it listens."""
    with anyio.fail_after(START_TIMEOUT):
        await child.line_seen.wait()
    if not child.found:
        raise RuntimeError(f"replica {child.name} did not start:\n{child.said()}")
    return Replica(child.name, child, child.found.split(" at ", 1)[1].split()[0])


@contextlib.asynccontextmanager
async def cluster(
    replicas: int,
    lean_cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> AsyncIterator[Cluster]:
    """HAProxy in front of `replicas` (1 to 3) `lean-beam-mcp --http` replicas running `lean_cmd` on loopback."""
    haproxy = haproxy_binary()
    if haproxy is None:
        raise RuntimeError("haproxy is not installed (Debian: apt-get install -y haproxy)")
    if not 1 <= replicas <= 3:
        raise ValueError("the shipped configuration has room for 1 to 3 replicas")
    base_env = dict(os.environ if env is None else env)
    children: list[Child] = []
    async with anyio.create_task_group() as tg:
        try:
            started: list[Replica] = []
            cmd = [*server_binary(), "--http", "127.0.0.1:0", "--lean-cmd", shlex.join(lean_cmd), *extra_args]
            for i in range(1, replicas + 1):
                child = await _start(tg, f"r{i}", cmd, base_env, wanted=" at http://")
                children.append(child)
            started += [await _listening(child) for child in children]

            async def launch(name: str, address: str) -> Replica:
                at = [*cmd[: cmd.index("--http") + 1], address, *cmd[cmd.index("--http") + 2 :]]
                child = await _start(tg, name, at, base_env, wanted=" at http://")
                children.append(child)
                return await _listening(child)

            lb, stats = (f"127.0.0.1:{port}" for port in free_ports(2))
            lb_env = {**base_env, "BEAM_LB_BIND": lb, "BEAM_LB_STATS": stats}
            lb_env |= {f"BEAM_REPLICA_{i}": replica.address for i, replica in enumerate(started, 1)}
            proxy = await _start(tg, "haproxy", [haproxy, "-db", "-f", str(CONFIG)], lb_env)
            children.append(proxy)
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            async with httpx.AsyncClient(timeout=30, limits=limits) as http:
                made = Cluster(f"http://{lb}/mcp", f"http://{stats}/stats", started, proxy, http, launch)
                try:
                    await made.wait_states({replica.name: "UP" for replica in started})
                except (httpx.HTTPError, TimeoutError) as exc:
                    raise RuntimeError(f"haproxy did not come up ({exc!r}):\n{proxy.said()}") from exc
                yield made
        finally:
            with anyio.CancelScope(shield=True):
                for child in reversed(children):
                    await child.stop()
