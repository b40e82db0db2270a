"""The broker: runtimes by root, `call()` (validate, boundary, handler, metrics), drop, stats, diagnostics resources.

Fake-lane tests drive the real broker over the scripted fake Lean; `lean`-marked ones use the lane's real Lean.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

import beam_broker
from beam_broker import BY_NAME, RUNTIME_SETUP, Broker, BrokerConfig, BrokerError, CallContext, PreparationEvent
from beam_broker import errors as codes
from beam_broker import models as m
from beam_broker.operations import REGISTRY
from beam_broker.workspace import WorkspaceDescriptor
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

from .support import call, during_first_update, error_of, fake_project, open_broker, workspace_operation

pytestmark = pytest.mark.anyio


# ---- fake lane ----------------------------------------------------------------------------------------
async def test_a_missing_server_command_is_a_runtime_setup_error(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    async with Broker.open(BrokerConfig(env={"PATH": str(tmp_path / "empty")})) as broker:
        err = await error_of(broker, "sync", root, path="A.lean")
    assert err.code == RUNTIME_SETUP and "lake" in err.message


async def test_a_server_that_cannot_start_is_a_runtime_setup_error(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": ""})
    async with open_broker(cmd=[str(tmp_path / "no-such-lean")]) as broker:
        err = await error_of(broker, "update", root, path="A.lean")
        assert err.code == RUNTIME_SETUP and "could not start the Lean server" in err.message
        died = await error_of(broker, "update", root, path="A.lean")  # a later call tries again
    assert died.code == RUNTIME_SETUP


async def test_the_server_command_comes_from_the_environment_when_not_given(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    env = {"PATH": "/usr/bin:/bin", "BEAM_LEAN_SERVER_CMD": " ".join(fake_cmd())}
    async with Broker.open(BrokerConfig(env=env)) as broker:
        result = await call(broker, "sync", root, path="A.lean")
    assert result["readiness"]["save_ready"] is True


async def test_a_server_that_dies_fails_the_call_and_the_next_call_restarts_it(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    async with open_broker({"crash_on": {"method": "textDocument/hover"}}) as broker:
        await call(broker, "sync", root, path="A.lean")
        err = await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=8)
        assert err.code == codes.WORKER_EXITED
        assert err.data is not None and "INTERNAL PANIC" in err.data["stderrTail"]
        again = await call(broker, "update", root, path="A.lean")
        assert (again["version"], again["changed"]) == (1, True)
        lean = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]
    assert (lean["sessionStarts"], lean["sessionRestarts"], lean["workerExitedCount"], lean["workerExits"]) == (
        2,
        1,
        1,
        1,
    )


async def test_lean_errors_keep_their_lsp_names(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    async with open_broker({"content_modified": ["textDocument/hover"]}) as broker:
        await call(broker, "update", root, path="A.lean")
        err = await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=8)
    assert err.code == codes.CONTENT_MODIFIED and err.data == {"lspCode": -32801}


async def test_an_unknown_operation_and_bad_input_are_invalid_input_before_any_runtime(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": ""})
    async with open_broker() as broker:
        with pytest.raises(BrokerError) as unknown:
            await broker.call("nope", {"workspace": {"root": str(root)}})
        assert unknown.value.code == codes.INVALID_INPUT and "unknown operation 'nope'" in unknown.value.message
        cases: list[tuple[dict[str, Any], str]] = [
            ({"path": "A.lean", "bogus": 1}, "accepts no undeclared input fields: bogus"),
            ({"path": "A.lean", "diagnostic_scope": True}, "diagnostic_scope"),
            ({"path": "A.lean", "diagnostics_in_result": "true"}, "diagnostics_in_result"),
            ({"path": 3}, "path"),
        ]
        for args, needle in cases:
            err = await error_of(broker, "sync", root, **args)
            assert err.code == codes.INVALID_INPUT and needle in err.message
        with pytest.raises(BrokerError, match="not a Lean/Lake project"):
            await broker.call("sync", {"workspace": {"root": str(tmp_path)}, "path": "A.lean"})
        with pytest.raises(BrokerError, match="takes FileInput, not SyncInput"):
            await broker.call("update", BY_NAME["sync"].parse({"workspace": {"root": str(root)}, "path": "A.lean"}))
        assert not broker.active and broker.stats() == {"uptimeMs": 0, "workspaces": {}}


async def test_a_parsed_input_model_is_accepted_and_its_root_canonicalized(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    (tmp_path / "alias").symlink_to(root)
    events: list[Any] = []
    async with open_broker() as broker:
        inp = BY_NAME["update"].parse({"workspace": {"root": str(root)}, "path": "A.lean"})
        parsed = await broker.call("update", inp, CallContext(emit=events.append))
        by_hand = m.FileInput(path="A.lean", workspace=WorkspaceDescriptor(root=str(tmp_path / "alias")))
        again = await broker.call("update", by_hand)
    assert isinstance(parsed.pop("snapshot"), str)
    assert parsed == {"workspace": {"root": str(root)}, "version": 1, "changed": True}
    assert again["workspace"] == {"root": str(root)} and again["changed"] is False
    assert events[0] == PreparationEvent(
        "lean_update on A.lean: preparing the Lean workspace", "A.lean", "preparing the Lean workspace"
    )


async def test_an_unexpected_failure_is_a_logged_internal_error_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": ""})

    async def broken(call: Any, inp: Any) -> Any:
        raise ZeroDivisionError("a bug")

    async def wrong_type(call: Any, inp: Any) -> Any:
        return m.CloseResult(workspace=inp.workspace, closed=True)

    registry = REGISTRY.replacing(
        dataclasses.replace(workspace_operation("update"), handler=broken),
        dataclasses.replace(workspace_operation("sync"), handler=wrong_type),
    )
    async with open_broker(registry=registry) as broker:
        bug = await error_of(broker, "update", root, path="A.lean")
        typed = await error_of(broker, "sync", root, path="A.lean")
        ops = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]["ops"]
    assert bug.code == typed.code == codes.INTERNAL_ERROR and "ZeroDivisionError: a bug" == bug.message
    assert "returned CloseResult, not SyncReply" in typed.message
    assert ops["update_file"]["errorCount"] == 1 and "a bug" in caplog.text


async def test_parallel_cold_calls_on_one_root_share_one_runtime_and_one_server(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n", "B.lean": "ERROR_HERE\n", "C.lean": "y\n"})
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    async with open_broker({"elab_ms": 20}) as broker:
        async with anyio.create_task_group() as tg:
            for at, path in ((root, "A.lean"), (alias, "B.lean"), (alias, "C.lean")):
                tg.start_soon(functools.partial(call, broker, "sync", at, path=path))
        stats = broker.stats()["workspaces"]
        assert list(stats) == [f"local:{root}"]
        assert stats[f"local:{root}"]["byBackend"]["lean"]["sessionStarts"] == 1
        assert stats[f"local:{root}"]["sessions"]["lean"]["openDocCount"] == 3
        echoed = await call(broker, "update", alias, path="A.lean")
    assert echoed["workspace"] == {"root": str(root)}


async def test_drop_is_idempotent_reports_the_files_it_knew_and_a_later_call_recreates_the_runtime(
    tmp_path: Path,
) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "ERROR_HERE\n", "B.lean": "x\n"})
    changed: list[str] = []
    async with open_broker() as broker:
        broker.add_diagnostics_listener(changed.append)
        await call(broker, "sync", root, path="A.lean")
        await call(broker, "update", root, path="B.lean")
        await call(broker, "run_at", root, path="A.lean", version=1, line=0, character=0, text="#check x")
        events: list[Any] = []
        changed.clear()
        first = await call(broker, "drop_workspace", root, ctx=CallContext(emit=events.append))
        assert first == {"workspace": {"root": str(root)}, "dropped": True, "invalidated_handles": True}
        assert sorted(set(changed)) == [str(root / "A.lean"), str(root / "B.lean")]
        assert broker.diagnostics(str(root / "A.lean"))["tracked"] is False
        assert events == [
            PreparationEvent("lean_drop_workspace: preparing workspace eviction", None, "preparing workspace eviction")
        ]
        second = await call(broker, "drop_workspace", root)
        assert (second["dropped"], second["invalidated_handles"], second["reason"]) == (False, False, "notFound")
        assert not broker.active and broker.cached(str(root)) is None
        again = await call(broker, "sync", root, path="A.lean")
        assert again["version"] == 1 and broker.active


async def test_drop_accepts_the_echoed_descriptor_after_the_directory_is_gone(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n"})
    async with open_broker() as broker:
        echoed = (await call(broker, "sync", root, path="A.lean"))["workspace"]
        shutil.rmtree(root)
        with anyio.fail_after(20):
            dropped = await broker.call("drop_workspace", {"workspace": echoed})
            again = await broker.call("drop_workspace", {"workspace": echoed})
    assert (dropped["dropped"], again["dropped"], again["reason"]) == (True, False, "notFound")


async def test_a_call_on_a_runtime_dropped_meanwhile_is_content_modified(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None
        await call(broker, "drop_workspace", root)
        with pytest.raises(BrokerError) as info:
            await runtime.client()
    assert info.value.code == codes.CONTENT_MODIFIED and "was dropped" in info.value.message


async def test_stats_describe_sessions_and_per_operation_metrics(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n"})
    async with open_broker() as broker:
        await call(broker, "sync", root, path="A.lean")
        await error_of(broker, "hover", root, path="A.lean", version=9, line=0, character=0)
        stats = broker.stats()
        workspace = stats["workspaces"][f"local:{root}"]
    assert stats["uptimeMs"] >= 0 and workspace["id"] == f"local:{root}" and workspace["root"] == str(root)
    session = workspace["sessions"]["lean"]
    assert (session["active"], session["epoch"], session["openDocCount"]) == (True, 1, 1)
    assert session["client"]["requests"] >= 1
    lean = workspace["byBackend"]["lean"]
    assert (lean["requestCount"], lean["successCount"], lean["errorCount"]) == (2, 1, 1)
    assert lean["ops"]["sync_file"]["successCount"] == 1 and lean["ops"]["hover"]["errorCount"] == 1


async def test_diagnostics_resources_list_open_documents_and_notify_changes(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem t : True := ERROR_HERE\n"})
    broken = str(root / "A.lean")
    changed: list[str] = []
    async with open_broker() as broker:
        remove = broker.add_diagnostics_listener(changed.append)
        assert broker.diagnostics(broken) == {
            "path": broken,
            "tracked": False,
            "availability": "pending",
            "diagnostics": [],
        }
        await call(broker, "sync", root, path="A.lean")
        await call(broker, "run_at", root, path="A.lean", version=1, line=0, character=0, text="#check fine")
        assert broker.open_documents() == [broken]  # the probe mirror is not a document
        snap = broker.diagnostics(broken)
        assert (snap["tracked"], snap["availability"], snap["version"], snap["elaboration"]) == (
            True,
            "published",
            1,
            "complete",
        )
        assert snap["diagnostics"][0]["message"] == "unknown identifier 'ERROR_HERE'"
        assert broken in changed and all("_beamProbe" not in p for p in changed)
        remove()
        remove()
        changed.clear()
        await call(broker, "refresh", root, path="A.lean")
    assert changed == []


async def test_the_runtime_snapshot_reports_open_files_against_the_disk(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n", "B.lean": "y\n", "C.lean": "z\n"})
    async with open_broker() as broker:
        assert await broker.runtime_snapshot(str(root)) is None
        for path in ("A.lean", "B.lean", "C.lean"):
            await call(broker, "update", root, path=path)
        (root / "A.lean").write_text("x changed\n")
        (root / "B.lean").unlink()
        (root / "C.lean").write_bytes(b"\xff\xfe")
        snap = await broker.runtime_snapshot(str(root))
    assert snap is not None and snap["stats"]["root"] == str(root)
    files = {f["path"]: (f["diskStatus"], f["checkpointed"], f["version"]) for f in snap["open_files"]}
    assert files == {
        "A.lean": ("differsFromTracked", False, 1),
        "B.lean": ("missing", False, 1),
        "C.lean": ("unknown", False, 1),
    }


async def test_leaving_the_broker_stops_every_lean_server(tmp_path: Path) -> None:
    first = fake_project(tmp_path / "one", {"A.lean": "x\n"})
    second = fake_project(tmp_path / "two", {"A.lean": "x\n"})
    async with open_broker() as broker:
        await call(broker, "update", first, path="A.lean")
        await call(broker, "update", second, path="A.lean")
        clients = [await rt.client() for rt in (broker.cached(str(first)), broker.cached(str(second))) if rt]
        assert len(clients) == 2 and broker.operations() == beam_broker.OPERATIONS
    assert all(client.exited is not None for client in clients)


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_symlinked_roots_share_one_runtime_and_parallel_cold_calls_start_one_server(
    broker: Broker, demo_root: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(demo_root)
    async with anyio.create_task_group() as tg:
        for root, path in ((demo_root, "Demo/Proofs.lean"), (alias, "Demo/Broken.lean"), (alias, "Demo/Warn.lean")):
            tg.start_soon(functools.partial(call, broker, "sync", root, path=path))
    stats = broker.stats()["workspaces"]
    assert list(stats) == [f"local:{demo_root}"]
    assert stats[f"local:{demo_root}"]["byBackend"]["lean"]["sessionStarts"] == 1
    echoed = await call(broker, "update", alias, path="Demo/Proofs.lean")
    assert echoed["workspace"] == {"root": str(demo_root)}


@pytest.mark.lean
async def test_drop_is_idempotent_and_a_later_call_recreates_the_runtime(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    first = await call(broker, "drop_workspace", demo_root)
    assert first == {"workspace": {"root": str(demo_root)}, "dropped": True, "invalidated_handles": True}
    second = await call(broker, "drop_workspace", demo_root)
    assert (second["dropped"], second["reason"]) == (False, "notFound")
    assert not broker.active
    again = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert again["version"] == 1 and broker.active


@pytest.mark.lean
async def test_invalid_inputs_are_rejected_before_any_runtime_exists(broker: Broker, demo_root: Path) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"path": "Demo/Proofs.lean", "bogus": 1}, "accepts no undeclared input fields: bogus"),
        ({"path": "Demo/Proofs.lean", "diagnostic_scope": True}, "diagnostic_scope"),
        ({"path": 3}, "path"),
    ]
    for args, needle in cases:
        with pytest.raises(BrokerError) as info:
            await broker.call("sync", {"workspace": {"root": str(demo_root)}, **args})
        assert info.value.code == codes.INVALID_INPUT and needle in info.value.message
    with pytest.raises(BrokerError, match="not a Lean/Lake project"):
        await broker.call("sync", {"workspace": {"root": str(demo_root / "Demo")}, "path": "Proofs.lean"})
    assert not broker.active


@pytest.mark.lean
async def test_diagnostics_resources_on_real_lean(broker: Broker, demo_root: Path) -> None:
    changed: list[str] = []
    remove = broker.add_diagnostics_listener(changed.append)
    broken = str(demo_root / "Demo/Broken.lean")
    assert broker.diagnostics(broken) == {
        "path": broken,
        "tracked": False,
        "availability": "pending",
        "diagnostics": [],
    }
    await call(broker, "sync", demo_root, path="Demo/Broken.lean")
    await call(broker, "run_at", demo_root, path="Demo/Broken.lean", version=1, line=5, character=0, text="#check fine")
    assert broker.open_documents() == [broken]  # the probe mirror is not a document
    snap = broker.diagnostics(broken)
    assert (snap["tracked"], snap["availability"], snap["version"], snap["elaboration"]) == (
        True,
        "published",
        1,
        "complete",
    )
    assert snap["diagnostics"][0]["message"].startswith("Type mismatch") and "fullRange" in snap["diagnostics"][0]
    assert broken in changed and all("_beamProbe" not in p for p in changed)
    remove()
    changed.clear()
    await call(broker, "refresh", demo_root, path="Demo/Broken.lean")
    assert changed == []


@pytest.mark.lean
async def test_distinct_roots_get_their_own_runtimes_side_by_side(
    broker: Broker, demo_root: Path, built_demo: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(built_demo, other, symlinks=True)
    results: dict[str, dict[str, Any]] = {}

    async def sync(root: Path, path: str) -> None:
        results[str(root)] = await call(broker, "sync", root, path=path)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sync, demo_root, "Demo/Proofs.lean")
        tg.start_soon(sync, other.resolve(), "Demo/Broken.lean")
    assert results[str(demo_root)]["diagnostics"]["counts"]["error"] == 0
    assert results[str(other.resolve())]["diagnostics"]["counts"]["error"] == 1
    assert sorted(broker.stats()["workspaces"]) == sorted([f"local:{demo_root}", f"local:{other.resolve()}"])


@pytest.mark.lean
async def test_drop_accepts_the_echoed_descriptor_after_the_directory_is_gone_on_real_lean(
    broker: Broker, demo_root: Path, tmp_path: Path
) -> None:
    echoed = (await call(broker, "sync", demo_root, path="Demo/Proofs.lean"))["workspace"]
    demo_root.rename(tmp_path / "moved")
    with anyio.fail_after(60):
        dropped = await broker.call("drop_workspace", {"workspace": echoed})
    assert (dropped["dropped"], dropped["invalidated_handles"]) == (True, True)
    with anyio.fail_after(60):
        again = await broker.call("drop_workspace", {"workspace": echoed})
    assert (again["dropped"], again["reason"]) == (False, "notFound")


@pytest.mark.lean
async def test_the_runtime_snapshot_reports_open_files_against_the_disk_on_real_lean(
    broker: Broker, demo_root: Path
) -> None:
    assert await broker.runtime_snapshot(str(demo_root)) is None
    await call(broker, "save", demo_root, path="Demo/Proofs.lean")
    (demo_root / "Demo/Scratch.lean").write_text("prelude\n")
    await call(broker, "update", demo_root, path="Demo/Scratch.lean")

    async def statuses() -> dict[str, tuple[str, bool]]:
        snap = await broker.runtime_snapshot(str(demo_root))
        assert snap is not None and snap["stats"]["root"] == str(demo_root)
        return {f["path"]: (f["diskStatus"], f["checkpointed"]) for f in snap["open_files"]}

    assert await statuses() == {
        "Demo/Proofs.lean": ("matchesTracked", True),
        "Demo/Scratch.lean": ("matchesTracked", False),
    }
    (demo_root / "Demo/Proofs.lean").write_text("prelude\n-- edited\n")
    (demo_root / "Demo/Scratch.lean").unlink()
    assert await statuses() == {
        "Demo/Proofs.lean": ("differsFromTracked", False),
        "Demo/Scratch.lean": ("missing", False),
    }


# ---- hardening (issue 10) -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd",
    [
        pytest.param([shutil.which("false") or "/bin/false"], id="false"),
        pytest.param([shutil.which("true") or "/bin/true"], id="true"),
        pytest.param(["/bin/sh", "-c", "echo 'lean: cannot start' >&2; exit 3"], id="sh-exit-3"),
        pytest.param(fake_cmd({"crash_on": {"method": "initialize"}}), id="exit-at-initialize"),
        pytest.param(fake_cmd({"crash_on": {"method": "initialize", "after_ms": 400}}), id="exit-during-handshake"),
    ],
)
async def test_a_lean_command_that_exits_at_once_is_a_runtime_setup_error_every_time(
    tmp_path: Path, cmd: list[str]
) -> None:
    # Finding 13: `--lean-cmd /bin/false` gave internalError (sometimes an exception group), not runtimeSetup.
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n", "B.lean": "y\n"})
    async with open_broker(cmd=cmd) as broker:
        errors = [await error_of(broker, op, root, path="A.lean") for op in ("sync", "update")]
        errors.append(await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=0))
        concurrent: list[BrokerError] = []

        async def cold(path: str) -> None:
            concurrent.append(await error_of(broker, "sync", root, path=path))

        async with anyio.create_task_group() as tg:
            for path in ("A.lean", "B.lean", "A.lean"):
                tg.start_soon(cold, path)
        lean = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]
    for err in errors + concurrent:
        assert err.code == RUNTIME_SETUP, err.wire()
        assert err.message.startswith("could not start the Lean server `")
    assert (lean["sessionStarts"], lean["errorCount"]) == (0, 6)


_STARTUP_GATE = """\
import os, socket, sys
gate = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
gate.connect(sys.argv[1])
if gate.recv(1) != b"1":
    sys.stderr.write("lean: startup refused by the test\\n")
    sys.exit(7)
