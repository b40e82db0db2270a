"""The memory budget and the idle timeout on the fake Lean: what is evicted, in which order, and what it leaves.

The fake Lean server runs no file workers, so these brokers measure with a stand-in meter: each runtime holds a
base plus a fixed amount per open document, which is what a Lean server with one worker per document looks like
(the real-Lean lane measures real trees). `govern()` is called by the test, so each round happens when it says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_broker._serve.governor import Candidate, plan
from beam_broker._serve.memory import TreeUsage
from beam_broker.workspace import cache_key
from tests.support.fixtures import LeanGate, fake_broker

from .support import TIMEOUT, call, during_first_update, error_of, fake_project

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
BASE = 100 * MIB
PER_DOCUMENT = 30 * MIB


def metered(broker: Broker) -> dict[str, bool]:
    """Give `broker` a meter: BASE per runtime plus PER_DOCUMENT per open document, once `on["on"]` is set."""
    on = {"on": False}

    def meter(pid: int | None) -> TreeUsage:
        if not on["on"]:
            return TreeUsage()
        for rt in broker._open():
            client = rt.live_client()
            if client is not None and client.pid == pid:
                docs = {doc.uri: PER_DOCUMENT for doc in rt.documents.docs.values()}
                return TreeUsage(BASE + sum(docs.values()), 1 + len(docs), docs)
        return TreeUsage()

    broker.governor.meter = meter
    return on


def project(tmp_path: Path, name: str, *files: str) -> Path:
    return fake_project(tmp_path / name, {f: f"theorem t : True := trivial\n-- {f}\n" for f in files})


def candidate(key: str, path: str | None, used_at: float, size: int) -> Candidate:
    return Candidate(key, f"/{key}", path, used_at, size)


def test_the_plan_takes_least_recently_used_documents_first_and_stops_when_enough_is_freed() -> None:
    docs = [candidate("a", "/a/2", 2, 30), candidate("a", "/a/1", 1, 30), candidate("b", "/b/1", 3, 30)]
    chosen = plan(total=290, budget=250, documents=docs, workspaces=[candidate("b", None, 0, 130)])
    assert [c.path for c in chosen] == ["/a/1", "/a/2"]
    assert plan(total=250, budget=250, documents=docs, workspaces=[]) == []


def test_the_plan_shuts_workspaces_down_when_documents_do_not_free_enough() -> None:
    docs = [candidate("a", "/a/1", 1, 30), candidate("b", "/b/1", 5, 0)]
    workspaces = [candidate("b", None, 4, 100), candidate("a", None, 2, 130)]
    chosen = plan(total=230, budget=60, documents=docs, workspaces=workspaces)
    # a's document is redundant once a goes whole; a is less recently used than b, and together they suffice
    assert [(c.key, c.path) for c in chosen] == [("a", None), ("b", None)]
    # everything idle is returned when even that is not enough (the bound yields to calls in flight)
    assert len(plan(total=10_000, budget=60, documents=docs, workspaces=workspaces)) == 2


def test_the_plan_never_shuts_down_a_workspace_whose_lean_holds_nothing() -> None:
    """Finding: a runtime with no Lean running (never started, or its start failed) measures 0 bytes; the plan shut
    it down all the same (an eviction counted, its files `evicted` instead of the start's error, nothing freed)."""
    workspaces = [candidate("dead", None, 0, 0), candidate("a", None, 1, 250)]
    chosen = plan(total=300, budget=100, documents=[], workspaces=workspaces)
    assert [c.key for c in chosen] == ["a"]


async def test_over_the_budget_the_least_recently_used_idle_documents_are_closed_and_read_evicted(
    tmp_path: Path,
) -> None:
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    b = project(tmp_path, "b", "B1.lean")
    async with fake_broker(memory_budget_mib=250) as broker:
        on = metered(broker)
        for root, name in ((a, "A1.lean"), (a, "A2.lean"), (b, "B1.lean")):
            await call(broker, "sync", root, path=name)
        on["on"] = True  # 100+2*30 + 100+30 = 290 MiB: 40 over, so the two oldest documents go
        await broker.governor.govern()
        status = broker.status()
        assert status["evictions"] == [{"kind": "document", "reason": "memory", "count": 2}]
        assert [(e["path"], e["bytes"]) for e in reversed(status["recentEvictions"])] == [
            (str(a / "A1.lean"), PER_DOCUMENT),
            (str(a / "A2.lean"), PER_DOCUMENT),
        ]
        assert broker.diagnostics(str(a / "A1.lean"))["availability"] == "evicted"
        assert broker.diagnostics(str(a / "A1.lean"))["diagnostics"] == []
        assert broker.diagnostics(str(b / "B1.lean"))["availability"] == "published"
        assert broker.workspace_count == 2  # documents were enough: no workspace was shut down
        await broker.governor.govern()  # 230 MiB now: within the budget, nothing more goes
        assert broker.evictions.total() == 2
        # the next call opens it again, and its diagnostics are Lean's again
        assert (await call(broker, "sync", a, path="A1.lean"))["diagnostics"]["counts"]["error"] == 0
        assert broker.diagnostics(str(a / "A1.lean"))["availability"] == "published"


async def test_a_runtime_with_a_call_in_flight_is_never_evicted_and_an_idle_one_restarts_on_its_next_call(
    tmp_path: Path,
) -> None:
    a = project(tmp_path, "a", "A1.lean")
    b = project(tmp_path, "b", "B1.lean")
    changed: list[str] = []
    async with fake_broker(memory_budget_mib=150) as broker:
        broker.add_diagnostics_listener(changed.append)
        on = metered(broker)
        await call(broker, "sync", b, path="B1.lean")
        done: list[dict[str, Any]] = []

        async def held() -> None:
            done.append(await call(broker, "sync", a, path="A1.lean"))

        async with LeanGate.install(a) as gate, anyio.create_task_group() as tg:
            tg.start_soon(held)
            with anyio.fail_after(TIMEOUT):
                await gate.reached()
            on["on"] = True  # 130 + 130 MiB: b's document alone frees too little, so b goes whole; a is in use
            await broker.governor.govern()
            assert broker.status()["evictions"] == [{"kind": "workspace", "reason": "memory", "count": 1}]
            assert broker.cached(str(b)) is None and broker.cached(str(a)) is not None
            assert broker.diagnostics(str(b / "B1.lean"))["availability"] == "evicted"
            assert str(b / "B1.lean") in changed  # subscribers hear of it
            gate.open()
        assert done and done[0]["version"] == 1
        on["on"] = False
        again = await call(broker, "sync", b, path="B1.lean")  # a new runtime, a new Lean server
        assert again["version"] == 1
        assert broker.diagnostics(str(b / "B1.lean"))["availability"] == "published"
        assert broker.status()["workspaces"][1]["sessionStarts"] == 1


async def test_a_runtime_idle_past_the_idle_timeout_shuts_down_and_the_drop_forgets_it(tmp_path: Path) -> None:
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker(idle_timeout=3600) as broker:
        await call(broker, "sync", a, path="A1.lean")
        runtime = broker.cached(str(a))
        assert runtime is not None
        await broker.governor.govern()
        assert broker.workspace_count == 1  # not idle long enough
        runtime.occupancy.last_active -= 7200
        await broker.governor.govern()
        assert broker.workspace_count == 0
        assert broker.status()["evictions"] == [{"kind": "workspace", "reason": "idle", "count": 1}]
        assert broker.diagnostics(str(a / "A1.lean"))["availability"] == "evicted"
        # dropping the workspace on purpose makes its files untracked rather than evicted
        await call(broker, "drop_workspace", a)
        assert broker.diagnostics(str(a / "A1.lean"))["tracked"] is False


EDITED = "def other : Nat := 0\ntheorem t : True := trivial\n"


async def test_a_version_pinned_before_the_idle_timeout_shut_its_runtime_down_is_not_current_after_an_edit(
    tmp_path: Path,
) -> None:
    """docs/broker.md: a caller holding version 1 of the old text gets `documentVersionMismatch` after Beam closed
    the document on its own; a runtime shut down whole is such a close (the new runtime opens at version 1 again)."""
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker(idle_timeout=3600) as broker:
        await call(broker, "sync", a, path="A1.lean")  # version 1 of the old text
        runtime = broker.cached(str(a))
        assert runtime is not None
        runtime.occupancy.last_active -= 7200
        await broker.governor.govern()
        assert broker.workspace_count == 0
        (a / "A1.lean").write_text(EDITED)
        failure = await error_of(broker, "hover", a, path="A1.lean", version=1, line=1, character=8)
        assert failure.code == codes.CONTENT_MODIFIED and failure.data is not None
        assert failure.data["reason"] == "documentVersionMismatch"
        assert (await call(broker, "sync", a, path="A1.lean"))["version"] == 1  # the caller learns the new version
        await call(broker, "hover", a, path="A1.lean", version=1, line=1, character=8)


async def test_a_version_pinned_before_the_budget_shut_its_runtime_down_names_the_reopened_file_only_unchanged(
    tmp_path: Path,
) -> None:
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    b = project(tmp_path, "b", "B1.lean")
    async with fake_broker(memory_budget_mib=50) as broker:
        on = metered(broker)
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "sync", a, path="A2.lean")
        await call(broker, "sync", b, path="B1.lean")  # the most recently used runtime: never shut down for memory
        on["on"] = True  # 290 MiB: closing every document frees too little, so a (the older) goes whole
        await broker.governor.govern()
        assert broker.status()["evictions"] == [
            {"kind": "document", "reason": "memory", "count": 1},
            {"kind": "workspace", "reason": "memory", "count": 1},
        ]
        assert broker.cached(str(a)) is None and broker.cached(str(b)) is not None
        on["on"] = False
        (a / "A1.lean").write_text(EDITED)
        failure = await error_of(broker, "hover", a, path="A1.lean", version=1, line=1, character=8)
        assert failure.data is not None and failure.data["reason"] == "documentVersionMismatch"
        # A2 is the text version 1 named: the new runtime's version 1 still names it
        await call(broker, "hover", a, path="A2.lean", version=1, line=0, character=8)


