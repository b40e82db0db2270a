"""`lean-beam doctor`: check that lean-beam can work here, one check per line with ok/fail and a hint.

Owns the checks: the Lean server command (`--lean-cmd`, `$BEAM_LEAN_SERVER_CMD` or `lake serve`) and its
executable, `lake` (saves need it) and `lean` on PATH, the project root, the toolchain the project gets (the one
its `lean-toolchain` names when elan's toolchain directory holds it, else the configured command's) and its
version against the project's `lean-toolchain`, a Lean server that starts and answers a sync for one file (the FILE
argument, or a scratch file with no imports under `<root>/.beam/`, removed afterwards), and the daemon socket
directory (private, writable, and short enough for a unix socket path). It runs Lean in this process (never through
a daemon) and changes nothing in the project but its own scratch file.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from beam_broker.config import (
    SERVER_CMD_ENV,
    BrokerConfig,
    elan_home,
    explicit,
    lake_command,
    project_toolchain,
    server_command,
    slow_reports,
)
from beam_broker.errors import RUNTIME_SETUP, BrokerError
from beam_lsp.project import PROJECT_MARKERS, TOOLCHAIN_FILE, read_toolchain

from . import args as cli_args
from . import daemon_client as client
from .common import EXIT_OK, EXIT_SETUP, Options, Output, run, workspace_root
from .progress import Mode, Terminal, progress_mode

Status = Literal["ok", "fail", "skip"]
ELAN_HINT: Final = "install Lean with elan (https://github.com/leanprover/elan), which puts `lake` and `lean` on PATH"
SCRATCH: Final = "prelude\n-- lean-beam doctor: a file with no imports, removed after the check\n"
SOCKET_PATH_MAX: Final = 104
"""The shortest `sun_path` limit among the systems lean-beam runs on (macOS; Linux allows 107 bytes)."""


@dataclasses.dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    status: Status
    detail: str
    hint: str | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON form (`hint` only when there is one)."""
        out: dict[str, Any] = {"name": self.name, "status": self.status, "detail": self.detail}
        if self.hint:
            out["hint"] = self.hint
        return out


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def _fail(name: str, detail: str, hint: str) -> Check:
    return Check(name, "fail", detail, hint)


# ---- the checks ---------------------------------------------------------------------------------------
def check_server_command(options: Options, env: Mapping[str, str]) -> Check:
    """The Lean server command resolves, and its program exists."""
    name = "Lean server command"
    try:
        cmd = server_command(BrokerConfig(lean_cmd=options.lean_cmd), env)
    except BrokerError as exc:
        return _fail(name, exc.message, f"{ELAN_HINT}; or set {SERVER_CMD_ENV} or pass --lean-cmd")
    source = "--lean-cmd" if options.lean_cmd else SERVER_CMD_ENV if env.get(SERVER_CMD_ENV) else "lake on PATH"
    shown = options.redactor().redact(shlex.join(cmd))
    if shutil.which(cmd[0], path=env.get("PATH")) is None:
        return _fail(name, f"{shown} (from {source}): {cmd[0]} is not an executable", "fix the command or PATH")
    return Check(name, "ok", f"{shown} (from {source})", slow_reports(cmd))


def check_lake(options: Options, env: Mapping[str, str], root: str | None = None) -> Check:
    """A `lake` executable for saves (the server's or the project toolchain's, else the one on PATH)."""
    try:
        lake = lake_command(BrokerConfig(lean_cmd=options.lean_cmd), env, root)
    except BrokerError:
        return _fail("lake", "no `lake` on PATH (`lean-beam save` needs it)", ELAN_HINT)
    if shutil.which(lake, path=env.get("PATH")) is None:  # named by the server command, but not there
        return _fail("lake", f"{lake} is not an executable (`lean-beam save` needs it)", ELAN_HINT)
    return _ok("lake", lake)


def check_lean(options: Options, env: Mapping[str, str]) -> Check:
    """A `lean` executable on PATH (not needed when the server command is configured)."""
    found = shutil.which("lean", path=env.get("PATH"))
    if found is not None:
        return _ok("lean", found)
    if options.lean_cmd or env.get(SERVER_CMD_ENV):
        return Check("lean", "skip", "not on PATH; the configured server command is used instead")
    return _fail("lean", "no `lean` on PATH", ELAN_HINT)


