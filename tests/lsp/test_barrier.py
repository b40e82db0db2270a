"""beam_lsp._barrier: the per-document sync barrier and crash notices.

The unit tests play Lean by hand (progress, publishes, a scripted `waitForDiagnostics`), so every ordering is
exact; then the barrier runs against the fake Lean server and, in the lean lane, against real Lean.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_lsp import (
    DocumentNotOpen,
    Elaboration,
    LeanClient,
    LeanFileProgressParams,
    Position,
    ProgressEvent,
    ServerExited,
    WorkerCrashed,
    path_to_uri,
)
from beam_lsp import errors as codes
from beam_lsp._barrier import Barrier, SyncResult
from beam_lsp.diagnostics import DiagnosticsCache
from tests.support import procs, projects
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio
URI = "file:///proj/A.lean"
RANGE = {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}}


def progress(version: int | None, *kinds: int, uri: str = URI) -> LeanFileProgressParams:
    params = {
        "textDocument": {"uri": uri, "version": version},
        "processing": [{"range": RANGE, "kind": k} for k in kinds],
    }
    return LeanFileProgressParams.from_json(params)


def diag(message: str) -> dict[str, Any]:
    return {"range": RANGE, "severity": 1, "message": message}


class Lean:
    """Plays Lean for one barrier: records `waitForDiagnostics` and answers as the test says."""

    def __init__(self) -> None:
        self.cache = DiagnosticsCache()
        self.barrier = Barrier(self.cache)
        self.waits: list[tuple[str, int]] = []
        self.crash_next = False
        self.version = 1

    async def request(self, uri: str, version: int) -> None:
        self.waits.append((uri, version))
        if self.crash_next:
            self.crash_next = False
            raise WorkerCrashed(codes.WORKER_CRASHED, "Server process crashed")

    def report(self, version: int, *kinds: int, diagnostics: list[dict[str, Any]] | None = None) -> None:
        if diagnostics is not None:
            self.cache.publish(URI, version, diagnostics)
            self.barrier.published(URI)
        self.barrier.progress(progress(version, *kinds), current_version=self.version)

    async def sync(self, timeout: float | None = None, *, reported: bool = False) -> SyncResult:
        request = None if reported else self.request
        return await self.barrier.sync(URI, self.version, timeout=timeout, request=request)

    async def reported(self, timeout: float | None = None) -> SyncResult:
        return await self.sync(timeout, reported=True)


async def concurrently(call: Callable[[], Awaitable[SyncResult]], then: Callable[[], object]) -> SyncResult:
    """Start `call`, let it block, run `then`, and return what `call` returns."""
    out: list[SyncResult | Exception] = []

    async def run() -> None:
        try:
            out.append(await call())
        except Exception as exc:
            out.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            assert not out, "the barrier returned before Lean finished"
            then()
    if isinstance(out[0], Exception):
        raise out[0]
    return out[0]


async def test_complete_needs_the_final_progress_of_exactly_that_version() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, 1, diagnostics=[])

    def finish() -> None:
        lean.report(1, 1, diagnostics=[diag("boom")])
        lean.report(1)

    result = await concurrently(lean.sync, finish)
    assert result.complete and [d.message for d in result.errors] == ["boom"]
    assert result.version == result.diagnostics_version == 1 and result.processing == ()
    assert lean.waits == [(URI, 1)]


async def test_a_repeated_sync_of_an_unchanged_version_answers_from_memory() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, diagnostics=[diag("e")])
    first = await lean.sync()
    second = await lean.sync()
    assert first == second and first.complete and lean.waits == [(URI, 1)]


async def test_a_deadline_gives_processing_with_ranges_never_a_false_clean() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, 1, diagnostics=[])
    result = await lean.sync(timeout=0)
    assert result.elaboration is Elaboration.PROCESSING and result.processing and result.diagnostics == ()


async def test_a_done_older_version_does_not_complete_a_newer_one() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.version = 2
    lean.barrier.changed(URI)
    lean.report(1, diagnostics=[diag("old")])
    result = await lean.sync(timeout=0)
    assert result.elaboration is Elaboration.PROCESSING and result.diagnostics == ()
    assert result.diagnostics_version == 1


async def test_a_version_lean_already_superseded_ends_the_wait_but_is_not_complete() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(2, diagnostics=[diag("newer")])
    result = await lean.sync()
    assert result.elaboration is Elaboration.PROCESSING and result.diagnostics == ()


async def test_a_fatal_progress_for_the_version_fails_the_barrier() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, 1, diagnostics=[diag("before the crash")])
    result = await concurrently(lean.sync, lambda: lean.report(1, 2))
    assert result.elaboration is Elaboration.FAILED and result.processing
    assert [d.message for d in result.diagnostics] == ["before the crash"]


async def test_a_crashed_worker_answer_fails_at_once_and_the_next_sync_sends_nothing() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.crash_next = True
    result = await lean.sync()
    assert result.elaboration is Elaboration.FAILED and lean.barrier.worker_crashes == 1
    again = await lean.sync()
    assert again.elaboration is Elaboration.FAILED and lean.waits == [(URI, 1)]


async def test_a_crash_notice_arriving_after_a_change_is_stale_and_ignored() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.barrier.worker_crashed(URI, 1)  # learned from an error answer
    lean.version = 2
    lean.barrier.changed(URI)
    lean.report(1, 2)  # Lean's fatal notice for version 1, after the restart
    assert lean.cache.document_progress(URI).progress_version is None  # not recorded either
    result = await concurrently(lean.sync, lambda: lean.report(2))
    assert result.complete


async def test_a_crash_notice_arriving_after_a_reopen_is_stale_and_ignored() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.barrier.worker_crashed(URI, 1)
    lean.barrier.close(URI)
    lean.barrier.open(URI)  # version 1 again, in a new worker
    lean.report(1, 2)  # the notice of the closed document's worker
    assert not lean.cache.document_progress(URI).fatal
    result = await concurrently(lean.sync, lambda: lean.report(1))
    assert result.complete


async def test_the_expected_crash_notice_is_recorded() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.barrier.worker_crashed(URI, 1)
    lean.report(1, 2)
    report = lean.cache.document_progress(URI)
    assert report.fatal and (await lean.sync()).elaboration is Elaboration.FAILED


async def test_a_fatal_report_for_a_replaced_version_does_not_mark_the_new_one_crashed() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.version = 3
    lean.barrier.changed(URI)
    lean.report(2, 2)  # no crash notice was expected: recorded, but version 3 runs in a new worker
    result = await concurrently(lean.sync, lambda: lean.report(3))
    assert result.complete


async def test_the_server_exit_wakes_every_waiter() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    result = await concurrently(lean.sync, lean.barrier.stop)
    assert result.elaboration is Elaboration.PROCESSING


async def test_closing_the_document_during_a_sync_raises_document_not_open() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    with pytest.raises(DocumentNotOpen):
        await concurrently(lean.sync, lambda: lean.barrier.close(URI))
    with pytest.raises(DocumentNotOpen):
        await lean.sync()


async def test_a_crash_of_an_unknown_document_is_only_counted() -> None:
    lean = Lean()
    lean.barrier.worker_crashed(None, None)
    lean.barrier.worker_crashed("file:///other.lean", 4)
    assert lean.barrier.worker_crashes == 2
    lean.barrier.progress(progress(4, 2, uri="file:///other.lean"), current_version=None)  # not open: recorded only
    assert lean.cache.document_progress("file:///other.lean").fatal


# ---- the reported barrier (no waitForDiagnostics) -----------------------------------------------------
async def test_the_reported_barrier_completes_on_a_publish_before_the_final_progress_and_sends_nothing() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, 1, diagnostics=[])  # Lean's reporter publishes when it first waits, before the final progress

    def finish() -> None:
        lean.report(1, 1, diagnostics=[diag("boom")])
        lean.report(1)

    result = await concurrently(lean.reported, finish)
    assert result.complete and [d.message for d in result.errors] == ["boom"] and lean.waits == []


async def test_the_reported_barrier_waits_for_the_publish_that_follows_a_final_progress() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1)  # a reporter that never waited: the final progress comes first, then its one publish
    assert (await lean.reported(timeout=0)).elaboration is Elaboration.PROCESSING

    def publish() -> None:
        lean.cache.publish(URI, 1, [diag("late")])
        lean.barrier.published(URI)

    result = await concurrently(lean.reported, publish)
    assert result.complete and [d.message for d in result.errors] == ["late"] and lean.waits == []


async def test_a_publish_of_an_older_version_does_not_complete_the_reported_barrier() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, diagnostics=[diag("old")])
    lean.version = 2
    lean.barrier.changed(URI)
    lean.report(2)
    result = await lean.reported(timeout=0)
    assert result.elaboration is Elaboration.PROCESSING and result.diagnostics == ()


async def test_a_reported_barrier_is_remembered_but_a_full_sync_still_asks_lean() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, diagnostics=[diag("e")])
    first = await lean.reported()
    assert first == await lean.reported() and first.complete and lean.waits == []
    assert (await lean.sync()).complete and lean.waits == [(URI, 1)]


async def test_a_fatal_progress_fails_the_reported_barrier() -> None:
    lean = Lean()
    lean.barrier.open(URI)
    lean.report(1, 2, diagnostics=[])
    assert (await lean.reported()).elaboration is Elaboration.FAILED


# ---- over the fake Lean server ------------------------------------------------------------------------
async def test_a_crashed_file_worker_is_a_typed_error_and_the_next_change_restarts_it(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"worker_crash_on": "textDocument/hover"}), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            assert (await client.sync(uri)).complete
            with pytest.raises(WorkerCrashed) as info:
                await client.hover(uri, Position(line=0, character=8))
            assert info.value.code == codes.WORKER_CRASHED
            assert (await client.sync(uri)).elaboration is Elaboration.FAILED
            await client.restart_document(uri)
            assert (await client.sync(uri)).complete
            assert await client.hover(uri, Position(line=0, character=8)) is not None
        assert client.stats().worker_crashes == 1


async def test_a_worker_crashing_on_the_barrier_itself_fails_the_sync(tmp_path: Path) -> None:
    config: dict[str, object] = {"worker_crash_on": {"method": "textDocument/waitForDiagnostics", "times": 1}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "theorem x : True := ERROR_HERE\n")
        with anyio.fail_after(10):
            failed = await client.sync(uri)
            assert failed.elaboration is Elaboration.FAILED and client.stats().worker_crashes == 1
            await client.change(uri, "theorem x : True := trivial\n")
            assert (await client.sync(uri)).complete


async def test_diagnostics_belong_to_the_version_they_were_published_for(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "def x := ERROR_HERE\n")
        with anyio.fail_after(10):
            broken = await client.sync(uri)
            version = await client.change(uri, "def x := 1\n")
            fixed = await client.sync(uri)
        assert [d.message for d in broken.errors] == ["unknown identifier 'ERROR_HERE'"]
        assert (version, fixed.version, fixed.diagnostics, fixed.complete) == (2, 2, (), True)


async def test_the_reported_barrier_over_the_fake_server_has_every_diagnostic_of_the_version(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"elab_ms": 20}), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "def x := 1\n")
        with anyio.fail_after(10):
            assert (await client.sync(uri)).complete
            sent = client.stats().requests
            await client.change(uri, "def x := ERROR_HERE\n", save=False)
            result = await client.sync(uri, reported=True)
        assert result.complete and result.version == 2
        assert [d.message for d in result.errors] == ["unknown identifier 'ERROR_HERE'"]
        assert client.stats().requests == sent


async def test_a_server_dying_during_a_sync_raises_server_exited(tmp_path: Path) -> None:
    config: dict[str, object] = {"crash_on": {"method": "textDocument/waitForDiagnostics", "exit_code": 4}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "theorem x : True := trivial\n")
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.sync(uri)
        assert info.value.returncode == 4


# ---- against real Lean --------------------------------------------------------------------------------
@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> Any:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def _open_long(client: LeanClient, root: Path) -> str:
    path = root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    await client.open(uri, path.read_text())
    return uri


@pytest.mark.lean
async def test_real_a_change_gets_a_new_version_and_its_own_diagnostics(client: LeanClient, demo_root: Path) -> None:
    path = demo_root / "Demo/Proofs.lean"
    uri = path_to_uri(path)
    text = path.read_text()
    await client.open(uri, text)
    with anyio.fail_after(60):
        assert (await client.sync(uri)).diagnostics == ()
        version = await client.change(uri, text + "\ntheorem oops : MyTrue := nope\n")
        broken = await client.sync(uri)
        assert version == 2 and broken.version == 2
        assert broken.errors[0].message == "Unknown identifier `nope`"
        await client.change(uri, text)
        fixed = await client.sync(uri)
    assert fixed.version == 3 and fixed.diagnostics == ()


@pytest.mark.lean
async def test_real_a_second_sync_of_an_unchanged_version_sends_nothing(client: LeanClient, demo_root: Path) -> None:
    uri = path_to_uri(demo_root / "Demo/Broken.lean")
    await client.open(uri, (demo_root / "Demo/Broken.lean").read_text())
    with anyio.fail_after(60):
        first = await client.sync(uri)
    sent = client.stats().requests
    second = await client.sync(uri)
    assert client.stats().requests == sent
    assert second == first


@pytest.mark.lean
async def test_real_a_deadline_gives_processing_with_ranges_never_a_false_clean(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await _open_long(client, demo_root)
    partial = await client.sync(uri, timeout=0.05)
    assert partial.elaboration is Elaboration.PROCESSING
    assert partial.processing, "a processing result names the ranges still elaborating"
    with anyio.fail_after(120):
        full = await client.sync(uri)
    assert full.complete and full.diagnostics == ()
    assert client.stats().cancellations_sent >= 1


@pytest.mark.lean
async def test_real_cancelling_a_sync_sends_cancel_and_leaves_the_client_usable(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await _open_long(client, demo_root)
    with anyio.move_on_after(0.05):
        await client.sync(uri)
    assert client.stats().cancellations_sent == 1
    with anyio.fail_after(120):
        assert (await client.sync(uri)).complete
        assert await client.hover(uri, Position(line=3, character=9)) is not None


@pytest.mark.lean
async def test_real_a_killed_worker_fails_the_pending_sync_and_a_change_recovers(
    client: LeanClient, demo_root: Path
) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    outcome: dict[str, SyncResult] = {}
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


@pytest.mark.lean
async def test_real_the_reported_barrier_has_the_diagnostics_a_full_sync_has(
    client: LeanClient, demo_root: Path
) -> None:
    path = demo_root / "Demo/Long.lean"
    base = projects.long_file(300)
    path.write_text(base)
    uri = path_to_uri(path)
    await client.open(uri, base)
    tails = [
        "\ntheorem probe0 : MyTrue := nope\n",  # the reporter never waits: its publish follows the final progress
        "\ntheorem probe1 (p : Prop) (hp : p) : p := hp\n",
        base.replace("theorem after5 ", "theorem after5' "),  # a change early on: the reporter waits
        base.replace("theorem after7 ", "theorem after7 (x : nope) ") + "\ntheorem probe2 : MyTrue := nope\n",
    ]
    with anyio.fail_after(120):
        assert (await client.sync(uri)).complete
        for tail in tails:
            text = tail if tail.startswith("prelude") else base + tail
            await client.change(uri, text, save=False)
            sent = client.stats().requests
            quick = await client.sync(uri, reported=True)
            assert client.stats().requests == sent, "the reported barrier sends no request"
            full = await client.sync(uri)
            assert quick.complete and full.complete and quick.version == full.version
            assert [d.message for d in quick.diagnostics] == [d.message for d in full.diagnostics], tail[:40]
            assert bool(quick.errors) == ("nope" in tail)
