"""Imports edited behind Beam's back, on real Lean: never a clean verdict from a stale build.

The reproductions of "an import edited on disk reads clean" through the broker, the official MCP SDK client and
the `lean-beam` CLI; the transitive case; a probe over a stale import; the opt-in recovery in one call.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerError, CallContext
from beam_broker import errors as codes
from beam_broker.events import SetupEvent
from mcp import Client, StdioServerParameters
from tests.mcp.support import server_binary
from tests.support.projects import lake_build
from tests.support.toolchain import Toolchain

from .support import Cli

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

PLAN = ['lean-beam save "Demo/Basic.lean"', 'lean-beam refresh "Demo/Proofs.lean"', "lake build"]
MID = "prelude\nimport Demo.Basic\n\ntheorem midTrue : MyTrue := myTrue\n"
TOP = "prelude\nimport Demo.Mid\n\ntheorem topTrue : MyTrue := midTrue\n"


def rename_my_true(root: Path) -> None:
    """The agent's own file tool renames `myTrue`, which `Demo.Proofs` uses."""
    basic = root / "Demo/Basic.lean"
    basic.write_text(basic.read_text().replace("theorem myTrue ", "theorem myTrueRenamed "))


async def sync(broker: Broker, root: Path, path: str, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = await broker.call(
        "sync", {"workspace": {"root": str(root)}, "path": path, "diagnostics_in_result": True, **args}
    )
    return out


async def stale_error(broker: Broker, root: Path, path: str, **args: Any) -> BrokerError:
    with pytest.raises(BrokerError) as info:
        await sync(broker, root, path, **args)
    assert info.value.code == codes.SYNC_BARRIER_INCOMPLETE, info.value
    return info.value


async def test_an_import_edited_on_disk_is_stale_until_saved_and_refreshed(broker: Broker, demo_root: Path) -> None:
    with anyio.fail_after(120):
        assert (await sync(broker, demo_root, "Demo/Proofs.lean"))["diagnostics"]["counts"]["error"] == 0
        rename_my_true(demo_root)
        stale = await stale_error(broker, demo_root, "Demo/Proofs.lean")
        refreshed = await stale_error(broker, demo_root, "Demo/Proofs.lean")  # a refresh loads the same old build
        await broker.call("save", {"workspace": {"root": str(demo_root)}, "path": "Demo/Basic.lean"})
        saved = await stale_error(broker, demo_root, "Demo/Proofs.lean")
        await broker.call("refresh", {"workspace": {"root": str(demo_root)}, "path": "Demo/Proofs.lean"})
        after = await sync(broker, demo_root, "Demo/Proofs.lean")
    assert stale.data is not None and refreshed.data is not None and saved.data is not None
    deps = [{"module": "Demo.Basic", "path": "Demo/Basic.lean", "needsSave": True, "direct": True}]
    assert stale.data["staleDirectDeps"] == deps == refreshed.data["staleDirectDeps"]
    assert stale.data["saveDeps"] == ["Demo/Basic.lean"] and stale.data["recoveryPlan"] == PLAN
    assert saved.data["staleDirectDeps"] == [{**deps[0], "needsSave": False}] and saved.data["saveDeps"] == []
    assert after["diagnostics"]["counts"]["error"] >= 1
    assert "Unknown identifier `myTrue`" in [item["message"] for item in after["diagnostics"]["items"]]


async def test_a_dependency_of_a_dependency_is_stale_too_and_is_saved_first(
    broker: Broker, demo_root: Path, lean_toolchain: Toolchain
) -> None:
    (demo_root / "Demo/Mid.lean").write_text(MID)
    (demo_root / "Demo/Top.lean").write_text(TOP)
    assert lake_build(lean_toolchain, demo_root, "Demo.Top").returncode == 0
    with anyio.fail_after(120):
        assert (await sync(broker, demo_root, "Demo/Top.lean"))["diagnostics"]["counts"]["error"] == 0
        rename_my_true(demo_root)
        err = await stale_error(broker, demo_root, "Demo/Top.lean")
    assert err.data is not None
    assert [(d["module"], d["needsSave"], d["direct"]) for d in err.data["staleDirectDeps"]] == [
        ("Demo.Basic", True, False),
        ("Demo.Mid", True, True),
    ]
    assert err.data["recoveryPlan"][:2] == ['lean-beam save "Demo/Basic.lean"', 'lean-beam save "Demo/Mid.lean"']


async def test_an_import_edited_back_is_current_again(broker: Broker, demo_root: Path) -> None:
    original = (demo_root / "Demo/Basic.lean").read_text()
    with anyio.fail_after(120):
        await sync(broker, demo_root, "Demo/Proofs.lean")
        rename_my_true(demo_root)
        await stale_error(broker, demo_root, "Demo/Proofs.lean")
        (demo_root / "Demo/Basic.lean").write_text(original)  # `git checkout`: the built text again
        again = await sync(broker, demo_root, "Demo/Proofs.lean")
    assert again["diagnostics"]["counts"]["error"] == 0


async def test_a_probe_over_a_stale_import_does_not_run_and_names_it(broker: Broker, demo_root: Path) -> None:
    ws = {"root": str(demo_root)}
    args = {"workspace": ws, "path": "Demo/Proofs.lean", "version": 1, "line": 9, "character": 0}
    with anyio.fail_after(120):
        ran = await broker.call("run_at", {**args, "text": "theorem probeOnly : MyTrue := myTrue"})
        rename_my_true(demo_root)
        with pytest.raises(BrokerError) as info:
            await broker.call("run_at", {**args, "text": "theorem probeTwo : MyTrue := myTrue"})
        await broker.call("save", {"workspace": ws, "path": "Demo/Basic.lean"})
        # The probe's mirror loaded the old build: Beam starts it again, so Lean answers about the new one.
        after = await broker.call("run_at", {**args, "text": "theorem probeTwo : MyTrue := myTrue"})
    assert ran["success"] is True
    err = info.value
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
    assert err.data["saveDeps"] == ["Demo/Basic.lean"] and "Demo.Basic" in err.message
    assert after["success"] is False
    assert "Unknown identifier `myTrue`" in [m["text"] for m in after["messages"]]


async def test_rebuild_imports_saves_them_in_order_then_answers_about_the_new_build(
    broker: Broker, demo_root: Path, lean_toolchain: Toolchain
) -> None:
    (demo_root / "Demo/Mid.lean").write_text(MID)
    (demo_root / "Demo/Top.lean").write_text(TOP)
    assert lake_build(lean_toolchain, demo_root, "Demo.Top").returncode == 0
    events: list[Any] = []
    ws = {"workspace": {"root": str(demo_root)}, "path": "Demo/Top.lean", "rebuild_imports": True}
    with anyio.fail_after(120):
        await sync(broker, demo_root, "Demo/Top.lean")
        (demo_root / "Demo/Basic.lean").write_text(
            (demo_root / "Demo/Basic.lean").read_text() + "\ntheorem extra : MyTrue := MyTrue.intro\n"
        )
        (demo_root / "Demo/Top.lean").write_text(TOP + "\ntheorem usesExtra : MyTrue := extra\n")
        rebuilt = await broker.call("sync", ws, CallContext(emit=events.append))
        rename_my_true(demo_root)  # now Mid breaks: its errors come back as its diagnostics, never a clean Top
        with pytest.raises(BrokerError) as info:
            await broker.call("sync", ws)
    assert rebuilt["diagnostics"]["counts"]["error"] == 0
    assert rebuilt["rebuilt_imports"] == ["Demo/Basic.lean", "Demo/Mid.lean"]
    notes = [e.message for e in events if isinstance(e, SetupEvent) and e.message.startswith("saving stale import")]
    assert notes == [
        "saving stale import Demo/Basic.lean (1/2) for Demo/Top.lean",
        "saving stale import Demo/Mid.lean (2/2) for Demo/Top.lean",
    ]
    err = info.value
    assert err.code == codes.SYNC_BARRIER_INCOMPLETE and err.data is not None
    assert err.data["rebuild"]["path"] == "Demo/Mid.lean"
    items = err.data["rebuild"]["sync"]["diagnostics"]["items"]
    assert "Unknown identifier `myTrue`" in [item["message"] for item in items]
    assert all(item["path"] == "Demo/Mid.lean" for item in items)


async def test_the_sdk_client_sees_the_stale_import_and_recovers_in_one_call(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    params = StdioServerParameters(
        command=server_binary(), args=["--lean-cmd", shlex.join(lean_toolchain.server_cmd())], env=lean_toolchain.env()
    )
    at = {"workspace": {"root": str(demo_root)}, "path": "Demo/Proofs.lean"}
    async with Client(params) as client:
        with anyio.fail_after(120):
            clean = await client.call_tool("lean_sync", at)
            rename_my_true(demo_root)
            stale = await client.call_tool("lean_sync", at)
            refreshed = await client.call_tool("lean_refresh", at)
            recovered = await client.call_tool(
                "lean_sync", {**at, "rebuild_imports": True, "diagnostics_in_result": True}
            )
    assert clean.is_error is False
    for result in (stale, refreshed):
        assert result.is_error is True and result.structured_content is not None
        assert result.structured_content["code"] == codes.SYNC_BARRIER_INCOMPLETE
        assert result.structured_content["data"]["staleDirectDeps"][0]["module"] == "Demo.Basic"
    assert recovered.is_error is False and isinstance(recovered.structured_content, dict)
    assert recovered.structured_content["rebuilt_imports"] == ["Demo/Basic.lean"]
    messages = [item["message"] for item in recovered.structured_content["diagnostics"]["items"]]
    assert "Unknown identifier `myTrue`" in messages


def test_the_cli_sees_the_stale_import_and_recovers_with_a_flag(lean_cli: Cli, demo_root: Path) -> None:
    assert lean_cli("sync", "Demo/Proofs.lean").code == 0
    rename_my_true(demo_root)
    stale = lean_cli("sync", "Demo/Proofs.lean")
    recovered = lean_cli("--compact", "sync", "Demo/Proofs.lean", "--rebuild-imports", "--diagnostics-in-result")
    assert stale.code == 3 and stale.stdout == ""
    assert stale.error["code"] == codes.SYNC_BARRIER_INCOMPLETE
    assert stale.error["data"]["recoveryPlan"] == PLAN
    assert recovered.code == 1, recovered.stderr  # Lean's errors about the new Basic
    assert json.loads(recovered.stdout)["rebuilt_imports"] == ["Demo/Basic.lean"]
    assert any("Unknown identifier `myTrue`" in line for line in recovered.stderr.splitlines())


async def test_after_a_save_navigation_answers_from_the_new_build_not_the_old_index(
    broker: Broker, demo_root: Path
) -> None:
    # Lean's watchdog indexes closed modules from their .ilean files, loaded when it starts: Beam tells it which
    # ones a save replaced, or references and definitions would point at where `myTrue` was before the edit.
    ws = {"root": str(demo_root)}
    at = {"workspace": ws, "path": "Demo/Proofs.lean", "line": 3, "character": 29}
    with anyio.fail_after(120):
        version = (await sync(broker, demo_root, "Demo/Proofs.lean"))["version"]
        before = await broker.call("definition", {**at, "version": version})
        basic = demo_root / "Demo/Basic.lean"
        basic.write_text(basic.read_text().replace("prelude\n", "prelude\n\n\n\n\n", 1))
        await broker.call("close_save", {"workspace": ws, "path": "Demo/Basic.lean"})
        await broker.call("refresh", {"workspace": ws, "path": "Demo/Proofs.lean"})
        after = await broker.call("definition", {**at, "version": 1})
        refs = await broker.call("references", {**at, "version": 1, "include_declaration": True})
    [old] = before["result"]
    [new] = after["result"]
    assert new["targetRange"]["start"]["line"] == old["targetRange"]["start"]["line"] + 4
    in_basic = [r["range"]["start"]["line"] for r in refs["result"] if r["uri"].endswith("/Demo/Basic.lean")]
    assert in_basic == [new["targetRange"]["start"]["line"]]


async def test_a_file_edited_on_disk_is_never_answered_from_the_text_beam_read_before(
    broker: Broker, demo_root: Path
) -> None:
    ws = {"root": str(demo_root)}
    at = {"workspace": ws, "path": "Demo/Proofs.lean", "line": 3, "character": 29}
    with anyio.fail_after(120):
        synced = await sync(broker, demo_root, "Demo/Proofs.lean")
        handle = await broker.call(
            "run_at_handle", {**at, "version": synced["version"], "line": 9, "character": 0, "text": "def h1 := two"}
        )
        proofs = demo_root / "Demo/Proofs.lean"
        proofs.write_text(proofs.read_text() + "\ntheorem addedOnDisk : MyTrue := myTrue\n")  # an editor beside Beam
        with pytest.raises(BrokerError) as old_version:
            await broker.call("hover", {**at, "version": synced["version"]})
        with pytest.raises(BrokerError) as old_handle:
            await broker.call(
                "run_with", {"workspace": ws, "path": "Demo/Proofs.lean", "handle": handle["next_handle"], "text": "x"}
            )
        symbols = await broker.call(
            "document_symbols", {"workspace": ws, "path": "Demo/Proofs.lean", "version": synced["version"] + 1}
        )
    assert old_version.value.code == codes.CONTENT_MODIFIED and old_version.value.data is not None
    data = old_version.value.data
    assert (data["reason"], data["expectedVersion"], data["currentVersion"]) == (
        "documentVersionMismatch",
        synced["version"],
        synced["version"] + 1,
    )
    assert old_handle.value.code == codes.CONTENT_MODIFIED and old_handle.value.data == {"reason": "staleHandle"}
    assert "addedOnDisk" in json.dumps(symbols)


@pytest.mark.parametrize(
    "header",
    [
        "prelude\n/- uses Basic -/ import Demo.Basic\n",
        "prelude\n/- uses\n   Basic -/ import Demo.Basic\n",
        "prelude\nimport\n  Demo.Basic\n",
    ],
    ids=["comment-then-import", "multi-line-comment-then-import", "module-name-on-the-next-line"],
)
async def test_an_import_after_a_comment_on_its_line_is_checked_too(
    broker: Broker, demo_root: Path, header: str
) -> None:
    """Lean reads the import after the comment; a header reader that skipped the line missed a stale import."""
    (demo_root / "Demo/Side.lean").write_text(header + "\ntheorem side : MyTrue := myTrue\n")
    with anyio.fail_after(120):
        assert (await sync(broker, demo_root, "Demo/Side.lean"))["diagnostics"]["counts"]["error"] == 0
        rename_my_true(demo_root)
        err = await stale_error(broker, demo_root, "Demo/Side.lean")
    assert err.data is not None and [d["module"] for d in err.data["staleDirectDeps"]] == ["Demo.Basic"]


async def test_a_project_with_its_sources_under_src_dir_is_clean_then_stale_after_an_edit_then_saved(
    broker: Broker, lean_toolchain: Toolchain, tmp_path: Path
) -> None:
    """Lake's `srcDir`: `src/Demo/Basic.lean` is the module `Demo.Basic`. Taking the sources at the root, its
    built import read as a module whose source is gone (`needsSave` for ever) and save built `src.Demo.Basic`."""
    demo = Path(__file__).parents[1] / "fixtures" / "demo"
    root = tmp_path / "srcdir"
    (root / "src" / "Demo").mkdir(parents=True)
    (root / "lean-toolchain").write_text((demo / "lean-toolchain").read_text())
    (root / "lakefile.toml").write_text('name = "demo"\nsrcDir = "src"\n\n[[lean_lib]]\nname = "Demo"\n')
    for name in ("Basic", "Proofs"):
        (root / "src" / "Demo" / f"{name}.lean").write_text((demo / "Demo" / f"{name}.lean").read_text())
    built = lake_build(lean_toolchain, root, "Demo.Basic")
    assert built.returncode == 0, built.stdout + built.stderr
    with anyio.fail_after(120):
        clean = await sync(broker, root, "src/Demo/Proofs.lean")
        assert clean["diagnostics"]["counts"]["error"] == 0
        basic = root / "src/Demo/Basic.lean"
        basic.write_text(basic.read_text().replace("theorem myTrue ", "theorem myTrueRenamed "))
        stale = await stale_error(broker, root, "src/Demo/Proofs.lean")
        saved = await broker.call("save", {"workspace": {"root": str(root)}, "path": "src/Demo/Basic.lean"})
        await broker.call("refresh", {"workspace": {"root": str(root)}, "path": "src/Demo/Proofs.lean"})
        after = await sync(broker, root, "src/Demo/Proofs.lean")
    assert stale.data is not None
    assert stale.data["staleDirectDeps"] == [
        {"module": "Demo.Basic", "path": "src/Demo/Basic.lean", "needsSave": True, "direct": True}
    ]
    assert saved["module"] == "Demo.Basic"
    assert "Unknown identifier `myTrue`" in [item["message"] for item in after["diagnostics"]["items"]]