def check_root(options: Options, file: str | None = None) -> tuple[Check, str | None]:
    """The project root (`--root` or discovered) and which project files mark it (FILE's project named if need be)."""
    try:
        root = workspace_root(options, file)
    except BrokerError as exc:
        return _fail("project root", exc.message, "run lean-beam inside a Lean/Lake project, or pass --root DIR"), None
    markers = [m for m in PROJECT_MARKERS if (Path(root) / m).is_file()]
    if not markers:
        detail = f"{root} has none of {', '.join(PROJECT_MARKERS)}"
        return _fail("project root", detail, "pass the project's root directory"), None
    return _ok("project root", f"{root} ({', '.join(markers)})"), root


def check_toolchain(root: str | None, lean: Check, env: Mapping[str, str], options: Options | None = None) -> Check:
    """The toolchain the project gets, and its `lean --version` against the version its `lean-toolchain` names.

    An explicitly configured command (`--lean-cmd`, `$BEAM_LEAN_SERVER_CMD`) serves every project. Without one,
    when elan's toolchain directory holds the toolchain the project names, that toolchain serves it (its `lake
    serve`, its `lean`); otherwise `lake serve` and the `lean` on PATH do.
    """
    name = "toolchain"
    wanted = ""
    if root is not None:
        with contextlib.suppress(OSError):
            wanted = read_toolchain(Path(root)) or ""
    config = BrokerConfig(lean_cmd=options.lean_cmd if options is not None else None)
    own = project_toolchain(config, env, root) if root is not None else None
    if own is not None:
        lean = _ok("lean", os.path.join(own.directory, "bin", "lean"))
        served = f"project toolchain {own.name} from {own.directory} serves this project: "
    elif explicit(config, env):
        source = "--lean-cmd" if config.lean_cmd else SERVER_CMD_ENV
        served = f"the command from {source} serves this project (an explicit command wins over its toolchain): "
    else:
        where = os.path.join(elan_home(env), "toolchains")
        served = f"{wanted} is not in {where}, so `lake serve` on PATH serves this project: " if wanted else ""
    checked = _version(name, root, lean, env, wanted)
    return dataclasses.replace(checked, detail=served + checked.detail)


def _version(name: str, root: str | None, lean: Check, env: Mapping[str, str], wanted: str) -> Check:
    """`lean --version` run in the project, against the version its `lean-toolchain` names."""
    if lean.status != "ok":
        return Check(name, "skip", f"no `lean` to ask; the project asks for {wanted or 'no particular version'}")
    try:
        proc = subprocess.run(
            [lean.detail, "--version"],
            cwd=root,
            env=dict(env),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _fail(name, f"`lean --version` failed: {exc}", "check the Lean installation")
    version = (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr).strip() else ""
    if proc.returncode != 0 or not version:
        return _fail(name, f"`lean --version` exited {proc.returncode}", "check the Lean installation")
    number = re.search(r"v?(\d+\.\d+\.\d+(?:-rc\d+)?)", wanted)
    if number is not None and number.group(1) not in version:
        return _fail(
            name,
            f"{version}, but {TOOLCHAIN_FILE} asks for {wanted}",
            f"with elan, `lean` follows {TOOLCHAIN_FILE}: run `elan show` in the project; else install that version",
        )
    return _ok(name, f"{version}" + (f" ({TOOLCHAIN_FILE}: {wanted})" if wanted else ""))


def check_daemon_dir(root: str | None, env: Mapping[str, str]) -> Check:
    """The daemon's socket directory can be created private, and a socket can be bound there."""
    name = "daemon socket directory"
    paths = client.paths_for(root or os.getcwd(), env)
    hint = "set XDG_RUNTIME_DIR to a short private directory you own (or make ~/.cache/beam writable)"
    try:
        client.ensure_private_dir(paths.directory)
    except OSError as exc:
        return _fail(name, f"{paths.directory}: {exc.strerror or exc}", hint)
    if len(os.fsencode(paths.socket)) > SOCKET_PATH_MAX:
        return _fail(name, f"{paths.socket} is longer than a unix socket path may be ({SOCKET_PATH_MAX} bytes)", hint)
    probe = paths.directory / f"doctor-{os.getpid()}.sock"
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(probe))
    except OSError as exc:
        return _fail(name, f"cannot bind a socket in {paths.directory}: {exc.strerror or exc}", hint)
    finally:
        probe.unlink(missing_ok=True)
    state = "a daemon answers" if run(lambda: client.status(paths)) is not None else "no daemon runs"
    return _ok(name, f"{paths.directory} (private; {state} for this project)")


