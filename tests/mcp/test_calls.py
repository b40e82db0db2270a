"""Running tool calls (`_calls`): runners, results and tool errors, progress, beam.status, lean.diagnostic, the fence.

Every call runs through the real broker over the scripted fake Lean server; a project's Lean work is held with a
`LeanGate` when a test needs a call in flight.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import anyio
import pytest

from beam_broker import BY_NAME
from beam_mcp import ServerConfig
from beam_mcp._calls import StatusClock
from beam_mcp.errors import INVALID_REQUEST, RUNTIME_SETUP_PREFIX
from beam_mcp.server import STATUS_DELAY_ENV
from tests.support.fixtures import fake_cmd

from .support import Harness, LeanGate, call_message, harness, logs, progress, structured

pytestmark = pytest.mark.anyio

REPORT = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"}
SYNC_KEY = BY_NAME["sync"].key
UPDATE_KEY = BY_NAME["update"].key
SEVERITIES = [(1, "error"), (2, "warning"), (3, "information"), (4, "hint")]


@pytest.fixture
def root(fake_project: Callable[..., Path]) -> str:
    return str(fake_project("proj", {"A.lean": "theorem a : True := trivial\n", "B.lean": "def b := 1\n"}))


def ws(root: str | Path, **arguments: Any) -> dict[str, Any]:
    return {"workspace": {"root": str(root)}, **arguments}


def setup_lines(*messages: str) -> dict[str, Any]:
    """Fake Lean config: A.lean's diagnostics are Lake setup lines (information over the header line)."""
    header = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    return {"diagnostics": {"A.lean": [{"range": header, "severity": 3, "message": m} for m in messages]}}


# ---- process tools ---------------------------------------------------------------------------------------------
async def test_beam_version_reports_identity_without_starting_a_runtime() -> None:
    async with harness() as h:
        response, notes = await h.call("beam_version", {}, progressToken="t")
        out = structured(response)
        assert out["name"] == "lean-beam-mcp" and out["mcp_protocol"] == "2026-07-28"
        assert out["runtime_active"] is False and isinstance(out["version"], str)
        assert "server_binary" not in out
        assert response["result"]["isError"] is False
        assert notes == []
        assert (await h.stats())["workspaces"] == {}


async def test_beam_version_names_the_server_binary_it_was_given() -> None:
    async with harness(server_binary="/opt/beam/bin/lean-beam-mcp") as h:
        response, _ = await h.call("beam_version")
        assert structured(response)["server_binary"] == "/opt/beam/bin/lean-beam-mcp"


async def test_beam_stats_is_process_wide_and_empty_before_any_runtime(root: str) -> None:
    async with harness() as h:
        response, notes = await h.call("beam_stats", progressToken=3)
        assert structured(response) == {"uptimeMs": 0, "workspaces": {}}
        assert notes == []  # a supplied token is not used
        await h.call("lean_update", ws(root, path="A.lean"))
        response, _ = await h.call("beam_stats", {})
        workspace = structured(response)["workspaces"][f"local:{root}"]
        assert workspace["root"] == root and workspace["byBackend"]["lean"]["ops"][UPDATE_KEY]["count"] == 1
        version, _ = await h.call("beam_version")
        assert structured(version)["runtime_active"] is True