async def test_the_most_recently_used_runtime_is_never_shut_down_for_memory_its_idle_documents_close(
    tmp_path: Path,
) -> None:
    # Finding: one workspace that alone held more than the budget was shut down in every round, so every call of
    # the agent working in it started Lean again. Its idle documents still close.
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    async with fake_broker(memory_budget_mib=50) as broker:
        on = metered(broker)
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "sync", a, path="A2.lean")
        on["on"] = True  # 160 MiB against 50: both documents close, the runtime stays
        await broker.governor.govern()
        await broker.governor.govern()
        assert broker.status()["evictions"] == [{"kind": "document", "reason": "memory", "count": 2}]
        assert broker.cached(str(a)) is not None
        again = await call(broker, "sync", a, path="A1.lean")
        assert again["version"] == 1 and broker.status()["workspaces"][0]["sessionStarts"] == 1


async def test_a_version_pinned_before_a_drop_is_not_current_after_an_edit(tmp_path: Path) -> None:
    """Another caller's drop closes the document as surely as an eviction: the pin named the old text."""
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker() as broker:
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "drop_workspace", a)
        (a / "A1.lean").write_text(EDITED)
        failure = await error_of(broker, "document_symbols", a, path="A1.lean", version=1)
        assert failure.data is not None and failure.data["reason"] == "documentVersionMismatch"


