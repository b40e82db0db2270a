"""Fake-lane helpers for broker tests: projects, brokers over the scripted fake Lean, a fake `lake`, calls.

The fake Lean server (`tests/support/fake_lean.py`) scripts faults by config; `first_start_cmd` gives the first
server of a broker one config and every later (restarted) server another, so a test can crash Lean once and
watch the next call recover. `fake_lake` installs a `lake` executable that builds nothing but writes the
artifacts a real `lake build <Module>` would, as its config says (it can also log its argument lists and hang
with a child process, like a compiler running under Lake). `Cli` runs `lean-beam` as a child process. `spy`
records which document each chosen Lean request went to (the document itself or a probe mirror).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from beam_broker import Broker, BrokerConfig, BrokerError, CallContext
from beam_broker.operations import REGISTRY, Registry, WorkspaceOperation
from tests.support.fixtures import FAKE_LEAN, fake_cmd
from tests.support.projects import fake_project

TIMEOUT = 120
"""Bound of one call: generous, because the real-Lean lane shares these helpers on a loaded machine."""
SYSTEM_PATH = os.environ.get("PATH", "/usr/bin:/bin")

__all__ = [
    "CLI",
    "TIMEOUT",
    "Cli",
    "Result",
    "alive",
    "call",
    "cli_env",
    "error_of",
    "fake_lake",
    "fake_project",
    "first_start_cmd",
    "open_broker",
    "spy",
    "wait_dead",
]

_FIRST_START = """\
import os, runpy, sys
marker, first, later, fake = sys.argv[1:5]
try:
    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    config = first
except FileExistsError:
    config = later
sys.argv = [fake, "--config", config]
runpy.run_path(fake, run_name="__main__")
"""


def first_start_cmd(marker: Path, first: Mapping[str, Any], later: Mapping[str, Any] | None = None) -> list[str]:
    """A fake Lean command whose first start (per `marker` file) uses `first`, every later one `later`."""
    return [sys.executable, "-c", _FIRST_START, str(marker), json.dumps(first), json.dumps(later or {}), str(FAKE_LEAN)]


@contextlib.asynccontextmanager
async def open_broker(
    lean: Mapping[str, Any] | None = None,
    *,
    cmd: list[str] | None = None,
    path: str = SYSTEM_PATH,
    env: Mapping[str, str] | None = None,
    registry: Registry = REGISTRY,
    **config: Any,
) -> AsyncIterator[Broker]:
    """A real broker whose workspaces run the fake Lean with `lean` (or `cmd`), `PATH=path` plus `env`.

    `registry` is the operations it serves (a test injects a handler by replacing one).
    """
    lean_cmd = cmd if cmd is not None else fake_cmd(dict(lean) if lean else None)
    broker_config = BrokerConfig(lean_cmd=lean_cmd, env={"PATH": path, **(env or {})}, **config)
    async with Broker.open(broker_config, registry=registry) as broker:
        yield broker


def workspace_operation(name: str) -> WorkspaceOperation[BaseModel, BaseModel]:
    """The built-in workspace operation `name` (to replace its handler: `REGISTRY.replacing(...)`)."""
    spec = REGISTRY.by_name[name]
    assert isinstance(spec, WorkspaceOperation)
    return spec


async def call(broker: Broker, name: str, root: Path, *, ctx: CallContext | None = None, **args: Any) -> dict[str, Any]:
    """`broker.call(name, {workspace: root, **args})`, bounded."""
    with anyio.fail_after(TIMEOUT):
        return await broker.call(name, {"workspace": {"root": str(root)}, **args}, ctx)


def during_first_update(
    broker: Broker, root: Path, monkeypatch: pytest.MonkeyPatch, then: Callable[[], Awaitable[Any]]
) -> list[bool]:
    """Run `then` (another call) once, inside the next call on `root`'s runtime, after it has updated its document.

    So the outer call is still running when `then` ends: the outer call ends last. Returns a list that holds True
    once `then` has run.
    """
    runtime = broker.cached(str(root))
    assert runtime is not None
    update = runtime.update
    ran: list[bool] = []

    async def update_then(client: Any, rel: Any, **kwargs: Any) -> Any:
        out = await update(client, rel, **kwargs)
        if not ran:
            ran.append(True)
            await then()
        return out

    monkeypatch.setattr(runtime, "update", update_then)
    return ran


async def error_of(broker: Broker, name: str, root: Path, **args: Any) -> BrokerError:
    """The `BrokerError` a call raises (fails the test when it succeeds)."""
    with pytest.raises(BrokerError) as info:
        await call(broker, name, root, **args)
    return info.value


_FAKE_LAKE = """\
#!{python}
# A test stand-in for `lake build`: writes the artifacts a module build produces, as FAKE_LAKE (JSON) says.
# Like Lake, `build --no-build` exits 3 when a module's artifacts are not made from its source (by content).
# Sources are under `src_dir` and artifacts under `build_dir` when FAKE_LAKE sets them (the lakefile's srcDir and
# buildDir: this stand-in does not read the lakefile).
import hashlib, json, os, sys
from pathlib import Path

cfg = json.loads(os.environ.get("FAKE_LAKE") or "{{}}")
SRC, BUILD = Path(cfg.get("src_dir", ".")), Path(cfg.get("build_dir", ".lake/build"))

def source_hash(module):
    return hashlib.sha256(SRC.joinpath(*module.split(".")).with_suffix(".lean").read_bytes()).hexdigest()

def trace_of(module):
    return BUILD.joinpath("lib", "lean", *module.split(".")).with_suffix(".trace")