@pytest.mark.parametrize(
    ("tool", "extra", "undeclared"),
    [
        ("beam_version", {"path": "A.lean"}, ["path", "root", "workspace", "zzz"]),
        ("beam_stats", {"path": "A.lean"}, ["path", "root", "workspace", "zzz"]),
        ("beam_feedback_report", REPORT, ["root", "zzz"]),
        ("lean_sync", {"path": "A.lean"}, ["root", "zzz"]),
        ("lean_drop_workspace", {"path": "A.lean"}, ["path", "root", "zzz"]),
    ],
)
async def test_undeclared_input_fields_are_invalid_input_tool_errors(
    tool: str, extra: dict[str, Any], undeclared: list[str], root: str
) -> None:
    async with harness() as h:
        response, notes = await h.call(tool, {**ws(root, **extra), "zzz": 1, "root": "x"}, progressToken=1)
        out = structured(response)
        assert response["result"]["isError"] is True
        assert out["code"] == "invalidInput"
        assert out["message"] == f"{tool} accepts no undeclared input fields: {', '.join(undeclared)}"
        assert out["data"] == {"fields": undeclared}
        assert notes == []  # rejected before its preparation update
        assert (await h.stats())["workspaces"] == {}  # and before any Lean work


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
        for tool, args in (("lean_sync", {"path": "A.lean"}), ("beam_feedback_report", REPORT)):
            if workspace is not None:
                args = {**args, "workspace": workspace}
            response, notes = await h.call(tool, args, progressToken="p")
            out = structured(response)
            assert response["result"]["isError"] is True and out["code"] == "invalidInput", out
            assert fragment in out["message"]
            assert progress(notes) == []
        assert (await h.stats())["workspaces"] == {}


async def test_broker_errors_become_tool_errors_with_code_message_and_data(root: str) -> None:
    async with harness() as h:
        args = ws(root, path="A.lean", version=7, line=0, character=0)
        response, _ = await h.call("lean_hover", args, modern=False)
        assert "error" in response  # legacy: not initialized yet
        await h.initialize()
        synced, _ = await h.call("lean_sync", ws(root, path="A.lean"), modern=False)
        assert structured(synced)["version"] == 1
        response, _ = await h.call("lean_hover", args, modern=False)
        result = response["result"]
        assert set(result) == {"content", "structuredContent", "isError"} and result["isError"] is True
        error = structured(response)
        assert set(error) == {"code", "message", "data"} and error["code"] == "contentModified"
        assert error["data"]["reason"] == "documentVersionMismatch"
        assert (error["data"]["expectedVersion"], error["data"]["currentVersion"]) == (7, 1)


async def test_runtime_setup_failures_are_json_rpc_invalid_request(root: str, tmp_path: Path) -> None:
    async with harness(lean_cmd=[str(tmp_path / "no-such-lean")]) as h:
        response, notes = await h.call("lean_sync", ws(root, path="A.lean"))
        assert response["error"]["code"] == INVALID_REQUEST
        assert response["error"]["message"].startswith(RUNTIME_SETUP_PREFIX)
        assert "no-such-lean" in response["error"]["message"]
        assert [m for m in notes if "id" in m] == []
        version, _ = await h.call("beam_version")  # the server stays usable
        assert "result" in version