os.execv(sys.argv[2], sys.argv[2:])
"""


class StartupGate:
    """Every Lean server of a broker waits at start-up until the test lets it start (b"1") or exit (b"0")."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._send, self._arrivals = anyio.create_memory_object_stream[anyio.abc.SocketStream](10)

    def cmd(self, inner: list[str]) -> list[str]:
        return [sys.executable, "-c", _STARTUP_GATE, self.where, *inner]

    async def serve(self, conn: anyio.abc.SocketStream) -> None:
        await self._send.send(conn)

    async def arrived(self) -> anyio.abc.SocketStream:
        """The next server process that is up and waiting: its runtime is starting until it is answered."""
        with anyio.fail_after(30):
            return await self._arrivals.receive()

    async def answer_next(self, answer: bytes) -> None:
        async with await self.arrived() as conn:
            await conn.send(answer)

    def close(self) -> None:
        self._send.close()
        self._arrivals.close()


@contextlib.asynccontextmanager
async def startup_gate() -> AsyncIterator[StartupGate]:
    directory = tempfile.mkdtemp(prefix="beam-start-", dir="/tmp")
    gate = StartupGate(os.path.join(directory, "s"))
    try:
        listener = await anyio.create_unix_listener(gate.where)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, gate.serve)
            yield gate
            tg.cancel_scope.cancel()
    finally:
        gate.close()
        shutil.rmtree(directory, ignore_errors=True)


