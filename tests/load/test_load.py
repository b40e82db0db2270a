"""The load lane: many agents across more workspaces than fit in the memory budget, on real Lean, behind HAProxy.

Replicas of `lean-beam-mcp --http` (the lane's real Lean) behind the shipped HAProxy configuration; agents and
workspaces from `harness.py`. In order, each phase printing throughput, p50/p99 per tool, retries and evictions:

1. *sizing*: what a workspace and each further open document cost (an in-process broker, measured trees);
2. *no budget*: agents on every workspace, all of them resident (the baseline; calls/s per core of Beam and Lean);
3. *rolling restart*: on those replicas, each drained (SIGTERM) and started again in turn while agents call: no
   call may fail (no refusal, no move, no error reaches a client);
4. *budget*: the same load on replicas whose budget holds about half of their workspaces: evictions all along;
5. *chaos*: the budget's replicas while one replica at a time is drained and started again at random.

Every answer is checked (nothing wrong, nothing lost, never a false clean); each replica's Lean, measured from
outside every 0.2 s, stays within the stated bound: `max(budget, agents x W) + W`, where W is what one workspace
holds under this load. The budget yields to calls in flight (a workspace with a call in flight is never shut
down, and each agent has at most one call in flight), and it is kept every round, not at every allocation: what
opens between two rounds (at most about one workspace) may go past it for a moment.
`BEAM_LOAD_PROFILE=short` (the default: the CI lane, about a minute) or `full` (`tox -e load`: longer phases, more
agents and workspaces, and the sweeps behind the plots in docs/deploy.md, written to `$BEAM_LOAD_OUTPUT`).
Skipped where `haproxy` is missing unless `BEAM_DEPLOY_REQUIRED=1`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig
from tests.deploy.cluster import Cluster, cluster, haproxy_binary
from tests.support.toolchain import Toolchain

from . import harness as h

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.lean,
    pytest.mark.skipif(
        haproxy_binary() is None and os.environ.get("BEAM_DEPLOY_REQUIRED") != "1",
        reason="haproxy is not installed: the load lane installs it (tox -e load; apt-get install -y haproxy)",
    ),
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="memory is measured from /proc"),
]

MIB = 1024 * 1024
BUDGET_SHARE = 0.5
"""The budget holds about this share of the workspaces a replica serves."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """The size of a run."""

    replicas: int
    workspaces: int
    agents: int
    phase: float
    """Seconds of each of the no-budget and budget phases."""
    chaos: float
    """Seconds of the chaos phase."""
    chaos_every: float
    """Mean seconds between two drains in the chaos phase."""
    sweep_workspaces: tuple[int, ...] = ()
    sweep_agents: tuple[int, ...] = ()
    sweep_phase: float = 0.0


PROFILES = {
    "short": Profile(replicas=2, workspaces=8, agents=3, phase=6, chaos=10, chaos_every=4),
    "full": Profile(
        replicas=2,
        workspaces=16,
        agents=6,
        phase=40,
        chaos=90,
        chaos_every=15,
        sweep_workspaces=(1, 2, 4, 8, 16),
        sweep_agents=(1, 2, 4, 8),
        sweep_phase=12,
    ),
}
DEADLINE = {"short": 300, "full": 1800}


def profile() -> tuple[str, Profile]:
    name = os.environ.get("BEAM_LOAD_PROFILE", "short")
    return name, PROFILES[name]


def say(lines: list[str] | str) -> None:
    """Print for the lane's log (pytest -s shows it; the report file keeps it too)."""
    for line in [lines] if isinstance(lines, str) else lines:
        print(line, flush=True)