def check_lean_server(options: Options, root: str | None, file: str | None, timeout: float) -> Check:
    """A Lean server starts in this process and answers a sync of FILE (or of a scratch file with no imports)."""
    name = "Lean server"
    if root is None:
        return Check(name, "skip", "no project root")
    scratch: Path | None = None
    beam_dir = Path(root) / ".beam"
    made_beam_dir = False
    if file is None:
        try:
            made_beam_dir = not beam_dir.exists()
            beam_dir.mkdir(exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix="doctor-", dir=beam_dir)) / "Doctor.lean"
            scratch.write_text(SCRATCH, encoding="utf-8")
        except OSError as exc:
            return _fail(name, f"cannot write a scratch file under {root}/.beam: {exc}", "name a file: doctor FILE")
        path = scratch.relative_to(root).as_posix()
    else:
        path = cli_args.resolve_cli_path(file, root, os.getcwd())
    note = f"beam: doctor: starting Lean for {path if file is not None else 'a scratch file'} ..."
    mode, terminal = progress_mode(sys.stderr, quiet=options.quiet), Terminal(sys.stdout, sys.stderr)
    if mode is Mode.LIVE:
        terminal.status(note)  # a live line, cleared with the answer
    elif mode is Mode.LINES:
        terminal.print_err(note)
    try:
        started = time.monotonic()
        result = run(lambda: _sync(options, root, path, timeout))
        elapsed = time.monotonic() - started
    except BrokerError as exc:
        hints = {RUNTIME_SETUP: "fix the Lean server command (see above)"}
        return _fail(name, f"{exc.code}: {options.redactor().redact(exc.message)}", hints.get(exc.code, "see the log"))
    except TimeoutError:
        return _fail(name, f"no answer for {path} within {timeout:g} s", "a first sync may build imports: --timeout")
    finally:
        terminal.clear()
        if scratch is not None:
            shutil.rmtree(scratch.parent, ignore_errors=True)
        if made_beam_dir:
            with contextlib.suppress(OSError):
                beam_dir.rmdir()  # only when nothing else was put there meanwhile
    counts = (result.get("diagnostics") or {}).get("counts") or {}
    errors = counts.get("error", 0)
    verdict = f"{errors} error{'s' if errors != 1 else ''}" if errors else "no errors"
    shown = path if file is not None else "a scratch file"
    return _ok(name, f"started and synced {shown} in {elapsed:.1f} s ({verdict})")


async def _sync(options: Options, root: str, path: str, timeout: float) -> dict[str, Any]:
    import anyio

    from beam_broker.broker import Broker

    with anyio.fail_after(timeout):
        async with Broker.open(BrokerConfig(lean_cmd=options.lean_cmd)) as broker:
            return await broker.call("sync", {"workspace": {"root": root}, "path": path})


# ---- the command --------------------------------------------------------------------------------------
def checks(options: Options, file: str | None, timeout: float, env: Mapping[str, str] | None = None) -> list[Check]:
    """Every check, in order."""
    environ = os.environ if env is None else env
    command = check_server_command(options, environ)
    lean = check_lean(options, environ)
    root_check, root = check_root(options, file)
    lake = check_lake(options, environ, root)
    out = [command, lake, lean, root_check, check_toolchain(root, lean, environ, options)]
    out.append(check_daemon_dir(root, environ))
    if command.status == "ok":
        out.append(check_lean_server(options, root, file, timeout))
    else:
        out.append(Check("Lean server", "skip", "no Lean server command"))
    return out


def text(results: list[Check]) -> list[str]:
    """The checks as aligned lines, hints indented under them."""
    width = max(len(c.name) for c in results)
    lines = []
    for c in results:
        lines.append(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
        if c.hint:
            lines.append(f"{'':<4}  {'':<{width}}  hint: {c.hint}")
    failed = sum(c.status == "fail" for c in results)
    lines.append("all checks passed" if not failed else f"{failed} check{'s' if failed > 1 else ''} failed")
    return lines


def main(args: argparse.Namespace, options: Options) -> int:
    """Run the checks, print them, and return 0 when none failed, else 3."""
    results = checks(options, args.file, args.timeout)
    ok = all(c.status != "fail" for c in results)
    out = Output(options)
    if options.human:
        out.lines(text(results))
    else:
        out.json({"ok": ok, "checks": [c.wire() for c in results]})
    sys.stdout.flush()
    return EXIT_OK if ok else EXIT_SETUP
