"""run_at, handles and probe mirrors on the real Lean lane.

Without Init no tactic parses, so proof-mode probes are exercised through their errors and the goals at the
basis; success paths use command-mode probes. Probes that close or leave goals are in test_speculation_init.py
(they need a toolchain with Init: the elan lane).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig, BrokerError
from beam_broker import errors as codes
from tests.support import projects
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


async def call(broker: Broker, name: str, root: Path, **args: Any) -> dict[str, Any]:
    with anyio.fail_after(120):
        return await broker.call(name, {"workspace": {"root": str(root)}, **args})


async def error_of(broker: Broker, name: str, root: Path, **args: Any) -> BrokerError:
    with pytest.raises(BrokerError) as info:
        await call(broker, name, root, **args)
    return info.value


def at(path: str, line: int, character: int, text: str, version: int = 1) -> dict[str, Any]:
    return {"path": path, "version": version, "line": line, "character": character, "text": text}


async def test_a_command_probe_sees_the_enclosing_declaration_and_reports_its_messages(
    broker: Broker, demo_root: Path
) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 8, 5, "#check two"))
    assert result == {
        "workspace": {"root": str(demo_root)},
        "success": True,
        "messages": [{"severity": "information", "text": "two : MyNat"}],
        "traces": [],
        "proof_state": None,
        "next_handle": None,
    }


async def test_a_failing_command_probe_is_a_successful_call_with_success_false(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "theorem q : MyTrue := nope"))
    assert result["success"] is False
    assert result["messages"][0] == {"severity": "error", "text": "Unknown identifier `nope`"}


async def test_probes_do_not_leak_into_each_other_or_the_source(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    first = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "def temp : MyNat := MyNat.zero"))
    assert first["success"] is True and first["messages"] == []
    second = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check temp"))
    assert second["success"] is False and "temp" in second["messages"][0]["text"]
    source = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert source["version"] == 1 and source["diagnostics"]["counts"]["total"] == 0
    assert (demo_root / "Demo/Proofs.lean").read_text().count("temp") == 0


async def test_a_proof_probe_with_an_error_reports_it_and_the_goals_at_the_basis(
    broker: Broker, demo_root: Path
) -> None:
    # `{}` is the one tactic that parses without Init (it fails with "unsolved goals" on itself), so the
    # probe after it is parsed and reported on its own.
    (demo_root / "Demo/Probe.lean").write_text(
        "prelude\nimport Demo.Basic\n\ntheorem open2 (p : Prop) (hp : p) : p := by\n  {}\n"
    )
    await call(broker, "sync", demo_root, path="Demo/Probe.lean")
    goal = {
        "goalPrefix": "⊢ ",
        "target": "p",
        "hyps": [{"names": ["p"], "type": "Prop"}, {"names": ["hp"], "type": "p"}],
    }
    # the by line, the tactic's first character (before it), its middle and its end (after it)
    for line, character in ((3, 43), (4, 2), (4, 3), (4, 4)):
        result = await call(broker, "run_at", demo_root, **at("Demo/Probe.lean", line, character, "bogus_tactic"))
        assert result["success"] is False, (line, character)
        assert [m["severity"] for m in result["messages"]] == ["error"], (line, character)
        assert result["proof_state"] is not None
        if (line, character) in ((3, 43), (4, 2)):
            assert result["proof_state"] == {"goals": [goal]}


async def test_the_tail_of_the_file_never_affects_a_probe(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Tail.lean").write_text(
        "prelude\nimport Demo.Basic\n\ntheorem good : MyTrue := myTrue\n\ndef broken : MyTrue := MyNat.zero\n"
        "theorem alsoBroken : MyTrue := nope\n"
    )
    synced = await call(broker, "sync", demo_root, path="Demo/Tail.lean")
    assert synced["diagnostics"]["counts"]["error"] >= 2
    result = await call(broker, "run_at", demo_root, **at("Demo/Tail.lean", 3, 0, "#check good"))
    assert result["success"] is True and result["messages"] == [{"severity": "information", "text": "good : MyTrue"}]


async def test_a_handle_chain_continues_and_branches_without_consuming(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    first = await call(
        broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def a1 : MyNat := MyNat.one")
    )
    h1 = first["next_handle"]
    assert first["success"] and h1["workspaceId"] == f"local:{demo_root}" and h1["backend"] == "lean"
    second = await call(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h1, text="def a2 : MyNat := a1")
    h2 = second["next_handle"]
    assert second["success"] and h2 != h1
    third = await call(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h2, text="#check a2")
    assert third["messages"] == [{"severity": "information", "text": "a2 : MyNat"}]
    branch = await call(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h1, text="#check a2")
    assert branch["success"] is False  # a2 exists only on the other branch
    assert branch["next_handle"] is None


async def test_linear_use_consumes_the_handle_even_on_failure_and_release_drops_it(
    broker: Broker, demo_root: Path
) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    h = (await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def b1 : MyNat := MyNat.one")))[
        "next_handle"
    ]
    failed = await call(broker, "run_with_linear", demo_root, path="Demo/Proofs.lean", handle=h, text="#check nope")
    assert failed["success"] is False and failed["next_handle"] is None
    gone = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h, text="#check b1")
    assert gone.code == codes.INVALID_PARAMS and "unknown handle" in gone.message
    h2 = (
        await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def b2 : MyNat := MyNat.one"))
    )["next_handle"]
    assert (await call(broker, "release", demo_root, path="Demo/Proofs.lean", handle=h2)) == {
        "workspace": {"root": str(demo_root)},
        "result": None,
    }
    again = await error_of(broker, "release", demo_root, path="Demo/Proofs.lean", handle=h2)
    assert again.code == codes.INVALID_PARAMS


async def test_handles_die_with_edits_closes_restarts_and_drops(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")

    async def mint() -> dict[str, Any]:
        r = await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def c : MyNat := MyNat.one"))
        return dict(r["next_handle"])

    h = await mint()
    path = demo_root / "Demo/Proofs.lean"
    path.write_text(path.read_text() + "\n-- edited\n")
    edited = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h, text="#check c")
    assert edited.code == codes.CONTENT_MODIFIED
    version = (await call(broker, "update", demo_root, path="Demo/Proofs.lean"))["version"]
    h = dict(
        (
            await call(
                broker,
                "run_at_handle",
                demo_root,
                **at("Demo/Proofs.lean", 3, 0, "def c : MyNat := MyNat.one", version=version),
            )
        )["next_handle"]
    )
    await call(broker, "close", demo_root, path="Demo/Proofs.lean")
    closed = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h, text="#check c")
    assert closed.code in (codes.CONTENT_MODIFIED, codes.INVALID_PARAMS)
    h = await mint()
    runtime = broker.cached(str(demo_root))
    assert runtime is not None
    client = await runtime.client()
    os.kill(client.pid, signal.SIGKILL)
    with anyio.fail_after(30):
        await client.wait_exited()
    restarted = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h, text="#check c")
    assert restarted.code == codes.CONTENT_MODIFIED and "stale backend session" in restarted.message
    h = await mint()
    await call(broker, "drop_workspace", demo_root)
    dropped = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=h, text="#check c")
    assert dropped.code == codes.CONTENT_MODIFIED and "stale backend session" in dropped.message


async def test_a_handle_from_another_workspace_is_rejected(broker: Broker, demo_root: Path, tmp_path: Path) -> None:
    other = projects.copy_project("demo", tmp_path / "other")
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    h = (await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def d : MyNat := MyNat.one")))[
        "next_handle"
    ]
    err = await error_of(broker, "run_with", other, path="Demo/Proofs.lean", handle=h, text="#check d")
    assert err.code == codes.INVALID_PARAMS and "does not match handle workspace" in err.message


async def test_concurrent_probes_on_one_document_each_get_their_own_answer(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    results: dict[int, dict[str, Any]] = {}

    async def probe(i: int) -> None:
        results[i] = await call(
            broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, f"def n{i} : MyNat := MyNat.one\n#check n{i}")
        )

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(probe, i)
    for i in range(5):
        assert results[i]["messages"] == [{"severity": "information", "text": f"n{i} : MyNat"}], i
    runtime = broker.cached(str(demo_root))
    assert runtime is not None and len(runtime.pools[(demo_root / "Demo/Proofs.lean").as_uri()].mirrors) <= 2


async def test_a_cancelled_probe_leaves_the_mirror_usable(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    slow = projects.long_file(1500).split("\n", 3)[3]  # 1500 declarations as one probe text
    with anyio.move_on_after(0.2):
        await broker.call("run_at", {"workspace": {"root": str(demo_root)}, **at("Demo/Proofs.lean", 3, 0, slow)})
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
    assert result["messages"] == [{"severity": "information", "text": "byTerm : MyTrue"}]


async def test_mirrors_close_when_idle_and_with_their_document(lean_toolchain: Toolchain, demo_root: Path) -> None:
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), mirror_idle_seconds=0.2)
    async with Broker.open(config) as broker:
        await call(broker, "update", demo_root, path="Demo/Proofs.lean")
        await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
        runtime = broker.cached(str(demo_root))
        assert runtime is not None
        client = await runtime.client()
        mirror = runtime.pools[(demo_root / "Demo/Proofs.lean").as_uri()].mirrors[0].uri
        assert client.is_open(mirror) and "_beamProbe" in mirror
        assert not Path(mirror.removeprefix("file://")).exists()  # never written to disk
        with anyio.fail_after(10):
            while client.is_open(mirror):  # noqa: ASYNC110 - the idle reaper has no event to wait on
                await anyio.sleep(0.05)
        await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
        assert client.is_open(mirror)
        await call(broker, "close", demo_root, path="Demo/Proofs.lean")
        assert not client.is_open(mirror)


async def test_bad_positions_are_invalid_params(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    for line, character in ((99, 0), (3, 500)):
        err = await error_of(broker, "run_at", demo_root, **at("Demo/Proofs.lean", line, character, "#check two"))
        assert err.code == codes.INVALID_PARAMS
    stale = await error_of(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm", version=9))
    assert stale.code == codes.CONTENT_MODIFIED


async def test_a_handle_from_another_process_is_a_stale_session(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    h = (await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def e : MyNat := MyNat.one")))[
        "next_handle"
    ]
    forged = {**h, "session": "4242-1"}  # same workspace and epoch, another process's Lean session
    err = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=forged, text="#check e")
    assert err.code == codes.CONTENT_MODIFIED and "stale backend session" in err.message