async def test_status_reports_each_workspace_and_the_totals(tmp_path: Path) -> None:
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    async with fake_broker(memory_budget_mib=1000, idle_timeout=60) as broker:
        on = metered(broker)
        on["on"] = True
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "sync", a, path="A2.lean")
        await broker.governor.govern()
        status = broker.status()
    assert status["memoryBudgetBytes"] == 1000 * MIB and status["idleTimeoutSeconds"] == 60
    assert status["residentBytes"] == BASE + 2 * PER_DOCUMENT
    (workspace,) = status["workspaces"]
    assert workspace["root"] == str(a) and workspace["openDocuments"] == 2 and workspace["processes"] == 3
    assert workspace["callsInFlight"] == 0 and workspace["toolchain"] is None
    assert status["lanes"] == {"cheap": {"in_flight": 0, "waiting": 0}, "heavy": {"in_flight": 0, "waiting": 0}}
    assert status["evictions"] == [] and status["recentErrors"] == []


async def test_an_idle_eviction_never_shuts_down_the_runtime_opened_for_a_root_while_the_round_ran(
    tmp_path: Path,
) -> None:
    """A round evicts the runtimes it measured: one dropped and opened again meanwhile is another, just used."""
    a = project(tmp_path, "a", "A1.lean")
    b = project(tmp_path, "b", "B1.lean")
    async with fake_broker(idle_timeout=3600) as broker:
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "sync", b, path="B1.lean")
        for root in (a, b):  # both idle past the timeout, with no await before the round (the governor's own)
            runtime = broker.cached(str(root))
            assert runtime is not None
            runtime.occupancy.last_active -= 7200
        close = broker.governor._close
        reopened: list[object] = []

        async def close_while_b_is_dropped_and_used_again(key: str) -> object:
            closed = await close(key)
            if not reopened:  # while a's Lean stops, another agent drops b and opens it again
                await call(broker, "drop_workspace", b)
                await call(broker, "sync", b, path="B1.lean")
                reopened.append(broker.cached(str(b)))
            return closed

        broker.governor._close = close_while_b_is_dropped_and_used_again
        await broker.governor.govern()
        assert broker.cached(str(a)) is None
        assert reopened and broker.cached(str(b)) is reopened[0]  # just used: not idle, not evicted
        assert broker.status()["evictions"] == [{"kind": "workspace", "reason": "idle", "count": 1}]