async def test_diagnostics_of_a_workspace_whose_lean_is_starting_or_failed_to_start_are_errors(tmp_path: Path) -> None:
    # Finding 14: a read during start-up said `tracked: false, pending`, and a failed start told nobody.
    root = fake_project(tmp_path / "proj", {"A.lean": "ERROR_HERE\n", "B.lean": "x\n", "C.lean": "y\n"})
    a, b, c = (str(root / name) for name in ("A.lean", "B.lean", "C.lean"))
    outside = str(tmp_path / "Elsewhere.lean")
    changed: list[str] = []
    async with startup_gate() as gate, open_broker(cmd=gate.cmd(fake_cmd())) as broker:
        broker.add_diagnostics_listener(changed.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(call, broker, "sync", root, path="A.lean"))
            conn = await gate.arrived()
            for path in (a, b):  # known or not: the file's workspace is starting
                with pytest.raises(BrokerError) as starting:
                    broker.diagnostics(path)
                assert starting.value.code == codes.SERVER_STARTING and str(root) in starting.value.message
            assert broker.diagnostics(outside)["tracked"] is False  # no workspace of this broker holds it
            async with conn:
                await conn.send(b"1")
        assert broker.diagnostics(a)["availability"] == "published"
        await call(broker, "sync", root, path="B.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None
        client = runtime.live_client()
        assert client is not None
        os.kill(client.pid, signal.SIGKILL)
        with anyio.fail_after(20):
            await client.wait_exited()
        changed.clear()
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.answer_next, b"0")  # the restart fails
            failed = await error_of(broker, "update", root, path="C.lean")
        assert failed.code == RUNTIME_SETUP and "startup refused" in failed.message
        # Subscribers of every file the workspace knew, and of the file the call named, hear about it ...
        assert sorted(set(changed)) == [a, b, c]
        for path in (a, b, c):  # ... and re-read into the start's error
            with pytest.raises(BrokerError) as setup:
                broker.diagnostics(path)
            assert setup.value.wire() == failed.wire()
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.answer_next, b"1")  # a later start succeeds: reads answer from the cache again
            await call(broker, "update", root, path="C.lean")
        assert broker.diagnostics(a)["tracked"] is False and broker.diagnostics(c)["tracked"] is True