async def test_lean_results_echo_the_canonical_workspace(root: str, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    async with harness() as h:
        response, _ = await h.call("lean_update", ws(alias, path="A.lean"))
        assert structured(response)["workspace"] == {"root": root}
        response, _ = await h.call("lean_update", ws(root, path="A.lean"))
        assert structured(response) == {"workspace": {"root": root}, "version": 1, "snapshot": ANY, "changed": False}
        assert list((await h.stats())["workspaces"]) == [f"local:{root}"]  # aliases share one runtime


async def test_an_unexpected_failure_inside_a_lean_operation_is_an_internal_error_tool_result(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (Path(root) / "Loop.lean").write_text("def x := 1\n")
    real_open = os.open

    def failing_open(path: Any, flags: int, *args: Any) -> int:
        if str(path).endswith("Loop.lean"):  # the disk fails: nothing the broker classifies
            raise OSError(errno.EIO, "Input/output error")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", failing_open)
    async with harness() as h:
        response, _ = await h.call("lean_update", ws(root, path="Loop.lean"))
        assert response["result"]["isError"] is True
        assert structured(response)["code"] == "internalError"
        again, _ = await h.call("lean_update", ws(root, path="A.lean"))  # the runtime stays usable
        assert structured(again)["changed"] is True


# ---- progress ---------------------------------------------------------------------------------------------------
async def test_a_sync_reports_one_preparation_then_file_progress_with_one_terminal_done(root: str) -> None:
    async with harness() as h:
        response, notes = await h.call("lean_sync", ws(root, path="A.lean"), progressToken=7)
        updates = progress(notes)
        assert [u["progress"] for u in updates] == list(range(1, len(updates) + 1))
        assert all(u["progressToken"] == 7 and "total" not in u for u in updates)
        messages = [u["message"] for u in updates]
        assert messages[0] == "lean_sync on A.lean: preparing the Lean workspace"
        assert len(messages) >= 3 and messages[1].startswith("lean_sync: processing A.lean (")
        assert "done=false" in messages[1]
        assert [m for m in messages if "done=true" in m] == [messages[-1]]
        assert messages[-1].startswith("lean_sync: processed A.lean (")
        out = structured(response)
        assert out["document_progress"]["done"] is True
        assert f"updates={out['document_progress']['updates']} done=true" in messages[-1]
        assert await h.quiet() == []  # nothing after the final response


async def test_lake_setup_lines_give_the_first_and_every_tenth_progress_update(root: str) -> None:
    async with harness(setup_lines(*(f"  ✔ [{n}/20] Built   Dep{n}  " for n in range(1, 21)))) as h:
        _, notes = await h.call("lean_sync", ws(root, path="A.lean"), progressToken="s")
        messages = [u["message"] for u in progress(notes) if "preparing Lean dependencies" in u["message"]]
        assert messages == [
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [1/20] Built Dep1",
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [10/20] Built Dep10",
            "lean_sync on A.lean: preparing Lean dependencies — ✔ [20/20] Built Dep20",
        ]


async def test_tools_without_setup_or_file_progress_report_only_their_preparation(root: str) -> None:
    async with harness(setup_lines("✔ [1/1] Built Dep")) as h:
        _, notes = await h.call("lean_update", ws(root, path="A.lean"), progressToken=1.5)
        assert [(u["progressToken"], u["message"]) for u in progress(notes)] == [
            (1.5, "lean_update on A.lean: preparing the Lean workspace")
        ]
        _, notes = await h.call("lean_workspace_symbols", ws(root, query="a"), progressToken=2)
        assert [u["message"] for u in progress(notes)] == ["lean_workspace_symbols: preparing the Lean workspace"]
        assert logs(notes, "beam.status") == []


async def test_feedback_reports_one_collection_update_and_uses_the_cached_runtime(root: str) -> None:
    async with harness() as h:
        await h.call("lean_update", ws(root, path="A.lean"))  # a cached runtime
        response, notes = await h.call(
            "beam_feedback_report", {**REPORT, **ws(root), "include_collected": True}, progressToken=1
        )
        out = structured(response)
        assert response["result"]["isError"] is False
        assert out["markdown"].startswith("# t") and out["workspace"] == {"root": root}
        assert out["collected"]["identity"]["mcp_protocol"] == "2026-07-28"
        assert out["collected"]["identity"]["runtime_active"] is True
        assert [(f["path"], f["version"]) for f in out["collected"]["runtime"]["open_files"]] == [("A.lean", 1)]
        assert [u["message"] for u in progress(notes)] == ["collecting beam_feedback_report context"]
        response, notes = await h.call(
            "beam_feedback_report", {**REPORT, **ws(root), "confidential": True}, progressToken=2
        )
        out = structured(response)
        assert "workspace" not in out and out["metadata"]["confidential"] is True
        assert [u["message"] for u in progress(notes)] == ["preparing confidential beam_feedback_report"]
        response, _ = await h.call("beam_feedback_report", {**REPORT, "title": " ", **ws(root)})
        assert response["result"]["isError"] is True and structured(response)["code"] == "invalidInput"


async def test_feedback_never_starts_a_runtime(root: str) -> None:
    async with harness() as h:
        response, _ = await h.call("beam_feedback_report", {**REPORT, **ws(root), "include_collected": True})
        out = structured(response)
        assert out["collected"]["identity"]["runtime_active"] is False
        assert out["collected"].get("runtime") is None
        assert (await h.stats())["workspaces"] == {}


async def test_feedback_hides_the_secrets_of_the_lean_server_command_as_the_server_does(root: str) -> None:
    # The server's redactor hides `--lean-cmd`'s secret flags in every error and log; a report must too.
    secret = "cmd-secret-0123456789"
    async with harness(lean_cmd=[*fake_cmd(None), f"--auth-token={secret}"]) as h:
        arguments = {**REPORT, "summary": f"the server ran with {secret}", **ws(root), "include_collected": True}
        response, _ = await h.call("beam_feedback_report", arguments)
        out = structured(response)
        assert secret not in json.dumps(response)
        assert "the server ran with [redacted:auth-token]" in out["markdown"]


def test_the_status_delay_is_two_seconds_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATUS_DELAY_ENV, raising=False)
    assert ServerConfig().delay() == 2.0
    monkeypatch.setenv(STATUS_DELAY_ENV, "250")
    assert ServerConfig().delay() == 0.25
    assert ServerConfig(status_delay=0).delay() == 0
    monkeypatch.setenv(STATUS_DELAY_ENV, "soon")
    assert ServerConfig().delay() == 2.0


# ---- beam.status and lean.diagnostic ----------------------------------------------------------------------------
async def _status_case(h: Harness, root: str, *, modern: bool = True, **meta: Any) -> list[dict[str, Any]]:
    """A lean_sync that is in flight (its Lean work held at the gate) until any status notice was decided."""
    rid = next(h.ids)
    async with LeanGate.install(Path(root)) as gate:
        await h.send(call_message(rid, "lean_sync", ws(root, path="A.lean"), modern=modern, **meta))
        with anyio.fail_after(10):
            await gate.reached()
        await anyio.wait_all_tasks_blocked()  # the watchdog (delay 0) has run by now
        gate.open()
        response, notes = await h.until(rid)
    assert structured(response)["version"] == 1
    return notes


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
        assert logs(notes, "beam.status") == [] and len(progress(notes)) >= 1


async def test_a_drop_waiting_behind_a_call_gets_a_pathless_status_notice(root: str, fake_project: Any) -> None:
    other = fake_project("other", {"X.lean": "def x := 1\n"})
    async with harness(status_delay=0) as h, LeanGate.install(other) as gate:
        await h.send(call_message("held", "lean_sync", ws(other, path="X.lean"), logLevel="warning"))
        with anyio.fail_after(10):
            await gate.reached()
        await h.send(call_message("drop", "lean_drop_workspace", ws(root), logLevel="notice"))
        [status] = logs([await h.recv()], "beam.status")  # while it waits behind the held call
        assert status["data"]["tool"] == "lean_drop_workspace" and "path" not in status["data"]
        assert status["data"]["message"] == "lean_drop_workspace is still working."
        gate.open()
        drop, _ = await h.until("drop")
        assert structured(drop)["dropped"] is False


async def test_the_first_setup_line_triggers_the_status_notice_without_a_token(root: str) -> None:
    async with harness(setup_lines("✔ [1/2] Building Dep", "✔ [2/2] Building Dep2")) as h:
        _, notes = await h.call("lean_sync", ws(root, path="A.lean"), logLevel="info")
        [status] = logs(notes, "beam.status")
        assert status["data"]["state"] == "preparing_dependencies"
        assert status["data"]["message"] == "lean_sync on A.lean: preparing Lean dependencies — ✔ [1/2] Building Dep"


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
FOUR_SEVERITIES = {
    "diagnostics": {"A.lean": [{"line": n - 1, "severity": n, "message": f"{name} here"} for n, name in SEVERITIES]}
}


async def _diagnostics(
    h: Harness, root: str, n: int, *, modern: bool = True, level: str | None = None
) -> list[dict[str, Any]]:
    """Sync a new version of A.lean (its four diagnostics are streamed again) and return the lean.diagnostic logs."""
    (Path(root) / "A.lean").write_text("".join(f"-- line {i} of version {n}\n" for i in range(4)), encoding="utf-8")
    meta = {"logLevel": level} if level else {}
    _, notes = await h.call("lean_sync", ws(root, path="A.lean", diagnostic_scope="all"), modern=modern, **meta)
    return logs(notes, "lean.diagnostic")


async def test_modern_diagnostic_logs_follow_the_per_request_level(root: str) -> None:
    async with harness(FOUR_SEVERITIES) as h:
        for n, (level, visible) in enumerate(LEVEL_MATRIX):
            events = await _diagnostics(h, root, n, level=level)
            assert [e["level"] for e in events] == visible, level
            for event in events:
                assert "save_blocking" not in event["data"] and event["data"]["path"] == "A.lean"
                assert event["data"]["message"] == f"{event['data']['severity']} here"


async def test_legacy_diagnostic_logs_start_at_debug_and_follow_set_level(root: str) -> None:
    async with harness(FOUR_SEVERITIES) as h:
        await h.initialize()
        for n, (level, visible) in enumerate([("debug", LEVEL_MATRIX[1][1]), *LEVEL_MATRIX[2:]]):
            if n:  # the first sync runs at the legacy default
                await h.request("logging/setLevel", {"level": level})
            events = await _diagnostics(h, root, n, modern=False)
            assert [e["level"] for e in events] == visible, level


async def test_errors_scope_streams_only_errors_and_modern_levels_are_never_retained(root: str) -> None:
    async with harness(FOUR_SEVERITIES) as h:
        assert len(await _diagnostics(h, root, 0, level="debug")) == 4
        assert await _diagnostics(h, root, 1) == []  # the previous request's level is not remembered
        (Path(root) / "A.lean").write_text("-- v2\n-- \n-- \n-- \n", encoding="utf-8")
        _, notes = await h.call("lean_sync", ws(root, path="A.lean"), logLevel="debug")
        assert [e["level"] for e in logs(notes, "lean.diagnostic")] == ["error"]


# ---- concurrency and the drop fence -------------------------------------------------------------------------------
async def test_calls_overlap_and_answer_out_of_order(root: str, fake_project: Any) -> None:
    slow = fake_project("slow", {"A.lean": "def a := 1\n"})
    async with harness() as h, LeanGate.install(slow) as gate:
        await h.send(call_message(1, "lean_sync", ws(slow, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        fast, _ = await h.call("lean_update", ws(root, path="B.lean"), rid=2)
        assert structured(fast)["version"] == 1
        gate.open()
        slow_response, _ = await h.until(1)
        assert structured(slow_response)["diagnostics"]["counts"]["error"] == 0


async def test_the_drop_fence_orders_earlier_and_later_calls(root: str) -> None:
    async with harness() as h, LeanGate.install(Path(root)) as gate:
        await h.send(call_message(1, "lean_sync", ws(root, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        await h.send(call_message(2, "lean_drop_workspace", ws(root), progressToken="d"))
        prep = await h.recv()  # the drop's preparation comes before it waits behind the sync
        assert prep["params"] == {
            "progressToken": "d",
            "progress": 1,
            "message": "lean_drop_workspace: preparing workspace eviction",
        }
        await h.send(call_message(3, "lean_update", ws(root, path="B.lean")))
        await h.send(call_message(4, "beam_stats", {}))
        await h.notify("notifications/cancelled", {"requestId": 2})  # a drop is not cancellable
        assert await h.quiet() == []  # everything waits for the held sync
        gate.open()
        responses = [await h.recv() for _ in range(4)]
        assert [r["id"] for r in responses[:2]] == [1, 2] and {r["id"] for r in responses[2:]} == {3, 4}
        assert structured(responses[0])["version"] == 1
        assert structured(responses[1]) == {"workspace": {"root": root}, "dropped": True, "invalidated_handles": True}
        # The update ran after the drop: it recreated the workspace, which knows nothing of the sync.
        assert set(await h.ops(root)) == {UPDATE_KEY}


async def test_a_call_cancelled_while_waiting_behind_a_drop_is_never_dispatched(root: str) -> None:
    async with harness() as h, LeanGate.install(Path(root)) as gate:
        await h.send(call_message(1, "lean_sync", ws(root, path="A.lean")))
        await h.send(call_message(2, "lean_drop_workspace", ws(root)))
        await h.send(call_message(3, "lean_update", ws(root, path="B.lean")))
        with anyio.fail_after(10):
            await gate.reached()
        await h.notify("notifications/cancelled", {"requestId": 3})
        gate.open()
        responses = [await h.recv() for _ in range(2)]
        assert [r["id"] for r in responses] == [1, 2]
        await h.fence()
        assert await h.quiet() == []
        assert (await h.stats())["workspaces"] == {}  # the update never recreated the dropped workspace


async def test_a_fence_interrupts_the_calls_that_keep_it_waiting_past_its_grace(
    root: str, fake_project: Callable[..., Path]
) -> None:
    held = fake_project("held", {"A.lean": "def a := 1\n"})
    async with harness(fence_grace=0.3) as h, LeanGate.install(held) as gate:
        await h.send(call_message(1, "lean_sync", ws(held, path="A.lean")))
        with anyio.fail_after(10):
            await gate.reached()  # a Lean request that never comes back
        started = anyio.current_time()
        await h.send(call_message(2, "lean_drop_workspace", ws(root)))
        await h.send(call_message(3, "beam_version", {}))
        responses = [await h.recv() for _ in range(3)]
        assert [r["id"] for r in responses] == [1, 2, 3]
        assert anyio.current_time() - started >= 0.3 * 0.9
        interrupted = structured(responses[0])
        assert responses[0]["result"]["isError"] is True and interrupted["code"] == "requestCancelled"
        assert interrupted["message"].startswith("lean_sync was interrupted after 0.3 s")
        assert structured(responses[1])["dropped"] is False and "result" in responses[2]
        assert (await h.ops(held))[SYNC_KEY]["cancelledCount"] == 1  # its Lean work was cancelled


async def test_consecutive_drops_run_in_admission_order(root: str, fake_project: Any) -> None:
    other = fake_project("other")
    async with harness() as h:
        await h.call("lean_update", ws(root, path="A.lean"))
        for rid, target in ((1, root), (2, other), (3, root)):
            await h.send(call_message(rid, "lean_drop_workspace", ws(target)))
        responses = [await h.recv() for _ in range(3)]
        assert [r["id"] for r in responses] == [1, 2, 3]
        assert [structured(r)["dropped"] for r in responses] == [True, False, False]


async def test_drop_is_idempotent_and_accepts_a_vanished_canonical_root(root: str, tmp_path: Path) -> None:
    async with harness() as h:
        first, _ = await h.call("lean_drop_workspace", ws(root))
        assert structured(first) == {
            "workspace": {"root": root},
            "dropped": False,
            "invalidated_handles": False,
            "reason": "notFound",
        }
        gone = str(tmp_path / "gone")
        second, _ = await h.call("lean_drop_workspace", ws(gone))
        assert structured(second)["workspace"] == {"root": gone}


async def test_a_dropped_workspace_is_recreated_by_the_next_call(root: str) -> None:
    async with harness() as h:
        await h.call("lean_sync", ws(root, path="A.lean"))
        dropped, _ = await h.call("lean_drop_workspace", ws(root))
        assert structured(dropped)["dropped"] is True
        assert (await h.stats())["workspaces"] == {}
        again, _ = await h.call("lean_sync", ws(root, path="A.lean"))
        assert structured(again)["version"] == 1
        assert (await h.ops(root))[SYNC_KEY]["count"] == 1


class _Notice:
    """A stand-in notifier: records its status notice."""

    def __init__(self) -> None:
        self.sent = anyio.Event()

    def status(self) -> None:
        self.sent.set()


async def test_the_status_clock_wakes_for_a_deadline_earlier_than_the_one_it_sleeps_until() -> None:
    clock = StatusClock()
    late, soon = _Notice(), _Notice()
    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.run)
        clock.watch(late, 3600.0)  # type: ignore[arg-type]  # the clock only calls `status`
        await anyio.lowlevel.checkpoint()  # the clock now sleeps until the late deadline
        clock.watch(soon, 0.0)  # type: ignore[arg-type]
        with anyio.fail_after(10):
            await soon.sent.wait()
        assert not late.sent.is_set()
        clock.close()
