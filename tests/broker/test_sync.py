"""Document operations: update, sync, refresh, close; and a Lean server dying at every point of a sync.

The crash matrix runs the real broker over the fake Lean, whose first server dies where `crash_on` says; every
call in flight must fail with `workerExited`, and the next call must recover on a new server (epoch 2).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import (
    Broker,
    BrokerError,
    CallContext,
    DiagnosticEvent,
    FileProgressEvent,
    PreparationEvent,
    SetupEvent,
)
from beam_broker import errors as codes
from tests.support import projects

from .support import call, error_of, fake_lake, fake_project, first_start_cmd, open_broker

pytestmark = pytest.mark.anyio
CLEAN = "theorem x : True := trivial\n"


# ---- fake lane ----------------------------------------------------------------------------------------
async def test_update_follows_the_disk_and_reports_whether_it_sent_anything(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        first = await call(broker, "update", root, path="A.lean")
        again = await call(broker, "update", root, path="A.lean")
        (root / "A.lean").write_text(CLEAN + "-- more\n")
        changed = await call(broker, "update", root, path="A.lean")
    assert isinstance(first.pop("snapshot"), str)
    assert first == {"workspace": {"root": str(root)}, "version": 1, "changed": True}
    assert (again["version"], again["changed"]) == (1, False)
    assert (changed["version"], changed["changed"]) == (2, True)


@pytest.mark.parametrize(
    ("files", "path", "needle", "code"),
    [
        ({}, "Missing.lean", "file not found", codes.INVALID_PARAMS),
        ({"Dir.lean/X.lean": ""}, "Dir.lean", "not a regular file", codes.INVALID_PARAMS),
        ({"Dir/X.lean": ""}, "Dir", "not a Lean source file", codes.INVALID_PARAMS),
    ],
)
async def test_unreadable_sources_are_invalid_params(
    tmp_path: Path, files: dict[str, str], path: str, needle: str, code: str
) -> None:
    root = fake_project(tmp_path / "p", files)
    async with open_broker() as broker:
        err = await error_of(broker, "update", root, path=path)
    assert err.code == code and needle in err.message


async def test_a_source_that_is_not_utf8_is_invalid_params(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p")
    (root / "A.lean").write_bytes(b"\xff\xfe")
    async with open_broker() as broker:
        err = await error_of(broker, "update", root, path="A.lean")
    assert err.code == codes.INVALID_PARAMS and "not UTF-8" in err.message


async def test_a_fifo_or_a_device_path_is_refused_at_once_and_a_fence_after_it_does_not_wait(tmp_path: Path) -> None:
    # Finding 2: a FIFO blocked a thread forever (and every later drop_workspace with it); /dev/zero was read
    # until memory ran out.
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    os.mkfifo(root / "Pipe.lean")
    async with open_broker() as broker:
        with anyio.fail_after(10):
            for path, reason in (("Pipe.lean", "notRegularFile"), ("/dev/zero", "notLeanSource")):
                err = await error_of(broker, "sync", root, path=path)
                assert err.code == codes.INVALID_PARAMS and err.data is not None
                assert err.data["reason"] == reason and path.split("/")[-1] in err.message
            dropped = await call(broker, "drop_workspace", root)
    assert dropped["dropped"] is True


async def test_the_source_size_limit_is_a_setting(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN, "Big.lean": CLEAN * 10})
    async with open_broker(max_source_bytes=len(CLEAN) * 5) as broker:
        assert (await call(broker, "sync", root, path="A.lean"))["version"] == 1
        err = await error_of(broker, "sync", root, path="Big.lean")
    assert err.code == codes.INVALID_PARAMS and err.data is not None
    assert (err.data["reason"], err.data["limitBytes"]) == ("sourceTooLarge", len(CLEAN) * 5)


async def test_sync_of_a_clean_file_is_save_ready_with_complete_counts(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        result = await call(broker, "sync", root, path="A.lean")
    assert result["workspace"] == {"root": str(root)} and (result["path"], result["version"]) == ("A.lean", 1)
    assert result["diagnostics"] == {
        "counts": {"error": 0, "warning": 0, "information": 0, "hint": 0, "unknown": 0, "total": 0}
    }
    assert result["readiness"] == {
        "save_ready": True,
        "reason": "ok",
        "blocking_error_count": 0,
        "blocking_diagnostics": [],
        "blocking_messages": [],
    }
    assert result["document_progress"] == {"updates": 2, "done": True, "range_end_line": 1}


async def test_sync_of_a_broken_file_reports_blocking_errors_and_streams_them(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "theorem x : True := ERROR_HERE\ndef y := WARN_HERE\n"})
    events: list[Any] = []
    async with open_broker() as broker:
        result = await call(
            broker, "sync", root, ctx=CallContext(emit=events.append), path="A.lean", diagnostics_in_result=True
        )
    assert result["diagnostics"]["counts"]["error"] == 1 and result["diagnostics"]["counts"]["warning"] == 1
    [item] = result["diagnostics"]["items"]
    assert (item["severity"], item["message"]) == ("error", "unknown identifier 'ERROR_HERE'")
    assert item["save_blocking"] is True and item["version"] == 1 and item["path"] == "A.lean"
    ready = result["readiness"]
    assert (ready["save_ready"], ready["reason"], ready["blocking_error_count"]) == (False, "documentErrors", 1)
    assert events[0] == PreparationEvent(
        "lean_sync on A.lean: preparing the Lean workspace", "A.lean", "preparing the Lean workspace"
    )
    streamed = [e.item for e in events if isinstance(e, DiagnosticEvent)]
    assert [s["message"] for s in streamed] == [item["message"]] and "save_blocking" not in streamed[0]
    assert any(isinstance(e, FileProgressEvent) and e.done for e in events)


async def test_warnings_stream_and_appear_in_items_only_with_scope_all(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "def y := WARN_HERE\n"})
    async with open_broker() as broker:
        quiet: list[Any] = []
        r1 = await call(
            broker, "sync", root, ctx=CallContext(emit=quiet.append), path="A.lean", diagnostics_in_result=True
        )
        loud: list[Any] = []
        r2 = await call(
            broker,
            "refresh",
            root,
            ctx=CallContext(emit=loud.append),
            path="A.lean",
            diagnostic_scope="all",
            diagnostics_in_result=True,
        )
    assert r1["diagnostics"]["counts"]["warning"] == 1 and r1["diagnostics"]["items"] == []
    assert not [e for e in quiet if isinstance(e, DiagnosticEvent)] and r1["readiness"]["save_ready"] is True
    assert [i["severity"] for i in r2["diagnostics"]["items"]] == ["warning"]
    assert [e.item["severity"] for e in loud if isinstance(e, DiagnosticEvent)] == ["warning"]


async def test_a_repeated_sync_of_an_unchanged_file_keeps_its_progress(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        first = await call(broker, "sync", root, path="A.lean")
        second = await call(broker, "sync", root, path="A.lean")
    assert (
        first["document_progress"] == second["document_progress"] == {"updates": 2, "done": True, "range_end_line": 1}
    )


async def test_refresh_reopens_at_version_one_and_close_is_idempotent(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        (root / "A.lean").write_text(CLEAN + "-- edit\n")
        assert (await call(broker, "sync", root, path="A.lean"))["version"] == 2
        refreshed = await call(broker, "refresh", root, path="A.lean")
        closed = await call(broker, "close", root, path="A.lean")
        again = await call(broker, "close", root, path="A.lean")
        reopened = await call(broker, "update", root, path="A.lean")
    assert refreshed["version"] == 1
    assert closed == again == {"workspace": {"root": str(root)}, "closed": True}
    assert (reopened["version"], reopened["changed"]) == (1, True)


async def test_a_crashed_file_worker_makes_the_barrier_incomplete_and_the_document_recovers(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    async with open_broker({"worker_crash_on": "textDocument/waitForDiagnostics"}) as broker:
        err = await error_of(broker, "sync", root, path="A.lean")
        assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
        assert err.data["elaboration"] == "failed" and err.data["recoveryPlan"][-2:] == [
            'lean-beam refresh "A.lean"',
            "lake build",
        ]
        recovered = await call(broker, "refresh", root, path="A.lean")
    assert recovered["version"] == 1 and recovered["diagnostics"]["counts"]["total"] == 0


async def test_stale_imports_reported_by_lean_make_the_barrier_incomplete(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "import B\nERROR_HERE\n"})
    lean = {"marker_messages": {"ERROR_HERE": "Imports are out of date and should be rebuilt"}}
    async with open_broker(lean) as broker:
        err = await error_of(broker, "sync", root, path="A.lean")
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
    [blocking] = err.data["completionBlockingDiagnostics"]
    assert (blocking["severity"], blocking["completionBlocking"], blocking["saveBlocking"]) == ("error", True, False)
    assert err.data["elaboration"] == "complete" and err.data["targetPath"] == "A.lean"


UPSTREAM = {"Demo/Basic.lean": "def one := 1\n", "Demo/Proofs.lean": "import Demo.Basic\n"}


async def edited_upstream(broker: Broker, root: Path) -> None:
    """`Demo/Basic.lean` saved and `Demo/Proofs.lean` elaborated against it, then Basic edited on disk, unsaved."""
    await call(broker, "save", root, path="Demo/Basic.lean")
    await call(broker, "sync", root, path="Demo/Proofs.lean")
    (root / "Demo/Basic.lean").write_text("def one := 1\ndef two := 2\n")


async def test_an_unsaved_upstream_edit_makes_the_barrier_incomplete_with_a_recovery_plan(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", UPSTREAM)
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        await edited_upstream(broker, root)
        await call(broker, "sync", root, path="Demo/Basic.lean")
        err = await error_of(broker, "sync", root, path="Demo/Proofs.lean")
        assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
        assert err.data["staleDirectDeps"] == [
            {"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": True, "direct": True}
        ]
        assert err.data["recoveryPlan"] == [
            'lean-beam save "Demo/Basic.lean"',
            'lean-beam refresh "Demo/Proofs.lean"',
            "lake build",
        ]
        await call(broker, "save", root, path="Demo/Basic.lean")
        still = await error_of(broker, "sync", root, path="Demo/Proofs.lean")
        assert still.code == codes.SYNC_BARRIER_INCOMPLETE and still.data is not None and still.data["saveDeps"] == []
        refreshed = await call(broker, "refresh", root, path="Demo/Proofs.lean")
    assert refreshed["version"] == 1 and refreshed["diagnostics"]["counts"]["error"] == 0


async def test_a_barrier_held_up_by_stale_imports_says_in_its_message_which_to_save(tmp_path: Path) -> None:
    """The message is all `lean-beam` prints on a terminal: it names the imports and the order, not `lake build`."""
    root = fake_project(tmp_path / "p", UPSTREAM)
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        await edited_upstream(broker, root)
        err = await error_of(broker, "sync", root, path="Demo/Proofs.lean")
        await call(broker, "save", root, path="Demo/Basic.lean")
        still = await error_of(broker, "sync", root, path="Demo/Proofs.lean")
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE == still.code
    assert (
        "Its imports are out of date (Demo.Basic): save them in this order: Demo/Basic.lean; then refresh "
        in err.message
    )
    assert err.message.endswith("then refresh Demo/Proofs.lean.") and "lake build" not in err.message
    assert "Its imports (Demo.Basic) were rebuilt after Lean loaded them: refresh Demo/Proofs.lean." in still.message


async def test_an_import_rebuilt_again_after_the_setup_built_it_is_not_taken_as_loaded(tmp_path: Path) -> None:
    """Lake's setup built the import (a `Built` line) and the worker loaded that build; a later build before the
    first barrier was taken for what the worker loaded (the disk as it was at the barrier): a false current."""
    root = fake_project(
        tmp_path / "p", {"Demo/Basic.lean": "def one := 1\n", "Demo/Proofs.lean": "import Demo.Basic\n"}
    )
    olean = root / ".lake/build/lib/lean/Demo/Basic.olean"
    built = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}, "severity": 3}
    lean = {"diagnostics": {"Proofs.lean": [{**built, "message": "✔ [1/2] Built Demo.Basic"}]}}

    def emit(event: Any) -> None:
        if isinstance(event, SetupEvent):  # after the worker loaded the setup's build: another `lake build`
            olean.write_bytes(os.urandom(16))

    async with open_broker(lean, env=fake_lake(tmp_path / "bin")) as broker:
        await call(broker, "save", root, path="Demo/Basic.lean")
        err = await error_of(broker, "sync", root, ctx=CallContext(emit=emit), path="Demo/Proofs.lean")
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
    assert err.data["staleDirectDeps"] == [
        {"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": False, "direct": True}
    ]


SRC_DIR_PROJECT = {
    "lakefile.toml": 'name = "demo"\nsrcDir = "src"\nbuildDir = "out"\n\n[[lean_lib]]\nname = "Demo"\n',
    "src/Demo/Basic.lean": "def one := 1\n",
    "src/Demo/Proofs.lean": "import Demo.Basic\n",
}


async def test_a_project_whose_sources_are_under_src_dir_saves_modules_and_sees_an_import_edited_on_disk(
    tmp_path: Path,
) -> None:
    """Lake's `srcDir` and `buildDir`: the module of `src/Demo/Basic.lean` is `Demo.Basic`, its `.olean` is under
    `out/`. Taking the sources at the root read every import as a module whose source is gone (`needsSave` for
    ever), and the build directory as `.lake/build` saw no import at all (an edit read clean)."""
    root = fake_project(tmp_path / "p", SRC_DIR_PROJECT)
    env = fake_lake(tmp_path / "bin", {"src_dir": "src", "build_dir": "out"})
    async with open_broker(env=env) as broker:
        saved = await call(broker, "save", root, path="src/Demo/Basic.lean")
        assert saved["module"] == "Demo.Basic"
        assert (root / "out/lib/lean/Demo/Basic.olean").is_file()
        clean = await call(broker, "sync", root, path="src/Demo/Proofs.lean")
        assert clean["diagnostics"]["counts"]["error"] == 0
        (root / "src/Demo/Basic.lean").write_text("def one := 1\ndef two := 2\n")  # the agent's own edit
        err = await error_of(broker, "sync", root, path="src/Demo/Proofs.lean")
        assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
        assert err.data["staleDirectDeps"] == [
            {"module": "Demo.Basic", "path": "src/Demo/Basic.lean", "needsSave": True, "direct": True}
        ]
        await call(broker, "save", root, path="src/Demo/Basic.lean")
        refreshed = await call(broker, "refresh", root, path="src/Demo/Proofs.lean")
    assert refreshed["diagnostics"]["counts"]["error"] == 0


async def test_an_import_lake_built_under_src_dir_is_current_not_needs_save(tmp_path: Path) -> None:
    """The import was built by Lake itself (`.lake/build`, Lake's default): its source is `src/Demo/Basic.lean`,
    not `Demo/Basic.lean` (taken as gone, it read `needsSave` for ever)."""
    files = {**SRC_DIR_PROJECT, "lakefile.toml": 'name = "demo"\nsrcDir = "src"\n[[lean_lib]]\nname = "Demo"\n'}
    root = fake_project(tmp_path / "p", files)
    env = fake_lake(tmp_path / "bin", {"src_dir": "src"})
    built = await anyio.run_process(["lake", "build", "Demo.Basic"], cwd=root, env={**os.environ, **env}, check=False)
    assert built.returncode == 0 and (root / ".lake/build/lib/lean/Demo/Basic.olean").is_file()
    async with open_broker(env=env) as broker:
        clean = await call(broker, "sync", root, path="src/Demo/Proofs.lean")
    assert clean["diagnostics"]["counts"]["error"] == 0


async def test_cancelling_a_sync_leaves_the_runtime_usable(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN, "B.lean": CLEAN})
    async with open_broker({"stall": ["textDocument/waitForDiagnostics"], "ignore_cancel": []}) as broker:
        started = anyio.Event()

        def on_event(event: object) -> None:
            if isinstance(event, FileProgressEvent):
                started.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: call(broker, "sync", root, ctx=CallContext(emit=on_event), path="A.lean"))
            with anyio.fail_after(20):
                await started.wait()
            tg.cancel_scope.cancel()
        done = await call(broker, "update", root, path="B.lean")
        ops = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]["ops"]
    assert done["version"] == 1
    assert (ops["sync_file"]["cancelledCount"], ops["update_file"]["successCount"]) == (1, 1)


# ---- the crash matrix: a Lean server that dies at each point of a sync --------------------------------
Step = Callable[[Broker, Path], Awaitable[Any]]


async def _nothing(broker: Broker, root: Path) -> None:
    return None


async def _open_then_edit(broker: Broker, root: Path) -> None:
    await call(broker, "update", root, path="A.lean")
    (root / "A.lean").write_text(CLEAN + "-- edited\n")


async def _open(broker: Broker, root: Path) -> None:
    await call(broker, "update", root, path="A.lean")


def crash(method: str, after_ms: int = 0, **extra: Any) -> dict[str, Any]:
    return {"crash_on": {"method": method, "after_ms": after_ms}, **extra}


SCENARIOS: dict[str, tuple[dict[str, Any], Step, str]] = {
    # name: (the first server's config, what runs before the failing call, the failing operation).
    # The fake handles no message it crashes on: "on didOpen" means Lean never saw the document.
    "right after the handshake": (crash("initialized"), _nothing, "sync"),
    "on didOpen": (crash("textDocument/didOpen"), _nothing, "sync"),
    "on didChange": (crash("textDocument/didChange"), _open_then_edit, "sync"),
    "on didSave": (crash("textDocument/didSave"), _open_then_edit, "sync"),
    "mid-elaboration of a change": (crash("textDocument/didSave", 30, elab_ms=2000), _open_then_edit, "sync"),
    "while waiting for diagnostics": (crash("textDocument/waitForDiagnostics"), _nothing, "sync"),
    "after elaboration, before the barrier answers": (crash("textDocument/waitForDiagnostics", 30), _nothing, "sync"),
    "after a progress notice": (crash("textDocument/waitForDiagnostics", 30, elab_ms=2000), _nothing, "sync"),
    "on the didClose of a refresh": (crash("textDocument/didClose"), _open, "refresh"),
    "during the sync of a save": (crash("textDocument/didOpen"), _nothing, "save"),
}


@pytest.mark.parametrize("iteration", range(5))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_a_server_dying_during_a_sync_is_worker_exited_and_the_next_call_recovers(
    tmp_path: Path, scenario: str, iteration: int
) -> None:
    first, before, operation = SCENARIOS[scenario]
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    events: list[Any] = []
    async with open_broker(cmd=first_start_cmd(tmp_path / "started", first), env=fake_lake(tmp_path / "bin")) as broker:
        await before(broker, root)
        err = await error_of_ctx(broker, operation, root, CallContext(emit=events.append))
        assert err.code == codes.WORKER_EXITED, (scenario, err.wire())
        if "progress" in scenario or "mid-elaboration" in scenario:
            assert any(isinstance(e, FileProgressEvent) and not e.done for e in events)
        recovered = await call(broker, "sync", root, path="A.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None and runtime.epoch == 2
        lean = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]
    assert recovered["readiness"]["save_ready"] is True and recovered["version"] == 1
    assert (lean["sessionStarts"], lean["workerExitedCount"]) == (2, 1)


async def error_of_ctx(broker: Broker, operation: str, root: Path, ctx: CallContext) -> BrokerError:
    with pytest.raises(BrokerError) as info:
        await call(broker, operation, root, ctx=ctx, path="A.lean")
    return info.value


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_sync_of_a_clean_file_on_real_lean(broker: Broker, demo_root: Path) -> None:
    result = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert result["workspace"] == {"root": str(demo_root)}
    assert result["path"] == "Demo/Proofs.lean" and result["version"] == 1
    assert result["diagnostics"] == {
        "counts": {"error": 0, "warning": 0, "information": 0, "hint": 0, "unknown": 0, "total": 0}
    }
    assert result["readiness"] == {
        "save_ready": True,
        "reason": "ok",
        "blocking_error_count": 0,
        "blocking_diagnostics": [],
        "blocking_messages": [],
    }
    assert result["document_progress"]["done"] is True and result["document_progress"]["updates"] > 0


@pytest.mark.lean
async def test_sync_of_a_broken_file_on_real_lean(broker: Broker, demo_root: Path) -> None:
    events: list[Any] = []
    result = await call(
        broker,
        "sync",
        demo_root,
        ctx=CallContext(emit=events.append),
        path="Demo/Broken.lean",
        diagnostics_in_result=True,
    )
    assert result["diagnostics"]["counts"]["error"] == 1
    [item] = result["diagnostics"]["items"]
    assert item["severity"] == "error" and item["message"].startswith("Type mismatch")
    assert item["save_blocking"] is True and item["version"] == 1 and item["path"] == "Demo/Broken.lean"
    ready = result["readiness"]
    assert (ready["save_ready"], ready["reason"], ready["blocking_error_count"]) == (False, "documentErrors", 1)
    assert isinstance(events[0], PreparationEvent) and "lean_sync on Demo/Broken.lean" in events[0].message
    streamed = [e.item for e in events if isinstance(e, DiagnosticEvent)]
    assert [s["message"] for s in streamed] == [item["message"]] and "save_blocking" not in streamed[0]
    assert any(isinstance(e, FileProgressEvent) and e.done for e in events)


@pytest.mark.lean
async def test_warnings_on_real_lean_stream_only_with_scope_all(broker: Broker, demo_root: Path) -> None:
    quiet: list[Any] = []
    r1 = await call(
        broker, "sync", demo_root, ctx=CallContext(emit=quiet.append), path="Demo/Warn.lean", diagnostics_in_result=True
    )
    assert r1["diagnostics"]["counts"]["warning"] == 1 and r1["diagnostics"]["items"] == []
    assert not [e for e in quiet if isinstance(e, DiagnosticEvent)]
    assert r1["readiness"]["save_ready"] is True
    loud: list[Any] = []
    r2 = await call(
        broker,
        "refresh",
        demo_root,
        ctx=CallContext(emit=loud.append),
        path="Demo/Warn.lean",
        diagnostic_scope="all",
        diagnostics_in_result=True,
    )
    assert [i["severity"] for i in r2["diagnostics"]["items"]] == ["warning"]
    assert [e.item["severity"] for e in loud if isinstance(e, DiagnosticEvent)] == ["warning"]


@pytest.mark.lean
async def test_update_versions_follow_the_disk_and_stale_versions_are_content_modified(
    broker: Broker, demo_root: Path
) -> None:
    assert (await call(broker, "update", demo_root, path="Demo/Proofs.lean"))["changed"] is True
    again = await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    assert (again["version"], again["changed"]) == (1, False)
    path = demo_root / "Demo/Proofs.lean"
    path.write_text(path.read_text() + "\ntheorem extra : MyTrue := myTrue\n")
    err = await error_of(broker, "hover", demo_root, path="Demo/Proofs.lean", version=1, line=3, character=29)
    assert err.code == codes.CONTENT_MODIFIED
    assert err.data is not None and err.data["reason"] == "documentVersionMismatch"
    assert (err.data["expectedVersion"], err.data["acceptedVersion"]) == (1, 2)
    synced = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert synced["version"] == 2


@pytest.mark.lean
async def test_an_unsaved_upstream_edit_on_real_lean(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Basic.lean")
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    basic = demo_root / "Demo/Basic.lean"
    basic.write_text(basic.read_text() + "\ntheorem later : MyTrue := myTrue\n")
    await call(broker, "sync", demo_root, path="Demo/Basic.lean")
    err = await error_of(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE
    assert err.data is not None
    assert err.data["staleDirectDeps"] == [
        {"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": True, "direct": True}
    ]
    assert err.data["recoveryPlan"] == [
        'lean-beam save "Demo/Basic.lean"',
        'lean-beam refresh "Demo/Proofs.lean"',
        "lake build",
    ]
    await call(broker, "save", demo_root, path="Demo/Basic.lean")
    still = await error_of(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert still.code == codes.SYNC_BARRIER_INCOMPLETE and still.data is not None and still.data["saveDeps"] == []
    refreshed = await call(broker, "refresh", demo_root, path="Demo/Proofs.lean")
    assert refreshed["version"] == 1 and refreshed["diagnostics"]["counts"]["error"] == 0


async def _sync_until_killed(
    broker: Broker, demo_root: Path, kill: Callable[[], None], *, deep: bool = False
) -> list[BrokerError]:
    """Sync a long file and run `kill` once Lean reports elaboration in progress (deep: past line 10)."""
    elaborating = anyio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, FileProgressEvent) and not event.done:
            if not deep or (event.progress.get("range_start_line") or 0) > 10:
                elaborating.set()

    errors: list[BrokerError] = []

    async def slow() -> None:
        try:
            await call(broker, "sync", demo_root, ctx=CallContext(emit=on_event), path="Demo/Long.lean")
        except BrokerError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        with anyio.fail_after(60):
            await elaborating.wait()
        kill()
    return errors


@pytest.mark.lean
async def test_a_killed_lean_is_worker_exited_then_restarted_with_a_new_epoch(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    runtime = broker.cached(str(demo_root))
    assert runtime is not None and runtime.epoch == 1
    client = await runtime.client()
    errors = await _sync_until_killed(broker, demo_root, lambda: os.kill(client.pid, signal.SIGKILL))
    assert [e.code for e in errors] == [codes.WORKER_EXITED]
    again = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert again["version"] == 1 and runtime.epoch == 2
    stats = broker.stats()["workspaces"][f"local:{demo_root}"]["byBackend"]["lean"]
    assert stats["sessionRestarts"] == 1 and stats["ops"]["sync_file"]["workerExitedCount"] == 1


@pytest.mark.lean
async def test_killing_the_lean_process_group_during_a_sync_is_worker_exited(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    runtime = broker.cached(str(demo_root))
    assert runtime is not None
    client = await runtime.client()
    group = os.getpgid(client.pid)
    errors = await _sync_until_killed(broker, demo_root, lambda: os.killpg(group, signal.SIGKILL))
    assert [e.code for e in errors] == [codes.WORKER_EXITED]
    recovered = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert recovered["version"] == 1 and runtime.epoch == 2


@pytest.mark.lean
async def test_a_killed_file_worker_makes_the_barrier_incomplete_and_the_document_recovers(
    broker: Broker, demo_root: Path
) -> None:
    from tests.support import procs

    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    runtime = broker.cached(str(demo_root))
    assert runtime is not None
    client = await runtime.client()

    # Kill mid-elaboration, as in the captures: a worker killed before the watchdog handed it the document
    # crashes the real watchdog instead.
    def kill_worker() -> None:
        procs.kill(procs.worker_pids(client.pid, (demo_root / "Demo/Long.lean").as_uri())[0])

    errors = await _sync_until_killed(broker, demo_root, kill_worker, deep=True)
    assert [e.code for e in errors] == [codes.SYNC_BARRIER_INCOMPLETE]
    assert errors[0].data is not None and errors[0].data["elaboration"] == "failed"
    recovered = await call(broker, "refresh", demo_root, path="Demo/Long.lean")
    assert recovered["version"] == 1 and recovered["diagnostics"]["counts"]["total"] == 0


@pytest.mark.lean
async def test_cancelling_a_sync_on_real_lean_leaves_the_runtime_usable(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    elaborating = anyio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, FileProgressEvent) and not event.done:
            elaborating.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(broker, "sync", demo_root, ctx=CallContext(emit=on_event), path="Demo/Long.lean"))
        with anyio.fail_after(60):
            await elaborating.wait()
        tg.cancel_scope.cancel()
    done = await call(broker, "sync", demo_root, path="Demo/Long.lean")
    assert done["diagnostics"]["counts"]["total"] == 0
    ops = broker.stats()["workspaces"][f"local:{demo_root}"]["byBackend"]["lean"]["ops"]["sync_file"]
    assert (ops["cancelledCount"], ops["successCount"]) == (1, 1)
