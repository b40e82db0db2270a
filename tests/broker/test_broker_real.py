"""beam-broker operations on the real Lean lane."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerError, CallContext, DiagnosticEvent, FileProgressEvent, PreparationEvent
from beam_broker import errors as codes
from beam_broker.workspace import resolve
from tests.support import procs, projects

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


async def call(broker: Broker, name: str, root: Path, *, ctx: CallContext | None = None, **args: Any) -> dict[str, Any]:
    with anyio.fail_after(120):
        return await broker.call(name, {"workspace": {"root": str(root)}, **args}, ctx)


async def error_of(broker: Broker, name: str, root: Path, **args: Any) -> BrokerError:
    with pytest.raises(BrokerError) as info:
        await call(broker, name, root, **args)
    return info.value


async def test_sync_of_a_clean_file_is_save_ready_with_complete_counts(broker: Broker, demo_root: Path) -> None:
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


async def test_sync_of_a_broken_file_reports_blocking_errors_and_streams_them(broker: Broker, demo_root: Path) -> None:
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


async def test_warnings_stream_and_appear_in_items_only_with_scope_all(broker: Broker, demo_root: Path) -> None:
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


async def test_navigation_answers_for_the_named_version(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    at: dict[str, Any] = {"path": "Demo/Proofs.lean", "version": 1, "line": 3, "character": 29}
    hover = await call(broker, "hover", demo_root, **at)
    assert hover["contents"]["kind"] == "markdown" and "myTrue : MyTrue" in hover["contents"]["value"]
    none = await call(broker, "hover", demo_root, **{**at, "line": 2, "character": 0})
    assert none["result"] is None
    definition = await call(broker, "definition", demo_root, **at)
    assert definition["result"][0]["targetUri"].endswith("/Demo/Basic.lean")
    refs = await call(broker, "references", demo_root, **at, include_declaration=False)
    assert all(r["uri"].startswith("file://") for r in refs["result"]) and refs["result"]
    symbols = await call(broker, "document_symbols", demo_root, path="Demo/Proofs.lean", version=1)
    assert [s["name"] for s in symbols["result"]] == ["byTerm", "idProof", "two"]
    found = await call(broker, "workspace_symbols", demo_root, query="idPro")
    assert [s["name"] for s in found["result"]] == ["idProof"]
    sig = await call(broker, "signature_help", demo_root, **{**at, "line": 6, "character": 3})
    assert sig == {"workspace": {"root": str(demo_root)}, "result": None}
    bad = await error_of(broker, "hover", demo_root, **{**at, "line": 99})
    assert bad.code == codes.INVALID_PARAMS


async def test_goals_before_and_after_are_structured(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Goals.lean")
    for mode in ("before", "after"):
        state = await call(
            broker, "goals", demo_root, path="Demo/Goals.lean", version=1, line=4, character=3, mode=mode
        )
        [goal] = state["goals"]
        assert goal["target"] == "p" and goal["goalPrefix"] == "⊢ "
        assert goal["hyps"] == [{"names": ["p"], "type": "Prop"}, {"names": ["hp"], "type": "p"}]
    none = await error_of(
        broker, "goals", demo_root, path="Demo/Goals.lean", version=1, line=0, character=0, mode="after"
    )
    assert none.code == codes.INVALID_PARAMS and "no proof goals there" in none.message


async def test_todo_finds_sorry_holes_incomplete_proofs_and_resolvable_code_actions(
    broker: Broker, demo_root: Path
) -> None:
    (demo_root / "Demo/Todo.lean").write_text(
        "prelude\nimport Demo.Basic\n\n-- sorry in a comment\ntheorem a (p : Prop) (hp : p) : p := by\n  sorry\n\n"
        "def h : MyNat := _\n\ntheorem unusedVar (p : Prop) (hp : p) : MyTrue :=\n  (fun (x : p) => myTrue) hp\n"
    )
    await call(broker, "update", demo_root, path="Demo/Todo.lean")
    everything: dict[str, Any] = {
        "path": "Demo/Todo.lean",
        "version": 1,
        "start_line": 0,
        "start_character": 0,
        "end_line": 11,
        "end_character": 0,
    }
    result = await call(
        broker, "todo", demo_root, **everything, kinds=["sorry", "hole", "incomplete_proof", "code_action"]
    )
    kinds = [(i["kind"], i["range"]["start"]["line"]) for i in result["items"]]
    assert kinds == [("incomplete_proof", 4), ("sorry", 5), ("hole", 7), ("code_action", 10)]
    incomplete = result["items"][0]
    assert incomplete["run_at_text"] == "exact ?_" and incomplete["proof_state"]["goals"][0]["target"] == "p"
    action = result["items"][-1]["code_action"]
    resolved = await call(
        broker, "code_action_resolve", demo_root, path="Demo/Todo.lean", version=1, code_action=action
    )
    assert resolved["code_action"]["edit"]["documentChanges"][0]["edits"][0]["newText"] == "_x"
    stale = await error_of(
        broker, "code_action_resolve", demo_root, path="Demo/Todo.lean", version=7, code_action=action
    )
    assert stale.code == codes.CONTENT_MODIFIED
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    other = await error_of(
        broker, "code_action_resolve", demo_root, path="Demo/Proofs.lean", version=1, code_action=action
    )
    assert other.code == codes.INVALID_PARAMS and "targets" in other.message
    point = await call(
        broker,
        "todo",
        demo_root,
        **(everything | {"start_line": 5, "start_character": 4, "end_line": 5, "end_character": 4}),
        kinds=["sorry"],
        suggest="none",
    )
    assert [i["kind"] for i in point["items"]] == ["sorry"]


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
    assert stale.code == codes.SAVE_TRACE_STALE


async def test_an_unsaved_upstream_edit_makes_the_barrier_incomplete_with_a_recovery_plan(
    broker: Broker, demo_root: Path
) -> None:
    await call(broker, "sync", demo_root, path="Demo/Basic.lean")
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    basic = demo_root / "Demo/Basic.lean"
    basic.write_text(basic.read_text() + "\ntheorem later : MyTrue := myTrue\n")
    await call(broker, "sync", demo_root, path="Demo/Basic.lean")
    err = await error_of(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE
    assert err.data is not None
    assert err.data["staleDirectDeps"] == [{"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": True}]
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


async def test_close_save_then_close_is_idempotent(broker: Broker, demo_root: Path) -> None:
    result = await call(broker, "close_save", demo_root, path="Demo/Proofs.lean")
    assert result["closed"] is True and result["saved"]["module"] == "Demo.Proofs"
    assert (await call(broker, "close", demo_root, path="Demo/Proofs.lean"))["closed"] is True
    reopened = await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    assert (reopened["version"], reopened["changed"]) == (1, True)


async def test_a_hover_is_not_blocked_by_a_slow_sync(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    order: list[str] = []
    async with anyio.create_task_group() as tg:

        async def slow() -> None:
            await call(broker, "sync", demo_root, path="Demo/Long.lean")
            order.append("sync")

        tg.start_soon(slow)
        await anyio.wait_all_tasks_blocked()
        await call(broker, "hover", demo_root, path="Demo/Proofs.lean", version=1, line=3, character=29)
        order.append("hover")
    assert order == ["hover", "sync"]


async def test_a_killed_lean_is_worker_exited_then_restarted_with_a_new_epoch(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    runtime = broker.cached(str(demo_root))
    assert runtime is not None and runtime.epoch == 1
    client = await runtime.client()
    async with anyio.create_task_group() as tg:
        errors: list[BrokerError] = []

        async def slow() -> None:
            try:
                await call(broker, "sync", demo_root, path="Demo/Long.lean")
            except BrokerError as exc:
                errors.append(exc)

        tg.start_soon(slow)
        await anyio.wait_all_tasks_blocked()
        os.kill(client.pid, signal.SIGKILL)
    assert [e.code for e in errors] == [codes.WORKER_EXITED]
    again = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert again["version"] == 1 and runtime.epoch == 2
    stats = broker.stats()["workspaces"][f"local:{demo_root}"]["byBackend"]["lean"]
    assert stats["sessionRestarts"] == 1 and stats["ops"]["sync_file"]["workerExitedCount"] == 1


async def test_a_killed_file_worker_makes_the_barrier_incomplete_and_the_document_recovers(
    broker: Broker, demo_root: Path
) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    runtime = broker.runtime_for(resolve({"root": str(demo_root)}))
    client = await runtime.client()
    elaborating = anyio.Event()

    def on_event(event: object) -> None:
        # Kill mid-elaboration, as in the captures: a worker killed before the watchdog handed it the
        # document crashes the real watchdog instead.
        if isinstance(event, FileProgressEvent) and (event.progress.get("range_start_line") or 0) > 10:
            elaborating.set()

    errors: list[BrokerError] = []
    async with anyio.create_task_group() as tg:

        async def slow() -> None:
            try:
                await call(broker, "sync", demo_root, ctx=CallContext(emit=on_event), path="Demo/Long.lean")
            except BrokerError as exc:
                errors.append(exc)

        tg.start_soon(slow)
        with anyio.fail_after(60):
            await elaborating.wait()
        procs.kill(procs.worker_pids(client.pid, (demo_root / "Demo/Long.lean").as_uri())[0])
    assert [e.code for e in errors] == [codes.SYNC_BARRIER_INCOMPLETE]
    assert errors[0].data is not None and errors[0].data["elaboration"] == "failed"
    recovered = await call(broker, "refresh", demo_root, path="Demo/Long.lean")
    assert recovered["version"] == 1 and recovered["diagnostics"]["counts"]["total"] == 0


async def test_cancelling_a_sync_leaves_the_runtime_usable(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    with anyio.move_on_after(0.3):
        await broker.call("sync", {"workspace": {"root": str(demo_root)}, "path": "Demo/Long.lean"})
    done = await call(broker, "sync", demo_root, path="Demo/Long.lean")
    assert done["diagnostics"]["counts"]["total"] == 0
    ops = broker.stats()["workspaces"][f"local:{demo_root}"]["byBackend"]["lean"]["ops"]["sync_file"]
    assert (ops["cancelledCount"], ops["successCount"]) == (1, 1)


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


async def test_drop_is_idempotent_and_a_later_call_recreates_the_runtime(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    first = await call(broker, "drop_workspace", demo_root)
    assert first == {"workspace": {"root": str(demo_root)}, "dropped": True, "invalidated_handles": True}
    second = await call(broker, "drop_workspace", demo_root)
    assert (second["dropped"], second["reason"]) == (False, "notFound")
    assert not broker.active
    again = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert again["version"] == 1 and broker.active


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


async def test_diagnostics_resources_list_open_documents_and_notify_changes(broker: Broker, demo_root: Path) -> None:
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


async def test_distinct_roots_get_their_own_runtimes_side_by_side(
    broker: Broker, demo_root: Path, built_demo: Path, tmp_path: Path
) -> None:
    import shutil

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


async def test_drop_accepts_the_echoed_descriptor_after_the_directory_is_gone(
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


async def test_the_runtime_snapshot_reports_open_files_against_the_disk(broker: Broker, demo_root: Path) -> None:
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
