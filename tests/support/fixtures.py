"""Pytest fixtures shared by every test package (imported by the package conftests)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from . import projects, toolchain, truth
from .toolchain import Toolchain

if TYPE_CHECKING:
    from beam_broker import Broker

FAKE_LEAN = Path(__file__).resolve().parent / "fake_lean.py"
GATE_FILE = ".beam-test-gate"
"""A project holding this file (the path of a `LeanGate`'s socket) holds its Lean work until the gate opens."""

_GATE = f"""\
import json, os, socket, subprocess, sys, threading

try:
    with open({GATE_FILE!r}, encoding="utf-8") as f:
        where = f.read().strip()
except OSError:
    where = ""
if not where:
    os.execv(sys.argv[1], sys.argv[1:])

# Relay the client's messages to the server; the first one that asks for Lean work (after the handshake) and
# everything after it wait at the gate. A client that gives up meanwhile (shutdown, exit) is let through.
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE)
threading.Thread(target=lambda: os._exit(child.wait()), daemon=True).start()  # the server's exit is ours
lock = threading.Lock()
held = None
state = "before"

def send(frame):
    try:
        child.stdin.write(frame)
        child.stdin.flush()
    except OSError:
        os._exit(0)

def wait_for_release(sock):
    global held, state
    try:
        sock.recv(1)
    except OSError:
        pass
    with lock:
        if state == "holding":
            for frame in held:
                send(frame)
            held, state = None, "passing"

def frames(stream):
    while True:
        head, length = b"", 0
        while True:
            line = stream.readline()
            if not line:
                return
            head += line
            if line in (b"\\r\\n", b"\\n"):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = stream.read(length)
        yield head + body, body

for frame, body in frames(sys.stdin.buffer):
    try:
        method = json.loads(body).get("method")
    except ValueError:
        method = None
    with lock:
        if state == "holding":
            if method in ("shutdown", "exit"):
                held, state = None, "passing"
                send(frame)
            else:
                held.append(frame)
            continue
        if state == "before" and method not in (None, "initialize", "initialized", "shutdown", "exit"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(where)
                sock.sendall(os.getcwd().encode() + b"\\n")
            except OSError:
                state = "passing"
            else:
                held, state = [frame], "holding"
                threading.Thread(target=wait_for_release, args=(sock,), daemon=True).start()
                continue
        send(frame)
try:
    child.stdin.close()
except OSError:
    pass
sys.exit(child.wait())
"""


def fake_cmd(config: dict[str, object] | None = None) -> list[str]:
    """Command line that starts the scripted fake Lean server with `config`."""
    cmd = [sys.executable, str(FAKE_LEAN)]
    if config:
        cmd += ["--config", json.dumps(config)]
    return cmd


def gated_cmd(cmd: Sequence[str]) -> list[str]:
    """`cmd` behind a gate: in a project with a `LeanGate` installed, Lean work waits until the gate opens.

    The Lean server runs in the workspace root, so the gate is per project; elsewhere `cmd` runs as it is.
    """
    return [sys.executable, "-c", _GATE, *cmd]


class LeanGate:
    """Holds the Lean work of one project's server until the test opens the gate.

    The server starts and answers the handshake; the first message that asks for Lean work (opening a file, a
    request) and everything after it wait at the gate, as if Lean were busy. This is how a fake-lane test keeps
    a call in flight for as long as it likes and then lets it finish normally, with no sleeps. A client that
    gives up meanwhile (`shutdown`) is let through at once. Every server of the project (a restart after a drop
    too) passes the gate once it is open. Use `install`.
    """

    def __init__(self) -> None:
        self.arrivals = 0
        self._arrived = anyio.Event()
        self._open = anyio.Event()

    @classmethod
    @contextlib.asynccontextmanager
    async def install(cls, project: Path) -> AsyncIterator[LeanGate]:
        """Install a closed gate in `project` (its server command must come from `gated_cmd`)."""
        gate = cls()
        sockets = tempfile.mkdtemp(prefix="beam-gate-")  # AF_UNIX paths are short: not under pytest's tmp_path
        where = os.path.join(sockets, "s")
        marker = project / GATE_FILE
        try:
            listener = await anyio.create_unix_listener(where)
            marker.write_text(where, encoding="utf-8")
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, gate._hold)
                try:
                    yield gate
                finally:
                    gate.open()
                    marker.unlink(missing_ok=True)
                    tg.cancel_scope.cancel()
        finally:
            shutil.rmtree(sockets, ignore_errors=True)

    async def _hold(self, conn: anyio.abc.SocketStream) -> None:
        async with conn:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await conn.receive()
                self.arrivals += 1
                self._arrived.set()
                await self._open.wait()
                await conn.send(b"1")

    async def reached(self) -> None:
        """Wait until a server of the project holds Lean work at the gate (or passed it)."""
        await self._arrived.wait()

    def open(self) -> None:
        """Let every waiting and future server of the project start."""
        self._open.set()


