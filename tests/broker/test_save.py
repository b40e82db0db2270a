"""Save checkpoints: a clean barrier, then `lake build <Module>` (a fake `lake` on the fake lane)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, CallContext, SetupEvent
from beam_broker import errors as codes

from .support import alive, call, error_of, fake_lake, fake_project, open_broker, wait_dead

pytestmark = pytest.mark.anyio
FILES = {"Demo/Basic.lean": "def one := 1\n", "Demo/Proofs.lean": "import Demo.Basic\ntheorem t : True := trivial\n"}


async def test_save_writes_the_module_artifacts_and_streams_lakes_lines(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", FILES)
    events: list[Any] = []
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        saved = await call(broker, "save", root, ctx=CallContext(emit=events.append), path="Demo/Basic.lean")
        status = await broker.runtime_snapshot(str(root))
    assert saved["workspace"] == {"root": str(root)}
    assert (saved["path"], saved["module"], saved["version"], len(saved["source_hash"])) == (
        "Demo/Basic.lean",
        "Demo.Basic",
        1,
        16,
    )
    for key in ("olean", "ilean", "c", "trace", "olean_server"):
        assert Path(saved[key]).is_file(), key
    assert "ir" not in saved and "bc" not in saved
    assert saved["sync"]["readiness"]["save_ready"] and saved["sync"]["version"] == 1
    assert saved["document_progress"]["done"] is True
    assert SetupEvent("✔ [1/1] Built Demo.Basic", "Demo/Basic.lean") in events
    assert status is not None and status["open_files"][0]["checkpointed"] is True


async def test_save_checks_the_direct_local_imports_first(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", FILES)
    async with open_broker(env=fake_lake(tmp_path / "bin", {"no_build_exit": 1})) as broker:
        stale = await error_of(broker, "save", root, path="Demo/Proofs.lean")
        alone = await call(broker, "save", root, path="Demo/Basic.lean")  # no local imports: nothing to check
    # Lake cannot confirm Basic's build: the verdict the save starts from is already incomplete.
    assert stale.code == codes.SYNC_BARRIER_INCOMPLETE and stale.data is not None
    assert stale.data["saveDeps"] == ["Demo/Basic.lean"]
    assert alone["module"] == "Demo.Basic"


async def test_an_import_stale_between_the_verdict_and_the_build_is_save_trace_stale(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", FILES)
    async with open_broker(env=fake_lake(tmp_path / "bin", {"no_build_exits": [3]})) as broker:
        await call(broker, "save", root, path="Demo/Basic.lean")  # Beam knows what Basic's build is made from
        stale = await error_of(broker, "save", root, path="Demo/Proofs.lean")  # and then Lake says otherwise
    assert stale.code == codes.SAVE_TRACE_STALE and stale.data is not None
    assert stale.data["dependencies"] == ["Demo.Basic"] and stale.data["lakeOutput"] == ["checking Demo.Basic"]


async def test_save_refuses_documents_with_errors_and_files_outside_the_package(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"Broken.lean": "def x := ERROR_HERE\n"})
    outside = tmp_path / "Outside.lean"
    outside.write_text("def q := 1\n")
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        broken = await error_of(broker, "save", root, path="Broken.lean")
        assert (await call(broker, "sync", root, path=str(outside)))["path"] == outside.as_uri()
        not_module = await error_of(broker, "save", root, path=str(outside))
    assert broken.code == codes.INVALID_PARAMS
    assert broken.message == (
        "cannot save artifacts for a document with errors; diagnostics: 1:10: unknown identifier 'ERROR_HERE'"
    )
    assert broken.data is not None and broken.data["sync"]["readiness"]["save_ready"] is False
    assert not_module.code == codes.SAVE_TARGET_NOT_MODULE


@pytest.mark.parametrize(
    ("lake", "code", "needle"),
    [
        (
            {"build_exit": 1, "build_output": "error: unknown target `Demo.Basic`"},
            codes.SAVE_TARGET_NOT_MODULE,
            "Lake does not know",
        ),
        ({"build_exit": 2, "build_output": "error: Demo/Basic.lean: boom"}, codes.INTERNAL_ERROR, "failed (exit 2)"),
        ({"skip": ["ilean", "c"]}, codes.INTERNAL_ERROR, "did not produce: ilean, c"),
        ({"touch": ["Demo/Basic.lean"]}, codes.CONTENT_MODIFIED, "changed on disk during the save"),
        ({"touch_when_checking": ["Demo/Proofs.lean"]}, codes.CONTENT_MODIFIED, "changed on disk after it was synced"),
    ],
)
async def test_a_failed_or_raced_build_is_a_typed_error(
    tmp_path: Path, lake: dict[str, Any], code: str, needle: str
) -> None:
    root = fake_project(tmp_path / "p", FILES)
    path = "Demo/Proofs.lean" if "touch_when_checking" in lake else "Demo/Basic.lean"
    async with open_broker(env=fake_lake(tmp_path / "bin", lake)) as broker:
        if path == "Demo/Proofs.lean":
            await call(broker, "save", root, path="Demo/Basic.lean")  # its import is built: only the save's check runs
        err = await error_of(broker, "save", root, path=path)
    assert err.code == code and needle in err.message


async def test_lake_output_is_redacted(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", FILES)
    env = {
        **fake_lake(tmp_path / "bin", {"build_exit": 1, "build_output": "token hunter2-secret leaked"}),
        "API_TOKEN": "hunter2-secret",
    }
    async with open_broker(env=env) as broker:
        err = await error_of(broker, "save", root, path="Demo/Basic.lean")
    assert err.data is not None and "hunter2-secret" not in "\n".join(err.data["lakeOutput"])


async def test_without_lake_a_save_is_a_runtime_setup_error(tmp_path: Path) -> None:
    # A missing Lake is a setup problem like a missing Lean (it was internalError, which no input may cause).
    root = fake_project(tmp_path / "p", FILES)
    async with open_broker(path="/usr/bin:/bin") as broker:
        err = await error_of(broker, "save", root, path="Demo/Basic.lean")
    assert err.code == codes.RUNTIME_SETUP and "no `lake` executable" in err.message


async def test_close_save_then_close_is_idempotent(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", FILES)
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        result = await call(broker, "close_save", root, path="Demo/Basic.lean")
        closed = await call(broker, "close", root, path="Demo/Basic.lean")
        reopened = await call(broker, "update", root, path="Demo/Basic.lean")
    assert result["closed"] is True and result["saved"]["module"] == "Demo.Basic"
    assert result["document_progress"]["done"] is True and "workspace" not in result["saved"]
    assert closed["closed"] is True and (reopened["version"], reopened["changed"]) == (1, True)


async def test_cancelling_a_save_kills_lake_and_every_process_it_started(tmp_path: Path) -> None:
    # Finding 9: a cancelled lean_save left the compiler running (5.5 s after the cancel on a real project).
    root = fake_project(tmp_path / "p", FILES)
    started = anyio.Event()
    pids: list[int] = []

    def on_event(event: Any) -> None:
        if isinstance(event, SetupEvent) and event.message.startswith("building Demo.Basic pids"):
            pids.extend(int(word) for word in event.message.split()[-2:])
            started.set()

    async with open_broker(env=fake_lake(tmp_path / "bin", {"hang": True})) as broker:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def save() -> None:
                    await call(broker, "save", root, ctx=CallContext(emit=on_event), path="Demo/Basic.lean")

                tg.start_soon(save)
                await started.wait()  # Lake runs and its compiler child too
                tg.cancel_scope.cancel()
        lake, compiler = pids
        try:
            # Killed at once, as a group: Lake is gone when the cancelled call returns, its compiler a moment
            # later (the kill went to both; without it the compiler would run for another 600 s).
            assert not alive(lake)
            wait_dead(compiler, timeout=5)
        finally:
            with contextlib.suppress(OSError):
                os.kill(compiler, signal.SIGKILL)
        assert (await call(broker, "update", root, path="Demo/Basic.lean"))["changed"] is False


async def test_a_file_whose_name_is_not_a_module_never_reaches_lakes_command_line(tmp_path: Path) -> None:
    # Finding 7: lean_save on a file named `--help.lean` ran `lake build --help`.
    root = fake_project(tmp_path / "p", {"--help.lean": "def x := 1\n", "A.lean": "import --help\ndef y := 2\n"})
    argv_log = tmp_path / "lake-argv.jsonl"
    async with open_broker(env=fake_lake(tmp_path / "bin", {"argv_log": str(argv_log)})) as broker:
        err = await error_of(broker, "save", root, path="--help.lean")
        # An import that is no module name is not passed to `lake build --no-build` either.
        saved = await call(broker, "save", root, path="A.lean")
    assert err.code == codes.SAVE_TARGET_NOT_MODULE and err.data == {"module": "--help"}
    assert "'--help' is not a dot-separated sequence of Lean identifiers" in err.message
    assert saved["module"] == "A"
    assert [json.loads(line) for line in argv_log.read_text().splitlines()] == [["build", "A"]]


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_save_writes_the_module_artifacts_and_importers_see_them(broker: Broker, demo_root: Path) -> None:
    basic = demo_root / "Demo/Basic.lean"
    basic.write_text(basic.read_text() + "\ntheorem fresh : MyTrue := myTrue\n")
    saved = await call(broker, "save", demo_root, path="Demo/Basic.lean")
    assert saved["module"] == "Demo.Basic" and saved["version"] == 1 and len(saved["source_hash"]) == 16
    for key in ("olean", "ilean", "c", "trace"):
        assert Path(saved[key]).is_file(), key
    assert saved["sync"]["readiness"]["save_ready"] and saved["sync"]["version"] == 1
    assert saved["document_progress"]["done"] is True
    (demo_root / "Demo/UsesFresh.lean").write_text("prelude\nimport Demo.Basic\n\ntheorem again : MyTrue := fresh\n")
    downstream = await call(broker, "sync", demo_root, path="Demo/UsesFresh.lean")
    assert downstream["diagnostics"]["counts"]["error"] == 0


@pytest.mark.lean
async def test_save_refuses_errors_non_modules_and_stale_upstream(
    broker: Broker, demo_root: Path, tmp_path: Path
) -> None:
    broken = await error_of(broker, "save", demo_root, path="Demo/Broken.lean")
    assert broken.code == codes.INVALID_PARAMS and "cannot save artifacts for a document with errors" in broken.message
    assert broken.data is not None and broken.data["sync"]["readiness"]["save_ready"] is False
    outside = tmp_path / "Outside.lean"
    outside.write_text("prelude\ninductive Q where\n  | q\n")
    assert (await call(broker, "sync", demo_root, path=str(outside)))["path"] == outside.as_uri()
    not_module = await error_of(broker, "save", demo_root, path=str(outside))
    assert not_module.code == codes.SAVE_TARGET_NOT_MODULE
    basic = demo_root / "Demo/Basic.lean"
    basic.write_text(basic.read_text() + "\n-- edited behind Beam's back\n")
    stale = await error_of(broker, "save", demo_root, path="Demo/Proofs.lean")
    assert stale.code == codes.SYNC_BARRIER_INCOMPLETE and stale.data is not None  # the verdict is not clean
    assert stale.data["saveDeps"] == ["Demo/Basic.lean"]


@pytest.mark.lean
async def test_close_save_then_close_is_idempotent_on_real_lean(broker: Broker, demo_root: Path) -> None:
    result = await call(broker, "close_save", demo_root, path="Demo/Proofs.lean")
    assert result["closed"] is True and result["saved"]["module"] == "Demo.Proofs"
    assert (await call(broker, "close", demo_root, path="Demo/Proofs.lean"))["closed"] is True
    reopened = await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    assert (reopened["version"], reopened["changed"]) == (1, True)


async def test_lakes_stderr_is_redacted_by_line_even_when_a_secret_arrives_in_two_reads(tmp_path: Path) -> None:
    # Review finding: stderr was redacted per read, so a secret that Lake wrote in two pieces (two reads of the
    # pipe) came out as two tail lines that together spelled it, past the redactor and every later one.
    import sys

    from beam_broker import _lake as lake
    from beam_lsp.redaction import Redactor

    secret = "tok-0123456789abcdef"
    child = (
        "import fcntl, os, struct, termios, time\n"
        "def unread():\n"
        "    return struct.unpack('i', fcntl.ioctl(2, termios.FIONREAD, b'\\0\\0\\0\\0'))[0]\n"
        f"os.write(2, b'fetch failed: {secret[:8]}')\n"
        "while unread():  # until the first piece was read: the rest arrives in a read of its own\n"
        "    time.sleep(0.001)\n"
        f"os.write(2, b'{secret[8:]} denied\\n')\n"
    )
    redactor = Redactor({"LAKE_API_TOKEN": secret})
    with anyio.fail_after(30):
        code, lines = await lake.run(
            [sys.executable, "-c", child], cwd=str(tmp_path), env=os.environ, redactor=redactor
        )
    assert code == 0
    assert lines == ["fetch failed: [redacted:LAKE_API_TOKEN] denied"]


async def test_lake_never_reads_the_servers_stdin(tmp_path: Path) -> None:
    # Review finding: Lake inherited the process's stdin, which for `lean-beam-mcp` over stdio is the client's MCP
    # stream: a Lake (or a build step) that read stdin took the client's messages.
    import sys

    from beam_broker import _lake as lake
    from beam_lsp.redaction import Redactor

    child = "import os\nprint('read', len(os.read(0, 100)))\n"
    read, write = os.pipe()
    os.write(write, b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}\n')
    saved = os.dup(0)
    os.dup2(read, 0)  # this process's stdin now holds a client's message, as an MCP server's does
    try:
        with anyio.fail_after(30):
            code, lines = await lake.run(
                [sys.executable, "-c", child], cwd=str(tmp_path), env=os.environ, redactor=Redactor()
            )
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)
    assert (code, lines) == (0, ["read 0"])
