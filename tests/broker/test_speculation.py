"""Speculation: run_at on probe mirrors, handles and their lifecycle (fake lane), and the same on real Lean.

The fake reports `unsolved goals` (leanTags [1]) for lines with GOALS_HERE and an error for ERROR_HERE, so the
attribution rules can be checked exactly: an error inside the probe span fails the probe; the enclosing
declaration's unsolved-goals error means goals remain; without it the goals are solved.

Without Init no tactic parses on the lean435 lane, so proof-mode probes on real Lean are exercised through
their errors and the goals at the basis; success paths use command-mode probes. Probes that close or leave goals
with real tactics need a toolchain with Init (the elan lane, `init_root`).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig
from beam_broker import errors as codes
from beam_broker._mirrors import is_mirror_path
from tests.support import projects
from tests.support.toolchain import Toolchain

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
REAL_TIMEOUT = 120


def at(path: str, line: int, character: int, text: str, version: int = 1) -> dict[str, Any]:
    return {"path": path, "version": version, "line": line, "character": character, "text": text}


# ---- fake lane: verdicts ------------------------------------------------------------------------------
async def probe(tmp_path: Path, source: str, text: str, line: int, character: int) -> dict[str, Any]:
    root = fake_project(tmp_path / "proj", {"A.lean": source})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        return await call(broker, "run_at", root, **at("A.lean", line, character, text))


async def test_an_error_inside_the_probe_fails_it(tmp_path: Path) -> None:
    result = await probe(tmp_path, "theorem t : True := by\n  skip\n", "ERROR_HERE", 0, 22)
    assert result["success"] is False
    assert result["messages"] == [{"severity": "error", "text": "unknown identifier 'ERROR_HERE'"}]
    assert result["proof_state"] == {"goals": [{"goalPrefix": "⊢ ", "target": "True", "hyps": []}]}


async def test_the_enclosing_unsolved_goals_error_means_goals_remain_not_failure(tmp_path: Path) -> None:
    source = "theorem t : True /- GOALS_HERE -/ := by\n  skip\n"
    result = await probe(tmp_path, source, "fine", 0, len(source.split("\n")[0]))
    assert result["success"] is True and result["messages"] == []
    assert result["proof_state"]["goals"], "goals remain"


async def test_without_an_unsolved_goals_error_the_goals_are_solved(tmp_path: Path) -> None:
    result = await probe(tmp_path, "theorem t : True := by\n  skip\n", "fine", 0, 22)
    assert result == {**result, "success": True, "messages": [], "proof_state": {"goals": []}}


async def test_messages_before_the_probe_belong_to_the_source_not_the_probe(tmp_path: Path) -> None:
    result = await probe(tmp_path, "def e := ERROR_HERE\ntheorem t : True := by\n  skip\n", "fine", 1, 22)
    assert result["success"] is True and result["messages"] == []


async def test_a_command_probe_reports_its_messages_and_traces_and_no_proof_state(tmp_path: Path) -> None:
    source = "def x := 1\n\ndef y := 2\n"
    lean = {"diagnostics": {"_beamProbe1.lean": [
        {"line": 2, "message": "x : Nat", "severity": 3},
        {"line": 2, "message": "[Meta.debug] trace", "severity": 3},
        {"line": 0, "message": "not mine", "severity": 2},
    ]}}  # fmt: skip
    root = fake_project(tmp_path / "proj", {"A.lean": source})
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "run_at", root, **at("A.lean", 0, 0, "#check x"))
    assert result == {
        "workspace": {"root": str(root)},
        "success": True,
        "messages": [{"severity": "information", "text": "x : Nat"}],
        "traces": ["[Meta.debug] trace"],
        "proof_state": None,
        "next_handle": None,
    }


async def test_a_probe_whose_elaboration_fails_is_unsuccessful(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    async with open_broker({"worker_crash_on": {"method": "textDocument/waitForDiagnostics", "times": 2}}) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "run_at", root, **at("A.lean", 0, 0, "#check x"))
    assert result["success"] is False
    assert result["messages"][-1] == {"severity": "error", "text": "Lean did not finish elaborating the probe"}


async def test_a_bad_position_or_a_stale_version_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        bad = await error_of(broker, "run_at", root, **at("A.lean", 9, 0, "#check x"))
        stale = await error_of(broker, "run_at", root, **at("A.lean", 0, 0, "#check x", version=4))
    assert bad.code == codes.INVALID_PARAMS and stale.code == codes.CONTENT_MODIFIED


# ---- fake lane: handles and mirrors -------------------------------------------------------------------
async def test_a_handle_chain_continues_branches_and_is_released(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        first = await call(broker, "run_at_handle", root, **at("A.lean", 0, 0, "def a1 := x"))
        h1 = first["next_handle"]
        assert h1["workspaceId"] == f"local:{root}" and h1["backend"] == "lean" and h1["epoch"] == 1
        second = await call(broker, "run_with", root, path="A.lean", handle=h1, text="def a2 := a1")
        h2 = second["next_handle"]
        assert second["success"] and h2 != h1
        failed = await call(broker, "run_with", root, path="A.lean", handle=h1, text="ERROR_HERE")
        assert failed["success"] is False and failed["next_handle"] is None
        linear = await call(broker, "run_with_linear", root, path="A.lean", handle=h2, text="#check a2")
        assert linear["success"] is True and linear["next_handle"] is not None
        gone = await error_of(broker, "run_with", root, path="A.lean", handle=h2, text="#check a2")
        assert gone.code == codes.INVALID_PARAMS and "unknown handle" in gone.message
        released = await call(broker, "release", root, path="A.lean", handle=h1)
        assert released == {"workspace": {"root": str(root)}, "result": None}
        again = await error_of(broker, "release", root, path="A.lean", handle=h1)
        ops = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]["ops"]
    assert again.code == codes.INVALID_PARAMS
    assert ops["run_at"]["count"] == 1 and ops["run_with"]["count"] == 4 and ops["release"]["count"] == 2


async def test_handles_die_with_edits_closes_restarts_and_drops(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    async with open_broker() as broker:

        async def mint(version: int = 1) -> dict[str, Any]:
            return dict(
                (await call(broker, "run_at_handle", root, **at("A.lean", 0, 0, "def c := 1", version)))["next_handle"]
            )

        await call(broker, "update", root, path="A.lean")
        h = await mint()
        (root / "A.lean").write_text("def x := 2\n")
        edited = await error_of(broker, "run_with", root, path="A.lean", handle=h, text="#check c")
        assert edited.code == codes.CONTENT_MODIFIED and edited.data == {"reason": "staleHandle"}
        h = await mint(version=2)
        await call(broker, "close", root, path="A.lean")
        closed = await error_of(broker, "run_with", root, path="A.lean", handle=h, text="#check c")
        assert closed.code in (codes.CONTENT_MODIFIED, codes.INVALID_PARAMS)
        h = await mint()
        runtime = broker.cached(str(root))
        assert runtime is not None
        client = await runtime.client()
        os.kill(client.pid, signal.SIGKILL)
        with anyio.fail_after(20):
            await client.wait_exited()
        restarted = await error_of(broker, "run_with", root, path="A.lean", handle=h, text="#check c")
        assert restarted.code == codes.CONTENT_MODIFIED and "stale backend session" in restarted.message
        h = await mint()
        forged = {**h, "session": "4242-1"}  # same workspace and epoch, another process's Lean session
        other = await error_of(broker, "run_with", root, path="A.lean", handle=forged, text="#check c")
        assert other.code == codes.CONTENT_MODIFIED and other.data == {"reason": "staleSession"}
        await call(broker, "drop_workspace", root)
        dropped = await error_of(broker, "run_with", root, path="A.lean", handle=h, text="#check c")
    assert dropped.code == codes.CONTENT_MODIFIED and "stale backend session" in dropped.message


async def test_a_handle_from_another_workspace_or_a_malformed_one_is_rejected(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    other = fake_project(tmp_path / "other", {"A.lean": "def x := 1\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        h = (await call(broker, "run_at_handle", root, **at("A.lean", 0, 0, "def d := 1")))["next_handle"]
        err = await error_of(broker, "run_with", other, path="A.lean", handle=h, text="#check d")
        malformed = await error_of(broker, "release", root, path="A.lean", handle={"raw": 1})
    assert err.code == codes.INVALID_PARAMS and "does not match handle workspace" in err.message
    assert malformed.code == codes.INVALID_PARAMS and "malformed handle" in malformed.message


async def test_concurrent_probes_share_at_most_the_mirror_limit(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    results: dict[int, dict[str, Any]] = {}
    async with open_broker({"elab_ms": 20}, mirrors_per_document=2) as broker:
        await call(broker, "update", root, path="A.lean")

        async def one(i: int) -> None:
            results[i] = await call(broker, "run_at", root, **at("A.lean", 0, 0, f"def n{i} := {i}"))

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(one, i)
        runtime = broker.cached(str(root))
        assert runtime is not None
        pool = runtime.pools[(root / "A.lean").as_uri()]
        assert len(pool.mirrors) == 2 and broker.open_documents() == [str(root / "A.lean")]
    assert all(r["success"] for r in results.values()) and len(results) == 5


def mirror_closed(runtime: Any, client: Any) -> anyio.Event:
    """Set once a probe mirror is closed (its cached diagnostics are forgotten, which the cache reports)."""
    closed = anyio.Event()

    def on_change(path: str) -> None:
        if is_mirror_path(path) and not client.is_open(Path(path).as_uri()):
            closed.set()

    runtime.cache.add_listener(on_change)
    return closed


async def test_mirrors_close_when_idle_and_with_their_document(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    async with open_broker(mirror_idle_seconds=0.05) as broker:
        await call(broker, "update", root, path="A.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None
        client = await runtime.client()
        closed = mirror_closed(runtime, client)
        await call(broker, "run_at", root, **at("A.lean", 0, 0, "#check x"))
        with anyio.fail_after(10):
            await closed.wait()
        await call(broker, "run_at", root, **at("A.lean", 0, 0, "#check x"))
        [fresh] = runtime.pools[(root / "A.lean").as_uri()].mirrors
        assert client.is_open(fresh.uri) and "_beamProbe" in fresh.uri
        assert not Path(fresh.uri.removeprefix("file://")).exists()  # never written to disk
        await call(broker, "close", root, path="A.lean")
        assert not client.is_open(fresh.uri)


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
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


@pytest.mark.lean
async def test_a_failing_command_probe_is_a_successful_call_with_success_false(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "theorem q : MyTrue := nope"))
    assert result["success"] is False
    named = {"severity": "error", "text": "Unknown identifier `nope`", "code": "lean.unknownIdentifier"}
    assert result["messages"][0] == named  # Lean's name for the message, as lean_sync's items carry it


@pytest.mark.lean
@pytest.mark.parametrize("text", ["theorem q : MyTrue := (", "theorem q : MyTrue :="])
async def test_a_probe_cut_off_by_the_end_of_its_text_fails_with_lean_s_parse_error(
    broker: Broker, demo_root: Path, text: str
) -> None:
    # Lean reports it past the probe's last character (on the line after it): it is still the probe's error.
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, text))
    assert result["success"] is False
    assert result["messages"][0]["severity"] == "error"
    assert result["messages"][0]["text"].startswith("unexpected end of input")


@pytest.mark.lean
async def test_probes_do_not_leak_into_each_other_or_the_source(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    first = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "def temp : MyNat := MyNat.zero"))
    assert first["success"] is True and first["messages"] == []
    second = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check temp"))
    assert second["success"] is False and "temp" in second["messages"][0]["text"]
    source = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert source["version"] == 1 and source["diagnostics"]["counts"]["total"] == 0
    assert (demo_root / "Demo/Proofs.lean").read_text().count("temp") == 0


@pytest.mark.lean
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


@pytest.mark.lean
async def test_the_tail_of_the_file_never_affects_a_probe(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Tail.lean").write_text(
        "prelude\nimport Demo.Basic\n\ntheorem good : MyTrue := myTrue\n\ndef broken : MyTrue := MyNat.zero\n"
        "theorem alsoBroken : MyTrue := nope\n"
    )
    synced = await call(broker, "sync", demo_root, path="Demo/Tail.lean")
    assert synced["diagnostics"]["counts"]["error"] >= 2
    result = await call(broker, "run_at", demo_root, **at("Demo/Tail.lean", 3, 0, "#check good"))
    assert result["success"] is True and result["messages"] == [{"severity": "information", "text": "good : MyTrue"}]


@pytest.mark.lean
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


@pytest.mark.lean
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


@pytest.mark.lean
async def test_handles_die_with_edits_closes_restarts_and_drops_on_real_lean(broker: Broker, demo_root: Path) -> None:
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


@pytest.mark.lean
async def test_a_handle_from_another_workspace_is_rejected(broker: Broker, demo_root: Path, tmp_path: Path) -> None:
    other = projects.copy_project("demo", tmp_path / "other")
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    h = (await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def d : MyNat := MyNat.one")))[
        "next_handle"
    ]
    err = await error_of(broker, "run_with", other, path="Demo/Proofs.lean", handle=h, text="#check d")
    assert err.code == codes.INVALID_PARAMS and "does not match handle workspace" in err.message


@pytest.mark.lean
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


@pytest.mark.lean
async def test_a_cancelled_probe_leaves_the_mirror_usable(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    slow = projects.long_file(1500).split("\n", 3)[3]  # 1500 declarations as one probe text
    with anyio.move_on_after(0.2):
        await broker.call("run_at", {"workspace": {"root": str(demo_root)}, **at("Demo/Proofs.lean", 3, 0, slow)})
    result = await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
    assert result["messages"] == [{"severity": "information", "text": "byTerm : MyTrue"}]


@pytest.mark.lean
async def test_mirrors_close_when_idle_and_with_their_document_on_real_lean(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), mirror_idle_seconds=0.2)
    async with Broker.open(config) as broker:
        await call(broker, "update", demo_root, path="Demo/Proofs.lean")
        runtime = broker.cached(str(demo_root))
        assert runtime is not None
        client = await runtime.client()
        closed = mirror_closed(runtime, client)
        await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
        with anyio.fail_after(10):
            await closed.wait()
        await call(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm"))
        [mirror] = runtime.pools[(demo_root / "Demo/Proofs.lean").as_uri()].mirrors
        assert client.is_open(mirror.uri) and "_beamProbe" in mirror.uri
        assert not Path(mirror.uri.removeprefix("file://")).exists()  # never written to disk
        await call(broker, "close", demo_root, path="Demo/Proofs.lean")
        assert not client.is_open(mirror.uri)


@pytest.mark.lean
async def test_bad_positions_are_invalid_params(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    for line, character in ((99, 0), (3, 500)):
        err = await error_of(broker, "run_at", demo_root, **at("Demo/Proofs.lean", line, character, "#check two"))
        assert err.code == codes.INVALID_PARAMS
    stale = await error_of(broker, "run_at", demo_root, **at("Demo/Proofs.lean", 3, 0, "#check byTerm", version=9))
    assert stale.code == codes.CONTENT_MODIFIED


@pytest.mark.lean
async def test_a_handle_from_another_process_is_a_stale_session(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    h = (await call(broker, "run_at_handle", demo_root, **at("Demo/Proofs.lean", 3, 0, "def e : MyNat := MyNat.one")))[
        "next_handle"
    ]
    forged = {**h, "session": "4242-1"}  # same workspace and epoch, another process's Lean session
    err = await error_of(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=forged, text="#check e")
    assert err.code == codes.CONTENT_MODIFIED and "stale backend session" in err.message


# ---- elan lane: probes that close or leave goals (real tactics need Init) ---------------------------
@pytest.fixture
def init_root(lean_toolchain: Toolchain, tmp_path: Path) -> Path:
    if lean_toolchain.kind == "lean435":
        pytest.skip("needs a toolchain with Init oleans (elan lane); the lean435 wheel ships none")
    return projects.copy_project("initdemo", tmp_path / "initdemo")


async def run_init(
    broker: Broker, root: Path, line: int, character: int, text: str, tool: str = "run_at"
) -> dict[str, Any]:
    with anyio.fail_after(REAL_TIMEOUT):
        await broker.call("update", {"workspace": {"root": str(root)}, "path": "InitDemo/Basic.lean"})
        return await broker.call(
            tool,
            {
                "workspace": {"root": str(root)},
                "path": "InitDemo/Basic.lean",
                "version": 1,
                "line": line,
                "character": character,
                "text": text,
            },
        )


@pytest.mark.lean
async def test_a_probe_that_closes_the_goal_reports_no_goals(broker: Broker, init_root: Path) -> None:
    result = await run_init(broker, init_root, 6, 2, "exact id")
    assert result["success"] is True and result["proof_state"] == {"goals": []}


@pytest.mark.lean
async def test_a_probe_that_leaves_goals_reports_them(broker: Broker, init_root: Path) -> None:
    result = await run_init(broker, init_root, 1, 2, "constructor")
    assert result["success"] is True
    assert [g["target"] for g in result["proof_state"]["goals"]] == ["p", "q"]


@pytest.mark.lean
async def test_before_and_after_a_tactic_differ(broker: Broker, init_root: Path) -> None:
    before = await run_init(broker, init_root, 2, 2, "exact hp")  # at `exact hp`: runs instead of it
    assert before["success"] is True and [g["target"] for g in before["proof_state"]["goals"]] == ["q"]
    after = await run_init(broker, init_root, 2, 5, "exact hq")  # inside `exact hp`: runs after it
    assert after["success"] is True and after["proof_state"] == {"goals": []}


@pytest.mark.lean
async def test_a_failing_tactic_keeps_the_goals_at_the_basis(broker: Broker, init_root: Path) -> None:
    result = await run_init(broker, init_root, 6, 2, "exact 42")
    assert result["success"] is False and result["messages"][0]["severity"] == "error"
    assert [g["target"] for g in result["proof_state"]["goals"]] == ["p → p"]


@pytest.mark.lean
async def test_a_handle_chain_of_tactics_closes_the_proof(broker: Broker, init_root: Path) -> None:
    first = await run_init(broker, init_root, 1, 2, "constructor", tool="run_at_handle")
    handle = first["next_handle"]
    ws = {"workspace": {"root": str(init_root)}, "path": "InitDemo/Basic.lean"}
    second = await broker.call("run_with", {**ws, "handle": handle, "text": "exact hp"})
    third = await broker.call("run_with", {**ws, "handle": second["next_handle"], "text": "exact hq"})
    assert third["success"] is True and third["proof_state"] == {"goals": []}