async def test_open_documents_beyond_the_bound_are_closed_least_recently_used_first(tmp_path: Path) -> None:
    # Finding 9: open documents were unbounded (each keeps a Lean worker alive).
    files = {"A.lean": "theorem a : True := ERROR_HERE\n", "B.lean": "x\n", "C.lean": "y\n"}
    root = fake_project(tmp_path / "proj", files)
    a, b, c = (str(root / name) for name in files)
    changed: list[str] = []
    async with open_broker(max_open_documents=2) as broker:
        broker.add_diagnostics_listener(changed.append)
        await call(broker, "sync", root, path="A.lean")
        await call(broker, "run_at", root, path="A.lean", version=1, line=0, character=0, text="#check a")
        await call(broker, "sync", root, path="B.lean")  # the probe mirror does not count: A stays open
        assert broker.open_documents() == [a, b]
        changed.clear()
        await call(broker, "sync", root, path="C.lean")
        assert broker.open_documents() == [b, c]
        assert a in changed
        closed = broker.diagnostics(a)  # what Lean said while A was open, marked closed: never a false clean
        assert (closed["tracked"], closed["open"], closed["availability"], closed["version"]) == (
            True,
            False,
            "published",
            1,
        )
        assert [d["message"] for d in closed["diagnostics"]] == ["unknown identifier 'ERROR_HERE'"]
        hover = await call(broker, "hover", root, path="A.lean", version=1, line=0, character=8)
        assert hover["contents"]["value"] == "```lean\na\n```"  # the next call simply reopens it
        assert broker.open_documents() == [a, c]
        session = broker.stats()["workspaces"][f"local:{root}"]["sessions"]["lean"]
    assert session["openDocCount"] == 2


