"""The memory budget and the idle timeout on real Lean 4.35: measured trees, evictions, and what they leave behind.

The fake lane checks the policy with a stand-in meter (`test_governor.py`); here the meter is the real one, reading
the `/proc` trees of real `lean --server` processes and their file workers. Budgets are set from what was just
measured (Lean's footprint varies with the machine), and the test runs each round itself (`govern()`; the timer is
an hour), so each eviction happens when the test says.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig, BrokerError
from beam_broker import errors as codes
from beam_broker._serve import memory
from beam_broker.runtime import WorkspaceRuntime
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean, pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc")]

MIB = 1024 * 1024
DEADLINE = 180
PROBE = "example : MyTrue := myTrue\n"


@pytest.fixture
async def governed(lean_toolchain: Toolchain) -> AsyncIterator[Broker]:
    """A real-Lean broker with a budget too large to matter (tests lower it) and rounds only when a test asks."""
    config = BrokerConfig(
        lean_cmd=lean_toolchain.server_cmd(),
        env=lean_toolchain.env(),
        memory_budget_mib=1 << 30,
        measure_interval=3600,
    )
    async with Broker.open(config) as broker:
        yield broker


def copy_demo(built_demo: Path, where: Path) -> Path:
    shutil.copytree(built_demo, where, symlinks=True)
    return where.resolve()


async def call(broker: Broker, op: str, root: Path, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = await broker.call(op, {"workspace": {"root": str(root)}, **args})
    return out


async def probe(broker: Broker, root: Path, path: str) -> dict[str, Any]:
    """Sync `path`, then a speculative run at its end that mints a handle (it opens a probe mirror)."""
    synced = await call(broker, "sync", root, path=path)
    ran = await call(
        broker, "run_at_handle", root, path=path, version=synced["version"], line=3, character=0, text=PROBE
    )
    assert ran["success"] is True and ran["next_handle"] is not None, ran
    handle: dict[str, Any] = ran["next_handle"]
    return handle


def runtime(broker: Broker, root: Path) -> WorkspaceRuntime:
    found = broker.cached(str(root))
    assert found is not None
    return found


def tree(rt: WorkspaceRuntime) -> list[int]:
    """The process ids of a runtime's Lean tree: the server and its file workers."""
    client = rt.live_client()
    assert client is not None and client.pid is not None
    return list(memory.descendants(client.pid))


def gone(pid: int) -> bool:
    """Whether a process has ended (and been reaped, or is a zombie holding nothing)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def ended(pids: list[int]) -> None:
    """Wait until every process of `pids` has ended: Lean ends a worker a few ms after its document is closed."""
    with anyio.fail_after(30):  # nothing tells when a process ends but /proc: poll it, bounded
        while True:
            if all(gone(pid) for pid in pids):
                return
            await anyio.sleep(0.01)


def set_budget(broker: Broker, budget: int | None = None, idle_timeout: float | None = None) -> None:
    """The broker's budget (MiB) and idle timeout from now on (the governor reads them every round)."""
    broker.governor.config = dataclasses.replace(
        broker.governor.config, memory_budget_mib=budget, idle_timeout=idle_timeout
    )


async def test_a_real_lean_tree_is_measured_whole_and_each_file_worker_by_the_document_it_serves(
    governed: Broker, built_demo: Path, tmp_path: Path
) -> None:
    root = copy_demo(built_demo, tmp_path / "sp ace é" / "demo")  # URIs percent-encode both
    with anyio.fail_after(DEADLINE):
        await call(governed, "sync", root, path="Demo/Goals.lean")
        await probe(governed, root, "Demo/Proofs.lean")
        await governed.governor.govern()
        rt = runtime(governed, root)
        usage = rt.occupancy.usage
        pool = rt.pools[rt.documents.docs[str(root / "Demo/Proofs.lean")].uri]
        uris = {doc.uri for doc in rt.documents.docs.values()} | {mirror.uri for mirror in pool.mirrors}
        assert len(uris) == 3 and all("sp%20ace%20%C3%A9" in uri for uri in uris)
        # Lean passes each worker the URI Beam opened the document with: every document and mirror is found
        assert set(usage.documents) == uris
        assert usage.processes == len(tree(rt)) >= len(uris) + 1
        assert all(held > 0 for held in usage.documents.values())
        # the file pages every Lean process maps (the shared library, .olean files) count once, not per process
        assert sum(usage.documents.values()) < usage.total < usage.rss
        (shown,) = governed.status()["workspaces"]
        assert shown["residentBytes"] == usage.total and shown["processes"] == usage.processes
        assert shown["openDocuments"] == 2


