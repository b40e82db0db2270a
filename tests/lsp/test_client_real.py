"""beam-lsp against the real Lean server (lean435 lane; elan lane when a toolchain is on PATH)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from lsprotocol import types

from beam_lsp import (
    Availability,
    DiagnosticsCache,
    DiagnosticsEvent,
    DocumentNotOpen,
    Elaboration,
    InvalidPosition,
    LeanClient,
    LeanTag,
    Position,
    ProgressEvent,
    Range,
    ServerExited,
    path_to_uri,
)
from tests.support import procs, projects
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


def P(line: int, character: int) -> Position:
    return Position(line=line, character=character)


@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def open_file(client: LeanClient, root: Path, rel: str) -> str:
    path = root / rel
    uri = path_to_uri(path)
    await client.open(uri, path.read_text(encoding="utf-8"))
    return uri


async def test_clean_file_syncs_complete_with_no_diagnostics(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
    assert result.elaboration is Elaboration.COMPLETE and result.complete
    assert result.version == 1 and result.diagnostics == () and result.diagnostics_version == 1
    assert result.availability is Availability.PUBLISHED
    assert client.server_info.get("name") == "Lean 4 Server"


async def test_type_error_is_reported_with_its_range_and_full_range(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Broken.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
    assert result.complete
    [err] = result.errors
    assert err.message.startswith("Type mismatch")
    assert err.range.start.line == 3 and err.fullRange is not None and err.fullRange.start.line == 3


async def test_warning_comes_with_a_code_action_that_resolves(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Warn.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
        [warning] = result.diagnostics
        assert warning.severity == 2 and "not explicitly referenced" in warning.message
        actions = await client.code_actions(uri, Range(start=P(4, 8), end=P(4, 9)))
        assert actions and actions[0]["title"] == "Try this: _x"
        resolved = await client.resolve_code_action(actions[0])
    edit = resolved["edit"]["documentChanges"][0]["edits"][0]
    assert edit["newText"] == "_x"


async def test_unsolved_goals_and_plain_goals_in_a_tactic_block(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Goals.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
        unsolved = [d for d in result.errors if d.leanTags and LeanTag.UNSOLVED_GOALS in d.leanTags]
        assert unsolved and unsolved[0].message.startswith("unsolved goals")
        before = await client.plain_goal(uri, P(3, 43))
        inside = await client.plain_goal(uri, P(4, 2))
        term = await client.plain_term_goal(uri, P(3, 43))
        outside = await client.plain_goal(uri, P(0, 0))
    assert before is not None and before.goals == ["p : Prop\nhp : p\n⊢ p"]
    assert inside is not None and inside.goals == before.goals
    assert term is None and outside is None


async def test_structured_goals_come_from_lean_rpc(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Goals.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        goals = await client.interactive_goals(uri, P(4, 2))
    [goal] = goals["goals"]
    assert [h["names"] for h in goal["hyps"]] == [["p"], ["hp"]]
    assert goal["goalPrefix"] == "⊢ "


async def test_navigation_requests_answer_across_modules(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        hover = await client.hover(uri, P(3, 29))
        none_hover = await client.hover(uri, P(2, 0))
        definition = await client.definition(uri, P(3, 29))
        refs = await client.references(uri, P(3, 29), include_declaration=True)
        symbols = await client.document_symbols(uri)
        ws = await client.workspace_symbols("idPro")
        sig = await client.signature_help(uri, P(6, 3))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("```lean\nmyTrue : MyTrue\n```")
    assert none_hover is None
    [target] = definition
    target_uri = target.target_uri if isinstance(target, types.LocationLink) else target.uri
    assert target_uri == path_to_uri(demo_root / "Demo/Basic.lean")
    assert {r.uri for r in refs} >= {uri, path_to_uri(demo_root / "Demo/Basic.lean")}
    assert [s.name for s in symbols] == ["byTerm", "idProof", "two"]
    assert [s.name for s in ws] == ["idProof"]
    assert sig is None


async def test_positions_are_utf16_and_validated_before_sending(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Unicode.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        hover = await client.hover(uri, P(3, 38))  # `myTrue` after two astral characters and an é
    assert hover is not None and hover.range is not None
    assert (hover.range.start.character, hover.range.end.character) == (37, 43)
    sent = client.stats().requests
    with pytest.raises(InvalidPosition):
        await client.hover(uri, P(3, 4))  # inside the surrogate pair of 𝔸
    with pytest.raises(InvalidPosition):
        await client.hover(uri, P(99, 0))
    assert client.stats().requests == sent


async def test_requests_for_unknown_or_closed_documents_are_typed_errors(client: LeanClient, demo_root: Path) -> None:
    with pytest.raises(DocumentNotOpen):
        await client.hover(path_to_uri(demo_root / "Nope.lean"), P(0, 0))
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    await client.close(uri)
    with pytest.raises(DocumentNotOpen):
        await client.sync(uri)


async def test_a_change_gets_a_new_version_and_its_own_diagnostics(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    text = (demo_root / "Demo/Proofs.lean").read_text()
    with anyio.fail_after(60):
        assert (await client.sync(uri)).diagnostics == ()
        version = await client.change(uri, text + "\ntheorem oops : MyTrue := nope\n")
        broken = await client.sync(uri)
        assert version == 2 and broken.version == 2
        assert broken.errors[0].message == "Unknown identifier `nope`"
        await client.change(uri, text)
        fixed = await client.sync(uri)
    assert fixed.version == 3 and fixed.diagnostics == ()


async def test_a_second_sync_of_an_unchanged_version_sends_nothing(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Broken.lean")
    with anyio.fail_after(60):
        first = await client.sync(uri)
    sent = client.stats().requests
    second = await client.sync(uri)
    assert client.stats().requests == sent
    assert second == first


async def test_a_deadline_gives_processing_with_ranges_never_a_false_clean(client: LeanClient, demo_root: Path) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    await client.open(uri, path.read_text())
    partial = await client.sync(uri, timeout=0.05)
    assert partial.elaboration is Elaboration.PROCESSING
    assert partial.processing, "a processing result names the ranges still elaborating"
    with anyio.fail_after(120):
        full = await client.sync(uri)
    assert full.complete and full.diagnostics == ()
    assert client.stats().cancellations_sent >= 1


async def test_cancelling_a_sync_sends_cancel_and_leaves_the_client_usable(client: LeanClient, demo_root: Path) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    await client.open(uri, path.read_text())
    with anyio.move_on_after(0.05):
        await client.sync(uri)
    assert client.stats().cancellations_sent == 1
    with anyio.fail_after(120):
        assert (await client.sync(uri)).complete
        assert await client.hover(uri, P(3, 9)) is not None


async def test_multi_module_imports_resolve_through_built_oleans(lean_toolchain: Toolchain, demo_root: Path) -> None:
    (demo_root / "Demo/Uses.lean").write_text(
        "prelude\nimport Demo.Proofs\n\ntheorem again (p : Prop) (hp : p) : p := idProof p hp\n"
    )
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        uri = await open_file(client, demo_root, "Demo/Uses.lean")
        with anyio.fail_after(60):
            result = await client.sync(uri)
            definition = await client.definition(uri, P(3, 43))
    assert result.complete and result.diagnostics == ()
    [target] = definition
    target_uri = target.target_uri if isinstance(target, types.LocationLink) else target.uri
    assert target_uri == path_to_uri(demo_root / "Demo/Proofs.lean")


async def test_a_killed_worker_fails_the_pending_request_and_a_change_recovers(
    client: LeanClient, demo_root: Path
) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    outcome = {}
    with anyio.fail_after(120):
        async with client.subscribe() as events, anyio.create_task_group() as tg:
            await client.open(uri, path.read_text())

            async def do_sync() -> None:
                outcome["result"] = await client.sync(uri)

            tg.start_soon(do_sync)
            # Kill mid-elaboration (as in the captures): killing a worker before the watchdog finished
            # handing it the document crashes the real watchdog with a broken pipe.
            async for event in events:
                if isinstance(event, ProgressEvent) and event.params.processing:
                    if event.params.processing[0].range.start.line > 10:
                        break
            procs.kill(procs.worker_pids(client.pid, uri)[0])
    result = outcome["result"]
    assert result.elaboration is Elaboration.FAILED
    assert client.stats().worker_crashes == 1
    with anyio.fail_after(120):
        await client.restart_document(uri)
        recovered = await client.sync(uri)
    assert recovered.complete and recovered.diagnostics == ()


async def test_a_dead_server_fails_pending_requests_at_once_with_its_stderr(
    client: LeanClient, demo_root: Path
) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    await client.open(uri, path.read_text())
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            errors: list[BaseException] = []

            async def do_sync() -> None:
                try:
                    await client.sync(uri)
                except ServerExited as exc:
                    errors.append(exc)

            tg.start_soon(do_sync)
            await anyio.sleep(0.2)  # let the request reach the server
            procs.kill(client.pid)
        exited = await client.wait_exited()
    assert errors and errors[0] is exited
    assert exited.returncode is not None and exited.returncode < 0
    with pytest.raises(ServerExited):
        await client.hover(uri, P(0, 0))


async def test_events_stream_progress_and_diagnostics(client: LeanClient, demo_root: Path) -> None:
    async with client.subscribe() as events:
        uri = await open_file(client, demo_root, "Demo/Broken.lean")
        with anyio.fail_after(60):
            await client.sync(uri)
        seen = []
        while True:
            try:
                seen.append(events.receive_nowait())
            except anyio.WouldBlock:
                break
    progress = [e for e in seen if isinstance(e, ProgressEvent)]
    diags = [e for e in seen if isinstance(e, DiagnosticsEvent)]
    assert progress and progress[-1].params.processing == []
    assert diags and diags[-1].diagnostics and diags[-1].version == 1


async def test_secrets_in_lean_output_are_redacted(lean_toolchain: Toolchain, demo_root: Path) -> None:
    env = lean_toolchain.env()
    env["BEAM_TEST_TOKEN"] = "sekritvalue12345"
    (demo_root / "Demo/Leak.lean").write_text("prelude\nimport Demo.Basic\n\ndef x : MyTrue := sekritvalue12345\n")
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=env) as client:
        uri = await open_file(client, demo_root, "Demo/Leak.lean")
        with anyio.fail_after(60):
            result = await client.sync(uri)
    [err] = result.errors
    assert "sekritvalue12345" not in err.message
    assert "[redacted:BEAM_TEST_TOKEN]" in err.message


async def test_a_shared_cache_returns_to_pending_when_a_new_server_starts(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    cache = DiagnosticsCache()
    cmd, env = lean_toolchain.server_cmd(), lean_toolchain.env()
    async with LeanClient.start(cmd, cwd=demo_root, env=env, cache=cache) as client:
        uri = await open_file(client, demo_root, "Demo/Broken.lean")
        with anyio.fail_after(60):
            await client.sync(uri)
        assert cache.get(uri).availability is Availability.PUBLISHED
    async with LeanClient.start(cmd, cwd=demo_root, env=env, cache=cache):
        assert cache.get(uri).availability is Availability.PENDING