async def test_a_call_racing_the_eviction_of_its_runtime_starts_lean_once_the_old_lean_has_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One Lean server per root at a time: a call that finds its runtime being shut down waits for it to go."""
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker(idle_timeout=3600) as broker:
        await call(broker, "sync", a, path="A1.lean")
        old = broker._runtimes[cache_key(str(a))]
        assert old.runtime is not None
        overlapping: list[bool] = []
        host = broker._host

        async def watched(root: str, hosted: Any, *, task_status: Any) -> None:
            overlapping.append(not old.done.is_set())
            await host(root, hosted, task_status=task_status)

        monkeypatch.setattr(broker, "_host", watched)
        old.runtime.occupancy.last_active -= 7200
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.governor.govern)
            with anyio.fail_after(TIMEOUT):
                while not old.runtime.occupancy.evicting:
                    await anyio.lowlevel.checkpoint()
            assert not old.done.is_set()  # the race: the old Lean is still stopping when the call comes
            again = await call(broker, "sync", a, path="A1.lean")
        assert again["version"] == 1
        assert overlapping == [False]


async def test_lean_restarts_never_go_backwards_while_a_runtime_closes(tmp_path: Path) -> None:
    """`sessionRestarts` feeds a Prometheus counter: a scrape while a runtime stops must not see it drop."""
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker() as broker:
        await call(broker, "sync", a, path="A1.lean")
        hosted = broker._runtimes[cache_key(str(a))]
        assert hosted.runtime is not None
        hosted.runtime.metrics.sessionRestarts = 2
        seen: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, broker, "drop_workspace", a)
            with anyio.fail_after(TIMEOUT):
                while not hosted.done.is_set():
                    seen.append(broker.status()["sessionRestarts"])
                    await anyio.lowlevel.checkpoint()
        seen.append(broker.status()["sessionRestarts"])
        assert set(seen) == {2}


async def test_a_runtime_used_while_the_round_evicts_another_is_not_shut_down_for_memory_by_that_round(
    tmp_path: Path,
) -> None:
    """Finding: a round planned from its measurement and shut down every runtime it chose, even one an agent used
    while an earlier eviction of the round awaited (it is then the most recently used: never shut down for memory)."""
    a = project(tmp_path, "a", "A1.lean")
    b = project(tmp_path, "b", "B1.lean")
    c = project(tmp_path, "c", "C1.lean")
    async with fake_broker(memory_budget_mib=150) as broker:
        on = metered(broker)
        for root, name in ((a, "A1.lean"), (b, "B1.lean"), (c, "C1.lean")):
            await call(broker, "sync", root, path=name)
        close = broker.governor._close
        used: list[bool] = []

        async def close_while_b_is_used(key: str) -> object:
            closed = await close(key)
            if not used:  # while a's Lean stops, another agent works in b (its call starts and ends)
                await call(broker, "hover", b, path="B1.lean", version=1, line=0, character=8)
                used.append(True)
            return closed

        broker.governor._close = close_while_b_is_used
        on["on"] = True  # 3 * 130 MiB against 150: the plan shuts a and b down (c is the most recently used)
        await broker.governor.govern()
        assert used and broker.cached(str(a)) is None
        assert broker.cached(str(b)) is not None  # used during the round: the most recently used now
        assert broker.status()["evictions"] == [
            {"kind": "document", "reason": "memory", "count": 1},
            {"kind": "workspace", "reason": "memory", "count": 1},
        ]


async def test_a_document_used_while_the_round_closes_another_is_not_closed_by_that_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for documents: one used while the round closed an older one is no longer the least recently used."""
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    b = project(tmp_path, "b", "B1.lean")
    async with fake_broker(memory_budget_mib=240) as broker:
        on = metered(broker)
        for root, name in ((a, "A1.lean"), (a, "A2.lean"), (b, "B1.lean")):
            await call(broker, "sync", root, path=name)
        runtime = broker.cached(str(a))
        assert runtime is not None
        close_doc = runtime.close_doc
        used: list[bool] = []

        async def close_while_a2_is_used(*args: Any, **kwargs: Any) -> None:
            await close_doc(*args, **kwargs)
            if not used:  # while A1 closes, an agent reads A2 (its call starts and ends)
                await call(broker, "hover", a, path="A2.lean", version=1, line=0, character=8)
                used.append(True)

        monkeypatch.setattr(runtime, "close_doc", close_while_a2_is_used)
        on["on"] = True  # 160 + 130 MiB against 240: the plan closes A1 and A2, the least recently used
        await broker.governor.govern()
        assert used and str(a / "A2.lean") in runtime.documents.docs  # used during the round: it stays
        assert [e["path"] for e in broker.status()["recentEvictions"]] == [str(a / "A1.lean")]