args = sys.argv[1:]
if cfg.get("argv_log"):
    with open(cfg["argv_log"], "a") as f:
        f.write(json.dumps(args) + "\\n")
if args[:2] == ["build", "--no-build"]:
    print("checking", " ".join(args[2:]))
    for name in cfg.get("touch_when_checking", []):
        with open(name, "a") as f:
            f.write("-- touched while checking\\n")
    if "no_build_exit" in cfg:
        sys.exit(int(cfg["no_build_exit"]))
    if "no_build_exits" in cfg:  # one exit code per check, in turn (the last one repeats)
        count = Path(".fake-lake-checks")
        n = int(count.read_text()) if count.exists() else 0
        count.write_text(str(n + 1))
        codes = cfg["no_build_exits"]
        sys.exit(int(codes[min(n, len(codes) - 1)]))
    for name in args[2:]:
        trace = trace_of(name)
        if not trace.is_file() or trace.read_text() != source_hash(name):
            print(f"error: {{name}}: target is out-of-date and needs to be rebuilt", file=sys.stderr)
            sys.exit(3)
    sys.exit(0)
if args[:1] != ["build"] or len(args) != 2:
    print("fake lake: unsupported", args, file=sys.stderr)
    sys.exit(2)
module = args[1]
if cfg.get("hang"):
    # A compiler that runs until killed, in Lake's process group (as `lean` does under `lake build`).
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("building", module, "pids", os.getpid(), child.pid, flush=True)
    child.wait()
    sys.exit(1)
if cfg.get("build_exit"):
    print(cfg.get("build_output", "error: build failed"))
    sys.exit(int(cfg["build_exit"]))
rel = Path(*module.split("."))
lib, ir = BUILD / "lib" / "lean", BUILD / "ir"
outputs = {{
    "olean": lib / rel.with_suffix(".olean"),
    "ilean": lib / rel.with_suffix(".ilean"),
    "trace": lib / rel.with_suffix(".trace"),
    "c": ir / rel.with_suffix(".c"),
    "olean_server": lib / rel.with_suffix(".olean.server"),
}}
for key, path in outputs.items():
    if key in cfg.get("skip", []):
        continue
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source_hash(module) if key == "trace" else module)
for name in cfg.get("touch", []):
    with open(name, "a") as f:
        f.write("-- touched during the build\\n")
print("\\u2714 [1/1] Built " + module)
print("Build completed successfully.", file=sys.stderr)
"""


def fake_lake(directory: Path, config: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Install a fake `lake` in `directory`; returns the environment (`PATH`, `FAKE_LAKE`) that selects it."""
    directory.mkdir(parents=True, exist_ok=True)
    lake = directory / "lake"
    lake.write_text(_FAKE_LAKE.format(python=sys.executable), encoding="utf-8")
    lake.chmod(0o755)
    return {"PATH": f"{directory}{os.pathsep}{SYSTEM_PATH}", "FAKE_LAKE": json.dumps(dict(config or {}))}


# ---- the `lean-beam` command as a child process -------------------------------------------------------
CLI = [sys.executable, "-m", "beam_broker.cli"]
CLI_TIMEOUT = 60


@dataclasses.dataclass
class Result:
    """A finished `lean-beam` process."""

    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any]:
        """The error JSON: the last `{`-block on stderr."""
        lines = self.stderr.splitlines()
        start = max(i for i, line in enumerate(lines) if line.startswith("{"))
        value: dict[str, Any] = json.loads("\n".join(lines[start:]))
        return value


@dataclasses.dataclass
class Cli:
    """Runs `lean-beam` as a child process with a fixed environment; remembers daemon pids to clean up."""

    env: dict[str, str]
    cwd: Path
    pids: list[int] = dataclasses.field(default_factory=list)

    def __call__(
        self, *args: str, cwd: Path | None = None, input: str | None = None, timeout: float = CLI_TIMEOUT
    ) -> Result:
        proc = subprocess.run(
            [*CLI, *args],
            cwd=cwd or self.cwd,
            env=self.env,
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            check=False,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if args[-2:] == ("daemon", "start") and result.code == 0:
            self.pids.append(result.json["pid"])
        return result

    def cleanup(self) -> None:
        """Kill every daemon this test started (stop is tested explicitly; teardown must not depend on it)."""
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def cli_env(base: Mapping[str, str], state: Path, **extra: str) -> dict[str, str]:
    """`base` without a server command override, with a private `XDG_RUNTIME_DIR` and `extra`."""
    env = {k: v for k, v in base.items() if k != "BEAM_LEAN_SERVER_CMD"}
    return {**env, "XDG_RUNTIME_DIR": str(state), **extra}


def wait_dead(pid: int, timeout: float = 20) -> None:
    """Wait until a process that is not our child has exited (a pidfd becomes readable when it does)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    assert readable, f"process {pid} is still alive after {timeout} s"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def spy(monkeypatch: pytest.MonkeyPatch, *methods: str) -> list[tuple[str, str]]:
    """Record (method, file name) of every call of these `LeanClient` methods."""
    from beam_lsp import LeanClient

    asked: list[tuple[str, str]] = []
    for name in methods:
        original = getattr(LeanClient, name)

        async def recorded(self: Any, uri: str, *args: Any, _f: Any = original, _n: str = name, **kw: Any) -> Any:
            asked.append((_n, uri.rsplit("/", 1)[-1]))
            return await _f(self, uri, *args, **kw)

        monkeypatch.setattr(LeanClient, name, recorded)
    return asked