async def test_over_the_budget_real_lean_closes_idle_documents_then_shuts_down_an_idle_runtime(
    governed: Broker, built_demo: Path, tmp_path: Path
) -> None:
    a = copy_demo(built_demo, tmp_path / "a")
    b = copy_demo(built_demo, tmp_path / "b")
    with anyio.fail_after(DEADLINE):
        # the least recently used document
        before = await call(governed, "sync", a, path="Demo/Goals.lean", diagnostics_in_result=True)
        a_handle = await probe(governed, a, "Demo/Proofs.lean")
        b_handle = await probe(governed, b, "Demo/Proofs.lean")
        await governed.governor.govern()
        assert governed.evictions.total() == 0  # within the (huge) budget
        a_rt, b_rt = runtime(governed, a), runtime(governed, b)
        total = a_rt.occupancy.usage.total + b_rt.occupancy.usage.total
        goals = a_rt.documents.docs[str(a / "Demo/Goals.lean")]
        goals_bytes = a_rt.occupancy.usage.documents[goals.uri]
        goals_pid = next(pid for pid in tree(a_rt) if memory.worker_uri(pid) == goals.uri)

        # over the budget by about half of what the oldest idle document holds: that document is closed
        set_budget(governed, (total - goals_bytes // 2) // MIB)
        await governed.governor.govern()
        first = governed.status()["recentEvictions"][-1]
        assert (first["kind"], first["reason"], first["path"]) == ("document", "memory", str(a / "Demo/Goals.lean"))
        assert {e["kind"] for e in governed.status()["recentEvictions"]} == {"document"}  # no runtime went
        assert governed.cached(str(a)) is a_rt and governed.cached(str(b)) is b_rt
        await ended([goals_pid])  # its file worker ends
        resource = governed.diagnostics(str(a / "Demo/Goals.lean"))
        assert resource["availability"] == "evicted" and resource["diagnostics"] == []  # unknown, never clean
        assert governed.diagnostics(str(a / "Demo/Proofs.lean"))["availability"] == "published"

        # over the budget by about a whole workspace: idle documents go first, then the least recently used runtime
        a_tree = tree(a_rt)
        await governed.governor.govern()  # a fresh measurement without the closed worker
        set_budget(governed, b_rt.occupancy.usage.total // MIB)
        await governed.governor.govern()
        kinds = [(e["kind"], e["root"]) for e in reversed(governed.status()["recentEvictions"])]
        assert ("workspace", str(a)) in kinds and ("workspace", str(b)) not in kinds
        assert governed.cached(str(a)) is None and governed.cached(str(b)) is b_rt
        assert all(gone(pid) for pid in a_tree)  # a's whole Lean tree was stopped before the eviction was counted
        for path in ("Demo/Proofs.lean", "Demo/Goals.lean"):
            resource = governed.diagnostics(str(a / path))
            assert resource["availability"] == "evicted" and resource["diagnostics"] == []
        counts = {(e["kind"], e["reason"]): e["count"] for e in governed.status()["evictions"]}
        assert counts[("workspace", "memory")] == 1 and counts[("document", "memory")] >= 1

        # a handle into the shut-down runtime fails with the invalid-handle error; the workspace restarts lazily
        set_budget(governed, None)
        with pytest.raises(BrokerError) as info:
            await call(governed, "run_with", a, path="Demo/Proofs.lean", handle=a_handle, text="#check myTrue")
        assert info.value.code == codes.CONTENT_MODIFIED and info.value.data == {"reason": "staleSession"}
        restarted = runtime(governed, a)
        assert restarted is not a_rt and restarted.metrics.sessionStarts == 1
        synced = await call(governed, "sync", a, path="Demo/Goals.lean", diagnostics_in_result=True)
        assert synced["diagnostics"] == before["diagnostics"]  # the same answer as before the eviction
        assert governed.diagnostics(str(a / "Demo/Goals.lean"))["availability"] == "published"
        # b lost only idle documents: its handle into a closed document is refused, never answered from nothing
        with pytest.raises(BrokerError) as info:
            await call(governed, "run_with", b, path="Demo/Proofs.lean", handle=b_handle, text="#check myTrue")
        assert info.value.code == codes.CONTENT_MODIFIED and info.value.data == {"reason": "staleHandle"}


async def test_a_real_lean_runtime_idle_past_the_timeout_stops_its_tree_and_restarts_on_its_next_call(
    governed: Broker, built_demo: Path, tmp_path: Path
) -> None:
    a = copy_demo(built_demo, tmp_path / "a")
    with anyio.fail_after(DEADLINE):
        handle = await probe(governed, a, "Demo/Proofs.lean")
        rt = runtime(governed, a)
        pids = tree(rt)
        set_budget(governed, None, idle_timeout=3600)
        await governed.governor.govern()
        assert governed.cached(str(a)) is rt  # not idle long enough
        rt.occupancy.last_active -= 7200
        await governed.governor.govern()
        assert governed.cached(str(a)) is None and all(gone(pid) for pid in pids)
        assert governed.status()["evictions"] == [{"kind": "workspace", "reason": "idle", "count": 1}]
        assert governed.diagnostics(str(a / "Demo/Proofs.lean"))["availability"] == "evicted"
        with pytest.raises(BrokerError) as info:
            await call(governed, "run_with", a, path="Demo/Proofs.lean", handle=handle, text="#check myTrue")
        assert info.value.code == codes.CONTENT_MODIFIED and info.value.data == {"reason": "staleSession"}
        await probe(governed, a, "Demo/Proofs.lean")  # a new runtime, a new Lean tree
        assert runtime(governed, a) is not rt and governed.diagnostics(str(a / "Demo/Proofs.lean"))["availability"] == (
            "published"
        )
