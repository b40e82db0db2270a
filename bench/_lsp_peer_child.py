"""One round of `bench lsp_peers` for one client, in its own process: prints one JSON object of measurements.

Run by `bench/lsp_peers.py` as `python _lsp_peer_child.py beam|leanclient ROOT LEAN N`, with beam-lsp's Python for
`beam` and the throwaway peer venv's Python for `leanclient` (so this file imports only the standard library at
module level). Both clients run `LEAN --server -Dserver.reportDelayMs=0` in ROOT (the environment the driver
gives: `LEAN_PATH`, `LEAN_SRC_PATH`) and are asked the same things through their path-and-code-point API
(beam-lsp's `LeanFile`, leanclient's `AsyncLeanLSPClient`):

- `hover` / `goal`: N sequential requests on `Demo/Goals.lean` after 200 warm-up hovers (requests per second, and
  the client process's CPU per request: `*_cpu_us`);
- `pipelined`: N hovers with 8 in flight (8 workers, N / 8 each), likewise;
- `open50`: open the 50 files `Demo/Open*.lean` and wait until Lean has finished all of them (seconds), and the
  messages the client read from Lean meanwhile (`open50_messages`: a client that returns on `waitForDiagnostics`
  reads the rest of Lean's notifications for those files later);
- `long`: open `Demo/Long.lean` (1500 declarations) and wait until Lean has finished it: the client process's
  CPU seconds (user + system, this process only) and the messages it received from Lean meanwhile;
- `rss_kib`: the process's resident memory at the end (`VmRSS`) and its peak (`VmHWM`).

With `BEAM_BENCH_CALLGRIND_DUMP=1` (the driver runs this process under `valgrind --tool=callgrind`) callgrind's
counters are dumped after the warm-up and after each of `hover`, `goal`, `pipelined`, `open50` and `long`
(`callgrind_control -d`), so each dump holds that phase's instructions alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

GOALS = "Demo/Goals.lean"
HOVER = (3, 15)  # `p` of `(p : Prop)`: at `open1` (3, 9) this prelude file has no hover, Lean answers null
GOAL = (3, 43)  # after `by`
WORKERS = 8


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _memory() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0])
    return out


CALLGRIND = bool(os.environ.get("BEAM_BENCH_CALLGRIND_DUMP"))


def _mark(label: str) -> None:
    """Under callgrind, dump its counters (they restart from zero), so the next dump is one phase's."""
    if CALLGRIND:
        subprocess.run(["callgrind_control", "-d", label, str(os.getpid())], capture_output=True, check=False)


def _files(root: str, prefix: str) -> list[str]:
    return sorted(f"Demo/{name}" for name in os.listdir(os.path.join(root, "Demo")) if name.startswith(prefix))


async def beam(root: str, cmd: list[str], n: int) -> dict[str, Any]:
    import anyio

    from beam_lsp import LeanClient, Point0

    out: dict[str, Any] = {}
    async with LeanClient.start(cmd, cwd=root) as client:
        doc = client.file(GOALS)
        await doc.open()
        await doc.sync()
        for _ in range(200):
            await doc.hover(Point0(*HOVER))
        _mark("warm")
        for name, call in (
            ("hover", lambda: doc.hover(Point0(*HOVER))),
            ("goal", lambda: doc.plain_goal(Point0(*GOAL))),
        ):
            t0, cpu0 = time.perf_counter(), _cpu()
            for _ in range(n):
                await call()
            out[name], out[f"{name}_cpu_us"] = n / (time.perf_counter() - t0), (_cpu() - cpu0) / n * 1e6
            _mark(name)

        async def worker() -> None:
            for _ in range(n // WORKERS):
                await doc.hover(Point0(*HOVER))

        t0, cpu0 = time.perf_counter(), _cpu()
        async with anyio.create_task_group() as tg:
            for _ in range(WORKERS):
                tg.start_soon(worker)
        out["pipelined"] = n // WORKERS * WORKERS / (time.perf_counter() - t0)
        out["pipelined_cpu_us"] = (_cpu() - cpu0) / (n // WORKERS * WORKERS) * 1e6
        _mark("pipelined")

        received = client._rpc  # counted by the JSON-RPC peer (`messages_received`), outside the public API
        files = [client.file(rel) for rel in _files(root, "Open")]
        before, t0 = received.messages_received, time.perf_counter()
        for f in files:
            await f.open()
        async with anyio.create_task_group() as tg:
            for f in files:
                tg.start_soon(f.sync)
        out["open50"] = time.perf_counter() - t0
        out["open50_messages"] = received.messages_received - before
        _mark("open50")

        long = client.file("Demo/Long.lean")
        before, cpu0, t0 = received.messages_received, _cpu(), time.perf_counter()
        await long.open()
        result = await long.sync()
        assert result.complete, result
        messages = received.messages_received - before
        out["long"] = {"cpu": _cpu() - cpu0, "messages": messages, "seconds": time.perf_counter() - t0}
        _mark("long")
    out.update(_memory())
    return out


async def leanclient(root: str, cmd: list[str], n: int) -> dict[str, Any]:
    import asyncio
    import importlib

    aio: Any = importlib.import_module("leanclient.aio")  # only in the peer's venv
    out: dict[str, Any] = {}
    # max_workers: by default it keeps at most 4 files open on this machine (LRU), and open_many of 50 then fails.
    client = aio.AsyncLeanLSPClient(root, server_command=cmd, max_workers=64)
    await client.start()
    try:
        received = 0
        dispatch = client._transport._dispatch  # counted here, outside the client: a bench-only hook

        def counting(msg: dict[str, Any]) -> None:
            nonlocal received
            received += 1
            dispatch(msg)

        client._transport._dispatch = counting
        await client.open(GOALS)
        for _ in range(200):
            await client.hover(GOALS, *HOVER)
        _mark("warm")
        calls: tuple[tuple[str, Callable[[], Awaitable[Any]]], ...] = (
            ("hover", lambda: client.hover(GOALS, *HOVER)),
            ("goal", lambda: client.goal(GOALS, *GOAL)),
        )
        for name, call in calls:
            t0, cpu0 = time.perf_counter(), _cpu()
            for _ in range(n):
                await call()
            out[name], out[f"{name}_cpu_us"] = n / (time.perf_counter() - t0), (_cpu() - cpu0) / n * 1e6
            _mark(name)

        async def worker() -> None:
            for _ in range(n // WORKERS):
                await client.hover(GOALS, *HOVER)

        t0, cpu0 = time.perf_counter(), _cpu()
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        out["pipelined"] = n // WORKERS * WORKERS / (time.perf_counter() - t0)
        out["pipelined_cpu_us"] = (_cpu() - cpu0) / (n // WORKERS * WORKERS) * 1e6
        _mark("pipelined")

        before, t0 = received, time.perf_counter()
        await client.open_many(_files(root, "Open"))
        out["open50"] = time.perf_counter() - t0
        out["open50_messages"] = received - before
        _mark("open50")

        before, cpu0, t0 = received, _cpu(), time.perf_counter()
        await client.open("Demo/Long.lean")
        out["long"] = {"cpu": _cpu() - cpu0, "messages": received - before, "seconds": time.perf_counter() - t0}
        _mark("long")
    finally:
        await client.close()
    out.update(_memory())
    return out


def main() -> None:
    which, root, lean, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cmd = [lean, "--server", "-Dserver.reportDelayMs=0"]
    if which == "beam":
        import anyio

        result = anyio.run(beam, root, cmd, n)
    else:
        import asyncio

        result = asyncio.run(leanclient(root, cmd, n))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
