"""Secrets never leave the broker: redacted log output (`_outbound`) and one table of every path that could leak.

Finding 5 of the hardening issue: `--lean-cmd "/x/lean-server --auth-token=..."` (or the same in
`BEAM_LEAN_SERVER_CMD`) came back verbatim in the runtime-setup error. Each row of `PATHS` drives one error, log
or status path with a secret flag in the Lean command and a secret environment variable, and asserts that neither
value appears in what comes out, and that the row did reach the secret (a `[redacted:...]` marker is there),
so a row cannot pass by missing the path it names.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from beam_broker import BrokerConfig, CallContext
from beam_broker import broker as broker_module
from beam_broker import errors as codes
from beam_broker._outbound import RedactingFormatter, log_failure
from beam_broker.config import SERVER_CMD_ENV, command_words, server_command
from beam_broker.operations import REGISTRY
from beam_lsp import Redactor
from tests.support.fixtures import fake_cmd

from .support import SYSTEM_PATH, Cli, cli_env, error_of, fake_lake, fake_project, open_broker, workspace_operation

pytestmark = pytest.mark.anyio

FLAG = "tok-FLAG-0123456789"
"""The value of a secret flag of the Lean command (`--auth-token=...`)."""
ENV = "env-SECRET-0123456789"
"""The value of a secret environment variable (`LEAN_API_KEY`)."""
SECRET_ENV = {"LEAN_API_KEY": ENV}
ECHO = f"lean: token {FLAG} key {ENV}"
"""What a misbehaving Lean or Lake prints: both secrets."""


# ---- the formatter and log_failure --------------------------------------------------------------------
def test_the_formatter_redacts_the_message_its_arguments_and_the_traceback() -> None:
    formatter = RedactingFormatter(Redactor({"API_TOKEN": FLAG}), "%(levelname)s %(message)s")
    try:
        raise RuntimeError(f"boom {FLAG}")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "token %s", (FLAG,), sys.exc_info())
    text = formatter.format(record)
    assert text.startswith("ERROR token [redacted:API_TOKEN]") and "RuntimeError: boom [redacted:API_TOKEN]" in text
    assert FLAG not in text


def test_log_failure_logs_a_redacted_traceback_without_exc_info(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("beam_broker.test")
    try:
        raise ValueError(FLAG)
    except ValueError as exc:
        with caplog.at_level(logging.ERROR, logger="beam_broker.test"):
            log_failure(logger, Redactor({"API_TOKEN": FLAG}), exc, "step %s of %s failed", 1, FLAG)
    [record] = caplog.records
    assert record.exc_info is None and FLAG not in caplog.text
    assert "step 1 of [redacted:API_TOKEN] failed" in caplog.text and "ValueError: [redacted:API_TOKEN]" in caplog.text


def test_a_server_command_that_does_not_split_is_runtime_setup_without_echoing_it() -> None:
    env = {SERVER_CMD_ENV: f"lean --auth-token='{FLAG}"}
    with pytest.raises(codes.BrokerError) as info:
        server_command(BrokerConfig(), env)
    assert info.value.code == codes.RUNTIME_SETUP and FLAG not in info.value.message
    assert command_words(BrokerConfig(), env) == ["lean", f"--auth-token={FLAG}"]  # still known as a secret
    assert FLAG not in BrokerConfig().redactor(env).redact(f"x {FLAG}'")


# ---- the table ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Leak:
    """One path out of the broker: `run` returns every text that left by it."""

    run: Callable[[Path, pytest.LogCaptureFixture], Awaitable[list[str]]]
    reaches_secret: bool = True
    """False for a path that carries no command or environment text at all today (pinned to stay so)."""


def flagged(cmd: list[str]) -> list[str]:
    return [*cmd, f"--auth-token={FLAG}"]


def project(tmp_path: Path) -> Path:
    return fake_project(tmp_path / "p", {"A.lean": "theorem x : True := trivial\n"})


async def _setup_lean_cmd(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # `--lean-cmd` naming a command that cannot run at all.
    async with open_broker(cmd=flagged([str(tmp_path / "no-such-lean")]), env=SECRET_ENV) as broker:
        err = await error_of(broker, "sync", project(tmp_path), path="A.lean")
    assert err.code == codes.RUNTIME_SETUP
    return [json.dumps(err.wire())]


async def _setup_env_cmd(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # The same command from `BEAM_LEAN_SERVER_CMD` (the broker's redactor once knew only `--lean-cmd`).
    env = {"PATH": SYSTEM_PATH, "BEAM_LEAN_SERVER_CMD": shlex.join(flagged([str(tmp_path / "no-lean")])), **SECRET_ENV}
    async with broker_module.Broker.open(BrokerConfig(env=env)) as broker:
        err = await error_of(broker, "sync", project(tmp_path), path="A.lean")
    assert err.code == codes.RUNTIME_SETUP
    return [json.dumps(err.wire())]


async def _spawn_exit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # A server that starts, echoes both secrets on stderr and exits during the handshake.
    cmd = flagged(fake_cmd({"stderr_on_start": ECHO, "crash_on": {"method": "initialize"}}))
    async with open_broker(cmd=cmd, env=SECRET_ENV) as broker:
        err = await error_of(broker, "sync", project(tmp_path), path="A.lean")
    assert err.code == codes.RUNTIME_SETUP and "lean: token" in err.message
    return [json.dumps(err.wire())]


async def _stderr_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # A server that dies mid-call: `workerExited` with the stderr tail in `data`.
    lean: dict[str, object] = {"crash_on": {"method": "textDocument/hover", "stderr": ECHO}}
    lean["log_env"] = ["LEAN_API_KEY"]
    async with open_broker(cmd=flagged(fake_cmd(lean)), env=SECRET_ENV) as broker:
        root = project(tmp_path)
        await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
        err = await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=0)
    assert err.code == codes.WORKER_EXITED and err.data is not None and "lean: token" in err.data["stderrTail"]
    return [json.dumps(err.wire())]


async def _lake_output(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # Lake's lines: streamed as setup events and kept as `lakeOutput`.
    lake = fake_lake(tmp_path / "bin", {"build_exit": 1, "build_output": ECHO})
    events: list[Any] = []
    async with open_broker(cmd=flagged(fake_cmd()), env={**lake, **SECRET_ENV}) as broker:
        root = fake_project(tmp_path / "p", {"M.lean": "def m := 1\n"})
        err = await error_of(broker, "save", root, path="M.lean")
        await broker.call("sync", {"workspace": {"root": str(root)}, "path": "M.lean"}, CallContext(events.append))
    assert err.code == codes.INTERNAL_ERROR and err.data is not None and "lakeOutput" in err.data
    return [json.dumps(err.wire()), repr(events)]


async def _internal_error_and_its_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # A bug whose exception text carries both secrets: the error and the logged traceback.
    async def broken(call: Any, inp: Any) -> Any:
        raise RuntimeError(ECHO)

    registry = REGISTRY.replacing(dataclasses.replace(workspace_operation("update"), handler=broken))
    with caplog.at_level(logging.ERROR, logger="beam_broker"):
        async with open_broker(cmd=flagged(fake_cmd()), env=SECRET_ENV, registry=registry) as broker:
            err = await error_of(broker, "update", project(tmp_path), path="A.lean")
    assert err.code == codes.INTERNAL_ERROR and "Traceback" in caplog.text
    return [json.dumps(err.wire()), caplog.text]


async def _stats(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # `beam_stats` after a session ran and after a failed start.
    async with open_broker(cmd=flagged(fake_cmd()), env=SECRET_ENV) as broker:
        root = project(tmp_path)
        await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
        ran = broker.stats()
    async with open_broker(cmd=flagged([str(tmp_path / "no-lean")]), env=SECRET_ENV) as broker:
        await error_of(broker, "sync", root, path="A.lean")
        failed = broker.stats()
    return [json.dumps(ran), json.dumps(failed)]


def _cli(tmp_path: Path, state: Path) -> tuple[Cli, str]:
    """`lean-beam` with the secret environment, and a Lean command that echoes both secrets and exits."""
    cmd = shlex.join(flagged(fake_cmd({"stderr_on_start": ECHO, "crash_on": {"method": "initialize"}})))
    return Cli(cli_env({"PATH": SYSTEM_PATH, **SECRET_ENV}, state), project(tmp_path)), cmd


async def _cli_in_process(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # `lean-beam --no-daemon`: the error it prints.
    state = tmp_path / "s"
    state.mkdir()
    cli, cmd = _cli(tmp_path, state)
    result = cli("--no-daemon", "--lean-cmd", cmd, "sync", "A.lean")
    assert result.code == 3 and result.error["code"] == codes.RUNTIME_SETUP
    return [result.stdout, result.stderr]


async def _daemon(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    # The daemon: `daemon status` (it shows the Lean command), the error it answers, and its log file.
    state = Path(tempfile.mkdtemp(prefix="beam-leak-", dir="/tmp"))  # unix socket paths are short
    cli, cmd = _cli(tmp_path, state)
    try:
        started = cli("--lean-cmd", cmd, "daemon", "start")
        assert started.code == 0, started.stderr
        status = cli("daemon", "status")
        assert status.code == 0 and "[redacted:auth-token]" in json.dumps(status.json["leanCmd"])
        answered = cli("-v", "--lean-cmd", cmd, "sync", "A.lean")  # the same command: the daemon answers
        assert "answered by the daemon" in answered.stderr and answered.error["code"] == codes.RUNTIME_SETUP
        stopped = cli("daemon", "stop")
        assert stopped.code == 0
        log = Path(status.json["log"]).read_text(encoding="utf-8")
        assert "sync: runtimeSetup" in log
        return [status.stdout, answered.stdout, answered.stderr, log]
    finally:
        cli.cleanup()
        shutil.rmtree(state, ignore_errors=True)


PATHS: dict[str, Leak] = {
    "runtime setup: --lean-cmd": Leak(_setup_lean_cmd),
    "runtime setup: BEAM_LEAN_SERVER_CMD": Leak(_setup_env_cmd),
    "spawn: exits during the handshake": Leak(_spawn_exit),
    "stderr tail of a dead server": Leak(_stderr_tail),
    "Lake output (lakeOutput, setup events)": Leak(_lake_output),
    "internal error and its logged traceback": Leak(_internal_error_and_its_log),
    "beam_stats": Leak(_stats, reaches_secret=False),
    "lean-beam in-process error": Leak(_cli_in_process),
    "daemon status, daemon error, daemon log": Leak(_daemon),
}


@pytest.mark.parametrize("name", list(PATHS))
async def test_no_secret_leaves_by_any_error_log_or_status_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    leak = PATHS[name]
    texts = await leak.run(tmp_path, caplog)
    joined = "\n".join(texts)
    assert FLAG not in joined and ENV not in joined, name
    assert FLAG[4:] not in joined and ENV[4:] not in joined  # not even a fragment of the value
    if leak.reaches_secret:
        assert "[redacted:" in joined, f"{name}: the path was not reached with a secret in it"