async def test_the_bound_counts_a_document_as_used_until_its_call_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: the order was the start of the last call that read each document, so the document of a long call
    was the least recently used as it answered, and the next open beyond the bound closed it first."""
    files = {"A.lean": "theorem a : True := trivial\n", "B.lean": "x\n", "C.lean": "y\n"}
    root = fake_project(tmp_path / "proj", files)
    a, _, c = (str(root / name) for name in files)
    async with open_broker(max_open_documents=2) as broker:
        await call(broker, "sync", root, path="A.lean")
        await call(broker, "sync", root, path="B.lean")
        # While the call on A still runs, another call reads B and ends.
        nested = during_first_update(broker, root, monkeypatch, lambda: call(broker, "sync", root, path="B.lean"))
        await call(broker, "hover", root, path="A.lean", version=1, line=0, character=8)  # ends last
        monkeypatch.undo()
        await call(broker, "sync", root, path="C.lean")
        assert nested and broker.open_documents() == [a, c]


async def test_a_version_pinned_before_the_bound_closed_a_document_edited_since_is_not_current(tmp_path: Path) -> None:
    """docs/broker.md: after the bound closes a document, "a caller holding an older version gets the usual
    `documentVersionMismatch`". Version 1 of the old text is one: the reopened document is version 1 again."""
    files = {"A.lean": "theorem a : True := trivial\n", "B.lean": "x\n"}
    root = fake_project(tmp_path / "proj", files)
    async with open_broker(max_open_documents=1) as broker:
        await call(broker, "sync", root, path="A.lean")  # version 1 of the old text
        await call(broker, "sync", root, path="B.lean")  # the bound closes A
        assert broker.open_documents() == [str(root / "B.lean")]
        (root / "A.lean").write_text("def other : Nat := 0\ntheorem a : True := trivial\n")
        failure = await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=8)
        assert failure.code == codes.CONTENT_MODIFIED and failure.data is not None
        assert failure.data["reason"] == "documentVersionMismatch"
        synced = await call(broker, "sync", root, path="A.lean")  # the caller learns the new version
        assert synced["version"] == 1
        await call(broker, "hover", root, path="A.lean", version=1, line=1, character=8)
        await call(broker, "sync", root, path="B.lean")  # closed again, unchanged since: version 1 still names it
        await call(broker, "hover", root, path="A.lean", version=1, line=1, character=8)