async def sizing(tc: Toolchain, workspaces: list[h.Workspace]) -> dict[str, float]:
    """What one warm workspace holds (its server and `Load.lean`), and each further open document."""
    config = BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env(), measure_interval=3600)
    async with Broker.open(config) as broker:
        chosen = workspaces[:3]
        for ws in chosen:
            await broker.call("sync", {"workspace": {"root": ws.root}, "path": h.LOAD_FILE})
        await broker.governor.govern()
        one = {rt.root: rt.occupancy.usage for rt in broker._open()}
        first = chosen[0].root
        for path in ("Demo/Proofs.lean", "Demo/Goals.lean", "Demo/Basic.lean"):
            await broker.call("sync", {"workspace": {"root": first}, "path": path})
        await broker.governor.govern()
        more = next(rt.occupancy.usage for rt in broker._open() if rt.root == first)
    return {
        "workspace_held_mib": h.median([u.total for u in one.values()]) / MIB,
        "workspace_rss_mib": h.median([u.rss for u in one.values()]) / MIB,
        "document_held_mib": (more.total - one[first].total) / 3 / MIB,
        "document_rss_mib": (more.rss - one[first].rss) / 3 / MIB,
    }


async def placement_counts(c: Cluster) -> dict[str, int]:
    """How many workspaces each live replica holds."""
    counts = {r.name: 0 for r in c.replicas if r.alive}
    for name in (await c.placement()).values():
        counts[name] += 1
    return counts


def server_args(budget_mib: int | None) -> list[str]:
    args = ["--drain-timeout", "20"]
    return args + (["--memory-budget-mib", str(budget_mib)] if budget_mib is not None else [])


async def phase(
    c: Cluster,
    workspaces: list[h.Workspace],
    agents: int,
    seconds: float,
    *,
    strict: bool = False,
    seed: int = 0,
    stop: anyio.Event | None = None,
) -> tuple[h.Stats, float]:
    """Agents for `seconds` through HAProxy; what they saw and the CPU seconds the replicas' trees spent."""
    if not strict:  # warm up: every workspace synced once, so the phase measures the load, not the first starts
        await h.agents(c.url, workspaces, 1, 0, seed=seed, warm=True)
    pids = [r.child.process.pid for r in c.replicas if r.alive]
    cpu = sum(h.cpu_seconds(pid) for pid in pids)
    stats = await h.agents(c.url, workspaces, agents, seconds, strict=strict, seed=seed, stop=stop)
    return stats, sum(h.cpu_seconds(pid) for pid in pids) - cpu


