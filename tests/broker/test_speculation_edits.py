"""Speculation right after an edit: a probe never waits on (or asks) the document while Lean elaborates it again.

The probe's mode (proof or command) is settled from the text when the command holds no `by`, else asked once per
document version: of the document when Lean finished it, of the probe's own mirror (holding the source up to the
end of the declaration) while Lean elaborates the document again. The probe itself takes the mirror's reported
barrier, whose answer does not wait for Lean to walk every declaration before the probe. Fake lane first (what is
asked of which document), then the same on real Lean with a long file (the answers are the ones of the settled
file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker
from beam_broker import _mirrors as mirrors
from beam_lsp import LeanClient
from tests.support import projects

from .support import TIMEOUT, call, fake_project, open_broker, spy

pytestmark = pytest.mark.anyio
PROOF = "theorem t : True := by\n  skip\n"


def at(line: int, character: int, text: str, version: int = 1, path: str = "A.lean") -> dict[str, Any]:
    return {"path": path, "version": version, "line": line, "character": character, "text": text}


async def test_the_mode_is_asked_of_the_settled_document_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": PROOF + "\ndef x := 1\n"})
    asked = spy(monkeypatch, "plain_goal")
    async with open_broker() as broker:
        await call(broker, "sync", root, path="A.lean")
        first = await call(broker, "run_at", root, **at(0, 22, "fine"))
        second = await call(broker, "run_at", root, **at(0, 22, "fine"))
        command = await call(broker, "run_at", root, **at(3, 0, "#check x"))  # no `by`: Lean is not asked
    assert first == second and first["success"] is True and first["proof_state"] is not None
    assert command["success"] is True and command["proof_state"] is None
    assert asked == [("plain_goal", "A.lean")]


async def test_while_the_document_elaborates_again_the_mode_is_asked_of_the_probe_s_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    asked: list[str] = []
    mode_asked = anyio.Event()
    original = LeanClient.plain_goal

    async def recorded(self: LeanClient, uri: str, *args: Any) -> Any:
        asked.append(uri.rsplit("/", 1)[-1])
        mode_asked.set()
        return await original(self, uri, *args)

    monkeypatch.setattr(LeanClient, "plain_goal", recorded)
    async with open_broker({"elab_ms": 60_000}) as broker:  # Lean never finishes a version in this test
        await call(broker, "update", root, path="A.lean")
        (root / "A.lean").write_text(PROOF + "\ntheorem u : True := trivial\n")
        assert (await call(broker, "update", root, path="A.lean"))["version"] == 2
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: call(broker, "run_at", root, **at(1, 2, "fine", version=2)))
                await mode_asked.wait()  # the probe itself then waits for the mirror's (endless) elaboration
                tg.cancel_scope.cancel()
        runtime = broker.cached(str(root))
        assert runtime is not None
        [mirror] = next(iter(runtime.pools.values())).mirrors
    assert asked == ["A_beamProbe1.lean"]
    assert mirror.text == PROOF, "asked with the source up to the end of the declaration"


async def test_a_stale_import_message_in_a_reported_barrier_takes_the_full_barrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "def x := 1\n"})
    stale = [{"line": 0, "message": "Imports are out of date and should be rebuilt", "severity": 1}]
    barriers: list[bool] = []
    original = LeanClient.sync

    async def recorded(self: LeanClient, uri: str, **kw: Any) -> Any:
        if "_beamProbe" in uri:
            barriers.append(bool(kw.get("reported")))
        return await original(self, uri, **kw)

    monkeypatch.setattr(LeanClient, "sync", recorded)
    async with open_broker({"diagnostics": {"A_beamProbe1.lean": stale}}) as broker:
        await call(broker, "update", root, path="A.lean")
        first = await call(broker, "run_at", root, **at(0, 0, "#check x"))
        second = await call(broker, "run_at", root, **at(0, 0, "#check x"))
    assert first == second and first["success"] is True
    assert barriers == [False, True, False], "opened: full; changed: reported, then full because of the message"


async def test_an_edit_inside_a_mirror_s_copy_reaches_the_mirror_before_any_probe_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "def a := 1\n\ndef b := 2\n"})
    followed = anyio.Event()
    original = mirrors.follow

    async def recorded(*args: Any, **kwargs: Any) -> bool:
        changed = await original(*args, **kwargs)
        followed.set()
        return changed

    monkeypatch.setattr(mirrors, "follow", recorded)
    async with open_broker() as broker:
        await call(broker, "sync", root, path="A.lean")
        before = await call(broker, "run_at", root, **at(1, 0, "#check a"))
        (root / "A.lean").write_text("def a := 10\n\ndef b := 2\n")
        version = (await call(broker, "update", root, path="A.lean"))["version"]
        with anyio.fail_after(TIMEOUT):
            await followed.wait()
        runtime = broker.cached(str(root))
        assert runtime is not None and (client := runtime.live_client()) is not None
        [mirror] = next(iter(runtime.pools.values())).mirrors
        assert mirror.text is not None and mirror.text.startswith("def a := 10\n")
        assert client.document(mirror.uri).text == mirror.text  # sent to Lean, not only remembered
        after = await call(broker, "run_at", root, **at(1, 0, "#check a", version=version))
    assert after == before and after["success"] is True


async def test_a_probe_right_after_an_edit_sends_the_edit_and_itself_as_one_mirror_version(tmp_path: Path) -> None:
    # `lean_run_at` at once after `lean_update`: the mirror gets one new version holding both the edit and the
    # probe; the delayed follow finds the mirror written and sends nothing (two versions back to back would
    # make Lean elaborate the edited declaration twice while the source's worker competes for the CPU).
    root = fake_project(tmp_path / "p", {"A.lean": "def a := 1\n\ndef b := 2\n"})
    async with open_broker() as broker:
        await call(broker, "sync", root, path="A.lean")
        before = await call(broker, "run_at", root, **at(1, 0, "#check a"))
        runtime = broker.cached(str(root))
        client = runtime.live_client() if runtime is not None else None
        assert runtime is not None and client is not None
        [mirror] = next(iter(runtime.pools.values())).mirrors
        sent = client.document(mirror.uri).version
        (root / "A.lean").write_text("def a := 10\n\ndef b := 2\n")
        version = (await call(broker, "update", root, path="A.lean"))["version"]
        after = await call(broker, "run_at", root, **at(1, 0, "#check a", version=version))
        await anyio.sleep(mirrors.FOLLOW_DELAY * 3)
        assert client.document(mirror.uri).version == sent + 1 and mirror.text is not None
        assert mirror.text.startswith("def a := 10\n") and client.document(mirror.uri).text == mirror.text
    assert after == before and after["success"] is True


@pytest.mark.parametrize("delay", [1.0, 0.0])
async def test_lean_elaborates_an_edit_after_change_delay_and_a_probe_meanwhile_sees_the_edit(
    tmp_path: Path, delay: float
) -> None:
    # `update` -> `run_at` at once: the probe's mirror gets the edit while the file's own worker waits (Lean
    # elaborates nothing for the file until `change_delay` has passed or a call asks about the file itself).
    root = fake_project(tmp_path / "p", {"A.lean": "def a := 1\n\ndef b := 2\n"})
    async with open_broker(change_delay=delay) as broker:
        await call(broker, "sync", root, path="A.lean")
        await call(broker, "run_at", root, **at(1, 0, "#check a"))
        runtime = broker.cached(str(root))
        client = runtime.live_client() if runtime is not None else None
        assert runtime is not None and client is not None
        uri = next(iter(runtime.pools))
        async with client.subscribe() as events:
            (root / "A.lean").write_text("def a := ERROR_HERE\n\ndef b := 2\n")
            version = (await call(broker, "update", root, path="A.lean"))["version"]
            probe = await call(broker, "run_at", root, **at(1, 0, "#check a", version=version))
            [mirror] = runtime.pools[uri].mirrors
            assert probe["success"] and client.document(mirror.uri).text.startswith("def a := ERROR_HERE\n")
            if delay > 0:
                assert client.cache.get(uri).version == version - 1  # the file's worker has not got the edit yet
            with anyio.fail_after(TIMEOUT):
                while client.cache.get(uri).version != version:  # nobody asked: sent once the delay is up
                    await events.receive()
        waited = await call(broker, "sync", root, path="A.lean")
    assert waited["version"] == version and waited["diagnostics"]["counts"]["error"] == 1


# ---- real Lean lane -----------------------------------------------------------------------------------
TARGET = "theorem target (p : Prop) (hp : p) : p :=\n  hp\n"


def long_text(value: str) -> str:
    """A 1500-declaration file with a definition at the top whose value an edit flips."""
    head = "prelude\nimport Demo.Basic\n\n"
    body = projects.long_file(1500, target=TARGET)[len(head) :]
    return f"{head}def edited : MyNat := {value}\n\n{body}"


@pytest.mark.lean
async def test_a_probe_right_after_an_edit_at_the_top_answers_from_its_mirror_as_when_settled(
    broker: Broker, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(long_text("MyNat.zero"))
    synced = await call(broker, "sync", demo_root, path="Demo/Long.lean")
    probe = at(4, 0, "theorem probe : MyTrue := myTrue", version=synced["version"], path="Demo/Long.lean")
    failing = {**probe, "text": "theorem probe : MyTrue := nope"}
    settled = [await call(broker, "run_at", demo_root, **p) for p in (probe, failing)]
    asked = spy(monkeypatch, "plain_goal", "hover", "sync")
    path.write_text(long_text("MyNat.one"))
    version = (await call(broker, "update", demo_root, path="Demo/Long.lean"))["version"]
    runtime = broker.cached(str(demo_root))
    assert runtime is not None
    client = runtime.live_client()
    assert client is not None
    doc_uri = path.resolve().as_uri()
    edited = [await call(broker, "run_at", demo_root, **{**p, "version": version}) for p in (probe, failing)]
    hover = await call(broker, "hover", demo_root, path="Demo/Long.lean", version=version, line=3, character=13)
    still = client.cache.document_progress(doc_uri)
    assert not (still.progress_version == version and still.done), "Lean was still elaborating the document"
    assert edited == settled and edited[0]["success"] is True and edited[1]["success"] is False
    assert "MyNat" in hover["contents"]["value"]
    assert all(name.startswith("Long_beamProbe") for _, name in asked), asked
    with anyio.fail_after(TIMEOUT):
        final = await call(broker, "sync", demo_root, path="Demo/Long.lean")
    assert final["version"] == version and final["diagnostics"]["counts"]["total"] == 0


@pytest.mark.lean
async def test_goals_right_after_an_edit_at_the_top_come_from_a_mirror_as_when_settled(
    broker: Broker, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `{}` is the one tactic that parses without Init: the goals before it are the theorem's.
    target = "theorem open2 (p : Prop) (hp : p) : p := by\n  {}\n"
    path = demo_root / "Demo/Long.lean"
    path.write_text(long_text("MyNat.zero").replace(TARGET, target))
    synced = await call(broker, "sync", demo_root, path="Demo/Long.lean")
    goals: dict[str, Any] = {"path": "Demo/Long.lean", "line": 6, "character": 2, "mode": "before"}
    failing = at(6, 2, "bogus_tactic", path="Demo/Long.lean")  # fails: its proof state is the goals at the basis
    settled = await call(broker, "goals", demo_root, version=synced["version"], **goals)
    settled_probe = await call(broker, "run_at", demo_root, **{**failing, "version": synced["version"]})
    asked = spy(monkeypatch, "interactive_goals")
    path.write_text(long_text("MyNat.one").replace(TARGET, target))
    version = (await call(broker, "update", demo_root, path="Demo/Long.lean"))["version"]
    edited = await call(broker, "goals", demo_root, version=version, **goals)
    edited_probe = await call(broker, "run_at", demo_root, **{**failing, "version": version})
    assert edited == settled and [g["target"] for g in edited["goals"]] == ["p"]
    assert edited_probe == settled_probe and edited_probe["success"] is False
    assert edited_probe["proof_state"] == {"goals": edited["goals"]}
    assert {name for _, name in asked} == {"Long_beamProbe1.lean"}, asked