async def test_a_document_counts_as_used_until_its_call_ends_not_since_it_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: `used_at` was the start of the last call that read a document, so the document of a long call (a
    sync of a large file) was the least recently used the moment that call answered, and the budget closed it
    first, before the agent's next call on it, rather than the document another call used while it ran."""
    a = project(tmp_path, "a", "A1.lean", "A2.lean")
    async with fake_broker(memory_budget_mib=140) as broker:
        on = metered(broker)
        await call(broker, "sync", a, path="A1.lean")
        await call(broker, "sync", a, path="A2.lean")
        # While the call on A1 still runs, another call reads A2 and ends.
        nested = during_first_update(
            broker, a, monkeypatch, lambda: call(broker, "hover", a, path="A2.lean", version=1, line=0, character=8)
        )
        await call(broker, "hover", a, path="A1.lean", version=1, line=0, character=8)  # ends last
        on["on"] = True  # 160 MiB against 140: one document goes, the least recently used
        await broker.governor.govern()
        assert nested and [e["path"] for e in broker.status()["recentEvictions"]] == [str(a / "A2.lean")]


async def test_a_drop_while_the_idle_timeout_shuts_the_runtime_down_drops_it_and_leaves_its_files_untracked(
    tmp_path: Path,
) -> None:
    """Finding: a drop that came while the governor shut the runtime down answered `dropped: false` (`notFound`,
    handles not invalidated) though its Lean was stopping and its handles gone, and its files then read `evicted`
    (the governor recorded them after the drop had forgotten the root's)."""
    a = project(tmp_path, "a", "A1.lean")
    async with fake_broker(idle_timeout=3600) as broker:
        await call(broker, "sync", a, path="A1.lean")
        old = broker.cached(str(a))
        assert old is not None
        old.occupancy.last_active -= 7200
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.governor.govern)
            with anyio.fail_after(TIMEOUT):
                while not old.occupancy.evicting:
                    await anyio.lowlevel.checkpoint()
            dropped = await call(broker, "drop_workspace", a)
        assert dropped["dropped"] is True and dropped.get("reason") is None
        assert broker.diagnostics(str(a / "A1.lean"))["tracked"] is False