async def test_agents_across_more_workspaces_than_fit_in_the_budget(
    lean_toolchain: Toolchain, built_demo: Path, tmp_path: Path
) -> None:
    name, prof = profile()
    out_dir = Path(os.environ.get("BEAM_LOAD_OUTPUT") or tmp_path / "out")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"profile": name, **dataclasses.asdict(prof)}
    lines: list[str] = [f"load lane, profile {name}: {prof}"]
    lean_cmd = lean_toolchain.server_cmd()
    env = lean_toolchain.env()
    workspaces = h.make_workspaces(built_demo, tmp_path / "ws", prof.workspaces)
    with anyio.fail_after(DEADLINE[name]):
        size = await sizing(lean_toolchain, workspaces)
        report["sizing"] = size
        lines.append(
            "sizing: a warm workspace (its server and one document) holds {workspace_held_mib:.0f} MiB "
            "({workspace_rss_mib:.0f} MiB resident summed); each further open document {document_held_mib:.0f} MiB "
            "({document_rss_mib:.0f} MiB summed)".format(**size)
        )
        say(lines[-1])

        # 2. no budget: every workspace resident; 5. then a rolling restart, where no call may fail
        async with cluster(prof.replicas, lean_cmd, env=env, extra_args=server_args(None)) as c:
            sampler = h.cluster_sampler(c)
            async with h.sampling(sampler):
                free, cpu = await phase(c, workspaces, prof.agents, prof.phase, seed=1)
                per_replica = await placement_counts(c)
                held, rss = sampler.peak()
                lines += h.report("no budget", free)
                per_core = free.calls / cpu if cpu else 0.0
                lines.append(
                    f"  peak Lean per replica {h.mib(held)} ({h.mib(rss)} resident summed), workspaces per replica "
                    f"{per_replica}; CPU {cpu:.1f} s of Beam and Lean: {per_core:.0f} calls per core-second"
                )
                say(lines[-len(free.table()) - 3 :])
                report["no_budget"] = {"peak_held": held, "peak_rss": rss, "calls_per_core_second": per_core}
                report["no_budget"] |= {"tools": free.table(), "throughput": free.throughput()}
                workspace_bytes = held / max(max(per_replica.values()), 1)

                # without a budget no document is evicted, so every version an agent holds stays valid: any
                # refusal, move or error a client sees during the restart is a failed call
                rolling, finished = h.Restarts(), anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(h.rolling_restart, c, rolling, finished)
                    calm, _ = await phase(
                        c, workspaces, prof.agents, DEADLINE[name], strict=True, seed=4, stop=finished
                    )
            lines += h.report(f"rolling restart of {len(rolling.done)} replicas (SIGTERM, one at a time)", calm)
            lines.append(f"  failed calls {len(calm.failed)}: {calm.failed[:5]}")
            say(lines[-len(calm.table()) - 3 :])
            report["rolling_restart"] = {"calls": calm.calls, "failed": len(calm.failed), "tools": calm.table()}
            assert [code for _, code in rolling.done] == [0] * prof.replicas, rolling.done
            assert calm.failed == [], calm.failed

        # 3-4. a budget that holds about half of a replica's share of the workspaces; then random drains
        share = prof.workspaces / prof.replicas
        budget = max(int(workspace_bytes * max(share * BUDGET_SHARE, 1) / MIB), 1)
        limit = max(budget * MIB, prof.agents * workspace_bytes) + workspace_bytes
        # A drain sends every agent of the draining replica to the other one at once: each may open a workspace
        # there before the survivor's next measurement lets it evict, not one between two rounds.
        drain_limit = max(budget * MIB, prof.agents * workspace_bytes) + prof.agents * workspace_bytes
        lines.append(
            f"budget {budget} MiB per replica (about {share * BUDGET_SHARE:.1f} of {share:.0f} workspaces of "
            f"W = {h.mib(workspace_bytes)}); allowed peak max(budget, {prof.agents} agents x W) + W = {h.mib(limit)}"
        )
        say(lines[-1])
        report["budget_mib"] = budget
        report["allowed_peak_bytes"] = limit
        report["workspace_bytes"] = workspace_bytes
        async with cluster(prof.replicas, lean_cmd, env=env, extra_args=server_args(budget)) as c:
            sampler = h.cluster_sampler(c)
            async with h.sampling(sampler):
                tight, _ = await phase(c, workspaces, prof.agents, prof.phase, seed=2)
                lines += h.report("budget", tight)
                evictions = sampler.total_evictions()
                peak = sampler.peak(tight.started)
                lines.append(
                    f"  evictions {evictions}; peak Lean per replica {h.mib(peak[0])} ({h.mib(peak[1])} summed)"
                )
                say(lines[-len(tight.table()) - 3 :])
                assert evictions > 0, "the budget phase evicted nothing: the budget does not bind"

                restarts = h.Restarts()
                until = time.monotonic() + prof.chaos
                async with anyio.create_task_group() as tg:
                    tg.start_soon(h.chaos, c, until, prof.chaos_every, random.Random(3), restarts)
                    stormy, _ = await phase(c, workspaces, prof.agents, prof.chaos, seed=3)
                lines += h.report(f"chaos ({len(restarts.done)} drains and restarts)", stormy)
                stormy_held = sampler.peak(stormy.started)[0]
                lines.append(
                    f"  peak Lean per replica {h.mib(stormy_held)}, allowed while a drain moves every agent at once "
                    f"{h.mib(drain_limit)}"
                )
                say(lines[-len(stormy.table()) - 3 :])
                assert restarts.done and all(code == 0 for _, code in restarts.done), restarts.done
                assert stormy_held <= drain_limit, f"a replica's Lean reached {h.mib(stormy_held)} in the chaos"

            held, rss = sampler.peak(tight.started, stormy.started)
            total_evictions = sampler.total_evictions()
            lines.append(
                f"budget {budget} MiB: peak Lean per replica {h.mib(held)} held ({h.mib(rss)} resident summed) "
                f"outside the chaos, allowed {h.mib(limit)}; evictions {total_evictions}"
            )
            say(lines[-1])
            report["budget"] = {"peak_held": held, "peak_rss": rss, "evictions": total_evictions}
            report["budget"] |= {"tools": tight.table(), "throughput": tight.throughput()}
            report["chaos"] = {"tools": stormy.table(), "retries": dict(stormy.retries), "restarts": len(restarts.done)}
            assert held <= limit, f"a replica's Lean reached {h.mib(held)}, over {h.mib(limit)}"

        wrong: list[str] = []
        if prof.sweep_workspaces:
            report["sweep"] = await sweep(prof, lean_cmd, env, workspaces, budget, wrong)
            plot(report["sweep"], out_dir / "load.png")
            lines.append(f"plots: {out_dir / 'load.png'}")
            lines.append(f"sweeps: wrong answers {len(wrong)}: {wrong[:5]}")
            say(lines[-1])
    (out_dir / "load-report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "load-report.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    say(f"report: {out_dir / 'load-report.txt'}")
    assert not wrong, f"the sweeps saw wrong answers: {wrong[:10]}"


async def sweep(
    prof: Profile,
    lean_cmd: list[str],
    env: dict[str, str],
    workspaces: list[h.Workspace],
    budget: int,
    wrong: list[str],
) -> dict[str, Any]:
    """Peak Lean memory and p99 of one replica against the number of workspaces and of agents, with and without
    the budget (the plots' data). Wrong and lost answers go to `wrong` (the lane fails on them once its report
    and plots are written)."""
    out: dict[str, Any] = {"budget_mib": budget, "workspaces": [], "agents": []}
    fixed_agents = prof.sweep_agents[len(prof.sweep_agents) // 2]
    fixed_workspaces = prof.sweep_workspaces[-1]
    for limit in (None, budget):
        for axis, values in (("workspaces", prof.sweep_workspaces), ("agents", prof.sweep_agents)):
            for value in values:
                m, k = (value, fixed_agents) if axis == "workspaces" else (fixed_workspaces, value)
                async with cluster(1, lean_cmd, env=env, extra_args=server_args(limit)) as c:
                    sampler = h.cluster_sampler(c)
                    await h.agents(c.url, workspaces[:m], k, 0, seed=value, warm=True)
                    async with h.sampling(sampler):
                        stats = await h.agents(c.url, workspaces[:m], k, prof.sweep_phase, seed=value, check=False)
                    wrong += [f"{axis}={value} budget={limit}: {w}" for w in stats.wrong + stats.lost]
                    held, rss = sampler.peak()
                row = {"value": value, "budget": limit, "peak_held": held, "peak_rss": rss, "p99_ms": stats.p99()}
                row |= {"throughput": stats.throughput(), "evictions": sampler.total_evictions()}
                row |= {"wrong": len(stats.wrong), "lost": len(stats.lost), "calls": stats.calls}
                out[axis].append(row)
                say(f"sweep {axis}={value} budget={limit}: peak {h.mib(held)}, p99 {stats.p99():.0f} ms")
    return out


def plot(data: dict[str, Any], path: Path) -> None:
    """Resident memory and p99 against workspaces and agents, with and without the budget (matplotlib: the load
    lane's own dependency, imported here only)."""
    import importlib

    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    budget = data["budget_mib"]
    for col, axis in enumerate(("workspaces", "agents")):
        for limit, style in ((None, "o-"), (budget, "s--")):
            rows = [r for r in data[axis] if r["budget"] == limit]
            xs = [r["value"] for r in rows]
            label = f"budget {budget} MiB" if limit else "no budget"
            axes[0][col].plot(xs, [r["peak_held"] / MIB for r in rows], style, label=label)
            axes[1][col].plot(xs, [r["p99_ms"] for r in rows], style, label=label)
        axes[0][col].axhline(budget, color="grey", linewidth=0.8, linestyle=":")
        axes[0][col].set_ylabel("peak Lean memory held by the replica (MiB)")
        axes[1][col].set_ylabel("p99 latency, all tools (ms)")
        for row in (0, 1):
            axes[row][col].set_xlabel(f"number of {axis}")
            axes[row][col].legend()
            axes[row][col].grid(alpha=0.3)
            axes[row][col].set_ylim(bottom=0)
    fig.suptitle("lean-beam-mcp, one replica, real Lean 4.35 (demo project): load lane sweeps")
    fig.savefig(path, dpi=90)
    plt.close(fig)