@pytest.fixture(scope="session")
def lean_toolchain() -> Toolchain:
    """The real Lean toolchain of this lane; skips where the lane has none (fake lane, elan absent)."""
    tc = toolchain.from_env()
    if tc is None:
        pytest.skip("no real Lean toolchain in this lane (BEAM_TEST_TOOLCHAIN)")
    return tc


@pytest.fixture(scope="session")
def built_demo(lean_toolchain: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo project with Demo.Basic and Demo.Proofs built once per session (read-only for tests)."""
    root = projects.copy_project("demo", tmp_path_factory.mktemp("built") / "demo")
    result = projects.lake_build(lean_toolchain, root, "Demo.Basic", "Demo.Proofs")
    assert result.returncode == 0, result.stdout + result.stderr
    return root


@pytest.fixture(scope="session")
def built_truth(lean_toolchain: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `truth` project (tests/support/truth.py) with every module built once per session (read-only)."""
    return truth.build_fixture(lean_toolchain, tmp_path_factory.mktemp("built") / "truth")


@pytest.fixture
def demo_root(built_demo: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the built demo project that a test may edit."""
    dest = tmp_path / "demo"
    shutil.copytree(built_demo, dest, symlinks=True)
    yield dest.resolve()


@pytest.fixture
def fake_project(tmp_path: Path) -> Callable[..., Path]:
    """A factory of fake-lane projects under `tmp_path`: `fake_project("name", {"A.lean": "..."})`."""

    def make(name: str = "proj", files: Mapping[str, str] | None = None) -> Path:
        return projects.fake_project(tmp_path / name, files)

    return make


_FAKE_LAKE = """\
import sys
from pathlib import Path

args = sys.argv[1:]
if args[:1] != ["build"]:
    sys.exit(f"fake lake: unsupported command {args!r}")
if "--no-build" not in args:
    for n, module in enumerate(args[1:], 1):
        rel = Path(*module.split("."))
        lib, ir = Path(".lake/build/lib/lean"), Path(".lake/build/ir")
        for artifact in (lib / rel.with_suffix(".olean"), lib / rel.with_suffix(".ilean"),
                         lib / rel.with_suffix(".trace"), ir / rel.with_suffix(".c")):
            artifact.parent.mkdir(parents=True, exist_ok=True)
            artifact.write_text("fake artifact\\n", encoding="utf-8")
        print(f"\u2714 [{n}/{len(args) - 1}] Built {module}", flush=True)
"""


def fake_lake(bin_dir: Path) -> dict[str, str]:
    """Install a stand-in `lake` in `bin_dir` and return an environment whose PATH finds it first.

    `lake build M...` writes each module's olean, ilean, trace and C file and prints a Lake progress line;
    `lake build --no-build ...` succeeds. Pass the environment as `BrokerConfig.env` / `ServerConfig.env`.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    lake = bin_dir / "lake"
    lake.write_text(f"#!{sys.executable}\n{_FAKE_LAKE}", encoding="utf-8")
    lake.chmod(0o755)
    return {**os.environ, "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])}


@contextlib.asynccontextmanager
async def fake_broker(lean: dict[str, object] | None = None, **config: Any) -> AsyncIterator[Broker]:
    """A real `beam_broker.Broker` whose workspaces run the scripted fake Lean server with `lean` (behind
    `gated_cmd`, so a `LeanGate` can hold them); `config` goes to `BrokerConfig`."""
    from beam_broker import Broker, BrokerConfig

    async with Broker.open(BrokerConfig(lean_cmd=gated_cmd(fake_cmd(lean)), **config)) as broker:
        yield broker
