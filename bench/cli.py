"""`lean-beam` from a shell: what a warm call through the daemon costs, split into process start and round trip.

One daemon serves the built demo project on the lane's real Lean (`BEAM_TEST_TOOLCHAIN`, default lean435), with
`Demo/Proofs.lean` synced and hovered once (warm). Then, interleaved round by round so noise hits all alike:

- `python -c pass`: the interpreter alone;
- `python -c "import beam_broker"`: plus the package (the registry, pydantic and the models);
- `lean-beam --version`: the console script up to its parser (imports, parser built from the registry);
- `lean-beam hover Demo/Proofs.lean:4:31` (JSON into a pipe): the warm call as a person types it, which is the
  `update` step then the hover, through the daemon;
- the same with `--version N`: the hover alone;
- inside this process, the client's daemon round trips alone (`_cli.daemon_client.request`): `update` + `hover`, and
  `hover` with a version.

It prints each median (and p90) and the split: process start (the `--version` run) against the round trips.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from bench._common import built_project

T = TypeVar("T")
ROUNDS = 15
HOVER = "Demo/Proofs.lean:4:31"


def lean_beam() -> list[str]:
    """The installed console script (what a person runs), else `python -m beam_broker.cli`."""
    script = Path(sys.executable).with_name("lean-beam")
    return [str(script)] if script.exists() else [sys.executable, "-m", "beam_broker.cli"]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return elapsed


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (a timed child process) off the event loop; the timing happens inside it."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def line(label: str, samples: list[float]) -> str:
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else samples[0]
    return f"cli {label}: median {statistics.median(samples) * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms (n={len(samples)})"


async def main() -> None:
    from beam_broker._cli import daemon_client as client

    with tempfile.TemporaryDirectory(prefix="beam-bench-cli-", dir="/tmp") as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        state = Path(tmp) / "state"
        state.mkdir()
        env = {**tc.env(), "XDG_RUNTIME_DIR": str(state)}
        env.pop("BEAM_LEAN_SERVER_CMD", None)
        cli = lean_beam()
        await blocking(timed, [*cli, "-q", "daemon", "start"], root, env)
        try:
            for first in (["sync", "Demo/Proofs.lean"], ["hover", HOVER]):
                await blocking(timed, [*cli, "-q", *first], root, env)
            paths = client.paths_for(str(root), env)
            ws: dict[str, Any] = {"workspace": {"root": str(root)}}
            version = (await client.request(paths, "update", {**ws, "path": "Demo/Proofs.lean"}))["result"]["version"]
            at = {**ws, "path": "Demo/Proofs.lean", "line": 3, "character": 30}

            async def round_trip_fresh() -> None:
                answer = await client.request(paths, "update", {**ws, "path": "Demo/Proofs.lean"})
                await client.request(paths, "hover", {**at, "version": answer["result"]["version"]})

            async def round_trip_versioned() -> None:
                await client.request(paths, "hover", {**at, "version": version})

            processes: dict[str, Callable[[], float]] = {
                "python -c pass": lambda: timed([sys.executable, "-c", "pass"], root, env),
                "python -c 'import beam_broker'": lambda: timed(
                    [sys.executable, "-c", "import beam_broker"], root, env
                ),
                "lean-beam --version": lambda: timed([*cli, "--version"], root, env),
                f"lean-beam hover {HOVER} (warm, daemon)": lambda: timed([*cli, "-q", "hover", HOVER], root, env),
                f"lean-beam hover {HOVER} --version {version}": lambda: timed(
                    [*cli, "-q", "hover", HOVER, "--version", str(version)], root, env
                ),
            }
            trips = {
                "round trip update+hover (in the client)": round_trip_fresh,
                "round trip hover --version (in the client)": round_trip_versioned,
            }
            samples: dict[str, list[float]] = {name: [] for name in [*processes, *trips]}
            for _ in range(3):  # warm-up
                for fn in processes.values():
                    await blocking(fn)
                for trip in trips.values():
                    await trip()
            for i in range(ROUNDS):
                order = list(processes.items()) if i % 2 == 0 else list(reversed(processes.items()))
                for name, fn in order:
                    samples[name].append(await blocking(fn))
                for name, trip in trips.items():
                    t0 = time.perf_counter()
                    await trip()
                    samples[name].append(time.perf_counter() - t0)
            for name, values in samples.items():
                print(line(name, values), flush=True)
            median = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
            start, warm = median["lean-beam --version"], median[f"lean-beam hover {HOVER} (warm, daemon)"]
            rtt = median["round trip update+hover (in the client)"]
            print(
                f"cli split of a warm hover: {warm:.1f} ms = process start {start:.1f} ms (interpreter "
                f"{median['python -c pass']:.1f} ms) + daemon round trips {rtt:.1f} ms + the rest "
                f"{warm - start - rtt:.1f} ms",
                flush=True,
            )
        finally:
            await blocking(subprocess.run, [*cli, "-q", "daemon", "stop"], cwd=root, env=env, capture_output=True)
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("BEAM_TEST_TOOLCHAIN", "lean435")
    anyio.run(main)
