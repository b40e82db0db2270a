"""Tool calls: results and errors, progress, beam.status, lean.diagnostic, cancellation, the drop fence, EOF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import BrokerError, CallContext, DiagnosticEvent, FileProgressEvent, SetupEvent
from beam_mcp.errors import INVALID_REQUEST

from .support import FakeBroker, Harness, harness, make_project, modern_meta

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(make_project(tmp_path / "proj"))


def structured(response: dict[str, Any]) -> Any:
    result = response["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result["content"][0]["type"] == "text" and len(result["content"]) == 1
    return result["structuredContent"]


def progress(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n["params"] for n in notes if n.get("method") == "notifications/progress"]


def logs(notes: list[dict[str, Any]], logger: str) -> list[dict[str, Any]]:
    return [
        n["params"] for n in notes if n.get("method") == "notifications/message" and n["params"]["logger"] == logger
    ]


def diag(severity: str, line: int = 0) -> dict[str, Any]:
    return {
        "path": "A.lean",
        "uri": "file:///p/A.lean",
        "severity": severity,
        "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}},
        "message": f"{severity} {line}",
        "completion_blocking": severity == "error",
        "version": 1,
    }


# ---- results and errors ----------------------------------------------------------------------------------------
async def test_beam_version_reports_identity_without_touching_the_broker() -> None:
    async with harness() as h:
        response, notes = await h.call("beam_version", {}, progressToken="t")
        out = structured(response)
        assert out["name"] == "lean-beam-mcp" and out["mcp_protocol"] == "2026-07-28"
        assert out["runtime_active"] is False and isinstance(out["version"], str)
        assert response["result"]["isError"] is False
        assert notes == [] and h.broker.calls == []


async def test_beam_stats_is_process_wide_and_empty_before_any_runtime(root: str) -> None:
    async with harness() as h:
        response, _ = await h.call("beam_stats")
        assert structured(response) == {"uptimeMs": 0, "workspaces": {}}
        await h.call("lean_update", {"workspace": {"root": root}, "path": "A.lean"})
        response, _ = await h.call("beam_stats", {})
        assert f"local:{root}" in structured(response)["workspaces"]
        version, _ = await h.call("beam_version")
        assert structured(version)["runtime_active"] is True


@pytest.mark.parametrize("tool", ["beam_version", "beam_stats", "lean_sync", "lean_drop_workspace"])
async def test_undeclared_input_fields_are_invalid_input_tool_errors(tool: str, root: str) -> None:
    async with harness() as h:
        response, notes = await h.call(tool, {"workspace": {"root": root}, "path": "A.lean", "zzz": 1, "root": "x"},
                                       progressToken=1)  # fmt: skip
        out = structured(response)
        assert response["result"]["isError"] is True
        assert out["code"] == "invalidInput"
        assert out["message"].startswith(f"{tool} accepts no undeclared input fields: ")
        assert "zzz" in out["message"] and "root" in out["message"]
        assert notes == [] and h.broker.calls == []


@pytest.mark.parametrize(
    ("workspace", "fragment"),
    [
        (None, "workspace is required"),
        ({"root": "relative/dir"}, "workspace root must be an absolute path"),
        ({"root": "/definitely/not/here"}, "does not resolve"),
        ({"root": "/", "alias": "x"}, "workspace descriptor accepts only the 'root' field"),
        ({"root": "/"}, "not a Lean/Lake project"),
    ],
)
async def test_bad_descriptors_are_invalid_input_tool_errors(workspace: Any, fragment: str) -> None:
    async with harness() as h:
        report = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"}
        for tool, args in (("lean_sync", {"path": "A.lean"}), ("beam_feedback_report", report)):
            if workspace is not None:
                args = {**args, "workspace": workspace}
            response, notes = await h.call(tool, args, progressToken="p")
            out = structured(response)
            assert response["result"]["isError"] is True and out["code"] == "invalidInput", out
            assert fragment in out["message"]
            assert progress(notes) == []


async def test_broker_errors_become_tool_errors_with_code_message_and_data(root: str) -> None:
    async def stale(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        raise BrokerError("contentModified", "stale version", {"reason": "documentVersionMismatch"})

    async with harness() as h:
        h.broker.handlers["hover"] = stale
        args = {"workspace": {"root": root}, "path": "A.lean", "version": 1, "line": 0, "character": 0}
        response, _ = await h.call("lean_hover", args, modern=False)
        assert "error" in response  # legacy: not initialized yet
        await h.initialize()
        response, _ = await h.call("lean_hover", args, modern=False)
        assert response["result"] == {
            "content": [response["result"]["content"][0]],
            "structuredContent": {
                "code": "contentModified",
                "message": "stale version",
                "data": {"reason": "documentVersionMismatch"},
            },
            "isError": True,
        }


async def test_runtime_setup_failures_are_json_rpc_invalid_request(root: str) -> None:
    async def broken(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        raise BrokerError("runtimeSetup", "no Lean server command")

    async with harness() as h:
        h.broker.handlers["sync"] = broken
        response, _ = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
        assert response["error"] == {
            "code": INVALID_REQUEST,
            "message": "could not set up Lean Beam MCP runtime: no Lean server command",
        }


async def test_lean_results_echo_the_canonical_workspace(root: str, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    async with harness() as h:
        response, _ = await h.call("lean_update", {"workspace": {"root": str(alias)}, "path": "A.lean"})
        assert structured(response)["workspace"] == {"root": root}


async def test_unexpected_exceptions_are_internal_errors(root: str) -> None:
    async def boom(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        raise RuntimeError("kaput")

    async with harness() as h:
        h.broker.handlers["update"] = boom
        response, _ = await h.call("lean_update", {"workspace": {"root": root}, "path": "A.lean"})
        assert response["error"]["code"] == -32603


# ---- progress ---------------------------------------------------------------------------------------------------
async def test_progress_is_one_preparation_then_throttled_file_progress_with_one_done(root: str) -> None:
    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        for n in range(1, 61):
            ctx.emit(
                FileProgressEvent("A.lean", {"updates": n, "done": False, "range_start_line": 1, "range_end_line": n})
            )
        ctx.emit(FileProgressEvent("A.lean", {"updates": 61, "done": True}))
        ctx.emit(FileProgressEvent("A.lean", {"updates": 62, "done": True}))
        return {"document_progress": {"updates": 62, "done": True}}

    async with harness() as h:
        h.broker.handlers["sync"] = sync
        response, notes = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean"}, progressToken=7)
        updates = progress(notes)
        assert [u["progress"] for u in updates] == list(range(1, len(updates) + 1))
        assert all(u["progressToken"] == 7 and "total" not in u for u in updates)
        messages = [u["message"] for u in updates]
        assert messages == [
            "lean_sync on A.lean: preparing the Lean workspace",
            "lean_sync: processing A.lean (range=1..1 updates=1 done=false)",
            "lean_sync: processing A.lean (range=1..26 updates=26 done=false)",
            "lean_sync: processing A.lean (range=1..51 updates=51 done=false)",
            "lean_sync: processed A.lean (updates=61 done=true)",
        ]
        assert structured(response)["document_progress"] == {"updates": 62, "done": True}
        assert h.raw_available() == []  # nothing after the final response


async def test_lake_setup_lines_give_the_first_and_every_tenth_progress_update(root: str) -> None:
    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        for n in range(1, 21):
            ctx.emit(SetupEvent(f"  ✔ [{n}/20] Built   Dep{n}  ", "A.lean"))
        return {}

    async with harness() as h:
        h.broker.handlers["sync"] = sync
        _, notes = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean"}, progressToken="s")
        messages = [u["message"] for u in progress(notes)][1:]
        assert messages == [
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [1/20] Built Dep1",
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [10/20] Built Dep10",
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [20/20] Built Dep20",
        ]


async def test_tools_without_setup_or_file_progress_ignore_those_events(root: str) -> None:
    async def update(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        ctx.emit(SetupEvent("building", "A.lean"))
        ctx.emit(FileProgressEvent("A.lean", {"updates": 1, "done": True}))
        return {"version": 1, "changed": True}

    async with harness() as h:
        h.broker.handlers["update"] = update
        _, notes = await h.call("lean_update", {"workspace": {"root": root}, "path": "A.lean"}, progressToken=1.5)
        assert [(u["progressToken"], u["message"]) for u in progress(notes)] == [
            (1.5, "lean_update on A.lean: preparing the Lean workspace")
        ]
        assert logs(notes, "beam.status") == []


async def test_feedback_reports_one_collection_update_and_uses_beam_feedback(root: str) -> None:
    report = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"}
    async with harness() as h:
        await h.call("lean_update", {"workspace": {"root": root}, "path": "A.lean"})  # a cached runtime
        response, notes = await h.call(
            "beam_feedback_report", {**report, "workspace": {"root": root}, "include_collected": True}, progressToken=1
        )
        out = structured(response)
        assert response["result"]["isError"] is False
        assert out["markdown"].startswith("# t") and out["workspace"] == {"root": root}
        assert out["collected"]["identity"]["mcp_protocol"] == "2026-07-28"
        assert out["collected"]["runtime"]["open_files"] == [{"path": "Main.lean", "version": 1}]
        assert [u["message"] for u in progress(notes)] == ["collecting beam_feedback_report context"]
        response, notes = await h.call(
            "beam_feedback_report", {**report, "workspace": {"root": root}, "confidential": True}, progressToken=2
        )
        out = structured(response)
        assert "workspace" not in out and out["metadata"]["confidential"] is True
        assert [u["message"] for u in progress(notes)] == ["preparing confidential beam_feedback_report"]
        response, _ = await h.call("beam_feedback_report", {**report, "title": " ", "workspace": {"root": root}})
        assert response["result"]["isError"] is True and structured(response)["code"] == "invalidInput"


# ---- beam.status and lean.diagnostic ----------------------------------------------------------------------------
async def _status_case(h: Harness, root: str, *, modern: bool = True, **meta: Any) -> list[dict[str, Any]]:
    release = anyio.Event()

    async def slow(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        with anyio.move_on_after(0.5):
            await release.wait()
        return {}

    h.broker.handlers["sync"] = slow
    rid = next(h.ids)
    params: dict[str, Any] = {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
    params["_meta"] = modern_meta(**meta) if modern else meta
    await h.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    first = await h.recv()
    release.set()
    if "method" in first:
        _, rest = await h.until(rid)
        return [first, *rest]
    return []


async def test_a_slow_call_without_a_token_emits_one_status_notice(root: str) -> None:
    async with harness(status_delay=0) as h:
        notes = await _status_case(h, root, logLevel="notice")
        [status] = logs(notes, "beam.status")
        assert status == {
            "level": "notice",
            "logger": "beam.status",
            "data": {
                "requestId": status["data"]["requestId"],
                "tool": "lean_sync",
                "state": "running",
                "message": "lean_sync on A.lean is still working.",
                "path": "A.lean",
                "progressHint": "For detailed live updates, pass tools/call params._meta.progressToken.",
            },
        }
        assert isinstance(status["data"]["requestId"], int)
        assert progress(notes) == []


@pytest.mark.parametrize(
    ("meta", "shown"),
    [({}, False), ({"logLevel": "debug"}, True), ({"logLevel": "notice"}, True), ({"logLevel": "warning"}, False)],
)
async def test_modern_status_notices_follow_the_request_log_level(root: str, meta: dict[str, Any], shown: bool) -> None:
    async with harness(status_delay=0) as h:
        notes = await _status_case(h, root, **meta)
        assert len(logs(notes, "beam.status")) == int(shown)


@pytest.mark.parametrize(("level", "shown"), [(None, True), ("info", True), ("notice", True), ("warning", False)])
async def test_legacy_status_notices_follow_set_level(root: str, level: str | None, shown: bool) -> None:
    async with harness(status_delay=0) as h:
        await h.initialize()
        if level:
            await h.request("logging/setLevel", {"level": level})
        notes = await _status_case(h, root, modern=False)
        assert len(logs(notes, "beam.status")) == int(shown)


async def test_a_progress_token_replaces_the_status_notice(root: str) -> None:
    async with harness(status_delay=0) as h:
        notes = await _status_case(h, root, logLevel="debug", progressToken="p")
        assert logs(notes, "beam.status") == [] and len(progress(notes)) == 1


async def test_the_first_setup_line_triggers_the_status_notice_without_a_token(root: str) -> None:
    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        ctx.emit(SetupEvent("Building Dep", "A.lean"))
        ctx.emit(SetupEvent("Building Dep2", "A.lean"))
        return {}

    async with harness() as h:
        h.broker.handlers["sync"] = sync
        _, notes = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean"}, logLevel="info")
        [status] = logs(notes, "beam.status")
        assert status["data"]["state"] == "preparing_dependencies"
        assert status["data"]["message"] == "lean_sync on A.lean: preparing Lean dependencies — Building Dep"


LEVEL_MATRIX = [
    (None, []),
    ("debug", ["error", "warning", "info", "debug"]),
    ("info", ["error", "warning", "info"]),
    ("notice", ["error", "warning"]),
    ("warning", ["error", "warning"]),
    ("error", ["error"]),
    ("critical", []),
    ("alert", []),
    ("emergency", []),
]


async def _diagnostics(h: Harness, root: str, **kwargs: Any) -> list[dict[str, Any]]:
    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        for severity in ("error", "warning", "information", "hint"):
            ctx.emit(DiagnosticEvent({**diag(severity), "save_blocking": True}))
        return {}

    h.broker.handlers["sync"] = sync
    _, notes = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean", "diagnostic_scope": "all"},
                            **kwargs)  # fmt: skip
    return logs(notes, "lean.diagnostic")


@pytest.mark.parametrize(("level", "visible"), LEVEL_MATRIX)
async def test_modern_diagnostic_logs_follow_the_per_request_level(
    root: str, level: str | None, visible: list[str]
) -> None:
    async with harness() as h:
        events = await _diagnostics(h, root, **({"logLevel": level} if level else {}))
        assert [e["level"] for e in events] == visible
        for event in events:
            assert "save_blocking" not in event["data"] and event["data"]["path"] == "A.lean"


@pytest.mark.parametrize(("level", "visible"), [("debug", LEVEL_MATRIX[1][1]), *LEVEL_MATRIX[2:]])
async def test_legacy_diagnostic_logs_follow_set_level(root: str, level: str, visible: list[str]) -> None:
    async with harness() as h:
        await h.initialize()
        if level != "debug":
            await h.request("logging/setLevel", {"level": level})
        events = await _diagnostics(h, root, modern=False)
        assert [e["level"] for e in events] == visible


async def test_legacy_starts_at_debug_and_modern_metadata_is_never_retained(root: str) -> None:
    async with harness() as h:
        assert len(await _diagnostics(h, root, logLevel="debug")) == 4
        assert await _diagnostics(h, root) == []  # the previous request's level is not remembered


# ---- concurrency, cancellation, fence, EOF ----------------------------------------------------------------------
async def test_calls_overlap_and_answer_out_of_order(root: str) -> None:
    release = anyio.Event()

    async def slow(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await release.wait()
        return {"slow": True}

    async with harness() as h:
        h.broker.handlers["sync"] = slow
        await h.send(_call(1, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}))
        fast, _ = await h.call("lean_update", {"workspace": {"root": root}, "path": "B.lean"}, rid=2)
        assert fast["id"] == 2
        release.set()
        slow_response, _ = await h.until(1)
        assert structured(slow_response)["slow"] is True


async def test_cancelled_calls_stop_broker_work_and_get_no_response(root: str) -> None:
    started = anyio.Event()

    async def forever(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with harness() as h:
        h.broker.handlers["sync"] = forever
        await h.send(_call("c1", "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}, progressToken="t"))
        with anyio.fail_after(5):
            await started.wait()
        await h.notify("notifications/cancelled", {"requestId": "c1", "reason": "user"})
        await anyio.wait_all_tasks_blocked()  # until then "c1" is still owned: a reuse would be ignored
        version, seen = await h.call("beam_version", rid="c1")  # the id is free again
        assert version["id"] == "c1" and "result" in version
        assert [m for m in seen if "id" in m] == []
        assert h.broker.cancelled == ["sync"]
        await h.notify("notifications/cancelled", {"requestId": "c1"})  # late cancel: inert


async def test_the_drop_fence_orders_earlier_and_later_calls(root: str) -> None:
    order: list[str] = []
    release = anyio.Event()

    async def slow_sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await release.wait()
        order.append("sync")
        return {}

    async def drop(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        order.append("drop")
        return {}

    async def update(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        order.append("update")
        return {}

    async with harness() as h:
        h.broker.handlers.update(sync=slow_sync, drop_workspace=drop, update=update)
        ws = {"workspace": {"root": root}}
        await h.send(_call(1, "lean_sync", {**ws, "path": "A.lean"}))
        await h.send(_call(2, "lean_drop_workspace", ws, progressToken="d"))
        prep = await h.recv()  # the drop's preparation comes before it waits behind the sync
        assert prep["params"] == {
            "progressToken": "d",
            "progress": 1,
            "message": "lean_drop_workspace: preparing workspace eviction",
        }
        await h.send(_call(3, "lean_update", {**ws, "path": "B.lean"}))
        await h.send(_call(4, "beam_stats", {}))
        await h.notify("notifications/cancelled", {"requestId": 2})  # drop is not cancellable
        await anyio.wait_all_tasks_blocked()
        assert order == []
        release.set()
        responses = [await h.recv() for _ in range(4)]
        assert [r["id"] for r in responses[:2]] == [1, 2] and {r["id"] for r in responses[2:]} == {3, 4}
        assert order == ["sync", "drop", "update"]
        assert structured(responses[1])["dropped"] is True


async def test_a_call_cancelled_while_waiting_behind_a_drop_is_never_dispatched(root: str) -> None:
    release = anyio.Event()

    async def slow_sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await release.wait()
        return {}

    async with harness() as h:
        h.broker.handlers["sync"] = slow_sync
        ws = {"workspace": {"root": root}}
        await h.send(_call(1, "lean_sync", {**ws, "path": "A.lean"}))
        await h.send(_call(2, "lean_drop_workspace", ws))
        await h.send(_call(3, "lean_update", {**ws, "path": "B.lean"}))
        await anyio.wait_all_tasks_blocked()
        await h.notify("notifications/cancelled", {"requestId": 3})
        release.set()
        responses = [await h.recv() for _ in range(2)]
        assert [r["id"] for r in responses] == [1, 2]
        assert [name for name, _ in h.broker.calls] == ["sync", "drop_workspace"]


async def test_drop_is_idempotent_and_accepts_a_vanished_canonical_root(root: str, tmp_path: Path) -> None:
    async with harness() as h:
        first, _ = await h.call("lean_drop_workspace", {"workspace": {"root": root}})
        assert structured(first) == {
            "workspace": {"root": root},
            "dropped": False,
            "invalidated_handles": False,
            "reason": "notFound",
        }
        gone = str(tmp_path / "gone")
        second, _ = await h.call("lean_drop_workspace", {"workspace": {"root": gone}})
        assert structured(second)["workspace"] == {"root": gone}


async def test_eof_cancels_cooperative_calls_but_lets_a_drop_finish(root: str) -> None:
    started = anyio.Event()
    drop_release = anyio.Event()
    broker = FakeBroker()

    async def forever(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    async def drop(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await drop_release.wait()
        return {}

    broker.handlers.update(sync=forever, drop_workspace=drop)
    outputs: list[dict[str, Any]] = []
    async with harness(broker) as h:
        ws = {"workspace": {"root": root}}
        await h.send(_call(1, "lean_sync", {**ws, "path": "A.lean"}))
        with anyio.fail_after(5):
            await started.wait()
        other = make_project(Path(root).parent / "other")
        await h.send(_call(2, "lean_drop_workspace", {"workspace": {"root": str(other)}}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.server.shutdown)
            await anyio.wait_all_tasks_blocked()
            drop_release.set()
        outputs = [json.loads(line) for line in h.raw_available()]
    assert [o["id"] for o in outputs] == [2]
    assert broker.cancelled == ["sync"] and broker.closed


def _call(rid: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": modern_meta(**meta)},
    }


async def test_eof_gives_up_on_a_drop_stuck_past_the_grace_period(root: str) -> None:
    async def stuck(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    broker = FakeBroker()
    broker.handlers["drop_workspace"] = stuck
    async with harness(broker, shutdown_grace=0.05) as h:
        await h.send(_call(1, "lean_drop_workspace", {"workspace": {"root": root}}))
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(5):
            await h.server.shutdown()
        assert h.raw_available() == []
    assert broker.cancelled == ["drop_workspace"] and broker.closed