async def test_a_version_pinned_before_a_lean_restart_of_a_file_edited_since_is_not_current(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    async with open_broker({"crash_on": {"method": "textDocument/hover"}}) as broker:
        await call(broker, "sync", root, path="A.lean")
        await error_of(broker, "hover", root, path="A.lean", version=1, line=0, character=8)  # Lean is gone
        (root / "A.lean").write_text("def other : Nat := 0\ntheorem x : True := trivial\n")
        failure = await error_of(broker, "document_symbols", root, path="A.lean", version=1)
        assert failure.code == codes.CONTENT_MODIFIED and failure.data is not None
        assert failure.data["reason"] == "documentVersionMismatch"


async def test_the_bound_never_closes_a_document_a_call_in_flight_holds(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n", "B.lean": "y\n", "C.lean": "z\n"})
    async with open_broker({"stall": ["textDocument/hover"]}, max_open_documents=1) as broker:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(call, broker, "hover", root, path="A.lean", version=1, line=0, character=0)
                )
                await anyio.wait_all_tasks_blocked()  # the hover waits for Lean, holding A
                await call(broker, "update", root, path="B.lean")
                await call(broker, "update", root, path="C.lean")
                assert broker.open_documents() == [str(root / "A.lean"), str(root / "C.lean")]
                scope.cancel()
        await call(broker, "update", root, path="B.lean")  # A is free now: the least recently used goes
        assert broker.open_documents() == [str(root / "B.lean")]


async def test_nul_or_surrogates_in_arguments_are_refused_before_any_runtime_exists(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n"})
    async with open_broker() as broker:
        for spec in beam_broker.OPERATIONS:
            arguments: dict[str, Any] = {"workspace": {"root": str(root)}}
            field = "path" if "path" in spec.input_model.model_fields else "workspace.root"
            if field == "path":
                arguments["path"] = "A\x00.lean"
            else:
                arguments["workspace"] = {"root": f"{root}\ud800"}
            with pytest.raises(BrokerError) as info:
                await broker.call(spec.name, arguments)
            assert info.value.code == codes.INVALID_INPUT and info.value.data is not None
            assert info.value.data["field"] == field, spec.name
        by_hand = m.FileInput(path="A\x00.lean", workspace=WorkspaceDescriptor(root=str(root)))
        with pytest.raises(BrokerError) as model:
            await broker.call("update", by_hand)
        assert model.value.data == {"field": "path", "reason": "contains a NUL character"}
        assert not broker.active


async def test_the_runtime_snapshot_does_not_hang_on_an_open_file_replaced_by_a_fifo(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "x\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        (root / "A.lean").unlink()
        os.mkfifo(root / "A.lean")
        with anyio.fail_after(10):
            snap = await broker.runtime_snapshot(str(root))
    assert snap is not None and snap["open_files"][0]["diskStatus"] == "unknown"


@pytest.mark.lean
async def test_a_document_closed_by_the_bound_keeps_its_errors_on_real_lean(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    # Real Lean answers the didClose with an empty publish: the closed file must still read as not clean.
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), max_open_documents=1)
    broken = str(demo_root / "Demo/Broken.lean")
    async with Broker.open(config) as broker:
        first = await call(broker, "sync", demo_root, path="Demo/Broken.lean")
        await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
        assert broker.open_documents() == [str(demo_root / "Demo/Proofs.lean")]
        closed = broker.diagnostics(broken)
        assert (closed["open"], closed["availability"], closed["version"]) == (False, "published", 1)
        assert len(closed["diagnostics"]) == first["diagnostics"]["counts"]["error"] == 1
        again = await call(broker, "sync", demo_root, path="Demo/Broken.lean")
        assert again["version"] == 1 and again["diagnostics"]["counts"]["error"] == 1
        assert broker.open_documents() == [broken]


# ---- the one path check -------------------------------------------------------------------------------
def _minimal_arguments(spec: Any, path: str) -> dict[str, Any]:
    """Arguments a file-taking operation accepts, with `path` (each required field gets a value of its kind)."""
    from beam_broker._cli.commands import field_args

    values = {"str": "x", "text": "x", "texts": ["x"], "int": 0, "bool": False, "list": ["x"], "json": {}}
    args: dict[str, Any] = {"path": path}
    for arg in field_args(spec):
        if arg.required and arg.name != "path":
            args[arg.name] = arg.choices[0] if arg.kind == "choice" else values[arg.kind]
        elif arg.name in ("line", "character"):  # `axioms` takes a name or a position
            args[arg.name] = 0
        elif arg.name == "version":  # a pinned call takes exactly one of version and snapshot
            args[arg.name] = 1
    return args


async def test_every_file_taking_operation_refuses_a_file_that_is_no_lean_source_before_lean_starts(
    tmp_path: Path,
) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n", "notes.txt": "hello\n"})
    (root / "Notes.lean").symlink_to(root / "notes.txt")  # Lean would see notes.txt
    taking_files = [spec for spec in REGISTRY if issubclass(spec.input_model, m.PathInput)]
    assert len(taking_files) > 20  # every operation on a file, whatever the registry adds
    events: list[object] = []
    async with open_broker(cmd=[str(tmp_path / "no-such-lean")]) as broker:
        for spec in taking_files:
            for path in ("notes.txt", "lakefile.toml", "/etc/hostname", "Notes.lean", ".lean"):
                args = {"workspace": {"root": str(root)}, **_minimal_arguments(spec, path)}
                with anyio.fail_after(60), pytest.raises(BrokerError) as info:
                    await broker.call(spec.name, args, CallContext(emit=events.append))
                assert info.value.code == codes.INVALID_PARAMS, (spec.name, path, info.value)
                assert info.value.data is not None and info.value.data["reason"] == "notLeanSource"
                assert "not a Lean source file" in info.value.message
            # The same arguments with a Lean file pass the check (and reach the missing Lean, or need none).
            lean = {"workspace": {"root": str(root)}, **_minimal_arguments(spec, "A.lean")}
            try:
                with anyio.fail_after(60):
                    await broker.call(spec.name, lean, CallContext(emit=lambda _event: None))
            except BrokerError as exc:
                assert exc.data is None or exc.data.get("reason") != "notLeanSource", spec.name
        assert events == []  # refused before the preparation event
