"""Run every benchmark (`python -m bench [name ...]`)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio

from bench import (
    ab,
    attempts,
    broker_overhead,
    cli,
    cpu,
    freshness,
    http_load,
    lsp_overhead,
    lsp_peers,
    mcp_overhead,
    peers,
    peers_compat,
    speculation,
)

BENCHES: dict[str, Callable[[], Awaitable[object]]] = {
    "lsp_overhead": lsp_overhead.main,
    "lsp_peers": lsp_peers.main,
    "broker_overhead": broker_overhead.main,
    "mcp_overhead": mcp_overhead.main,
    "speculation": speculation.main,
    "http_load": http_load.main,
    "peers": peers.main,
    "peers_compat": peers_compat.main,
    "cpu": cpu.main,
    "cli": cli.main,
    "attempts": attempts.main,
    "freshness": freshness.main,
    "ab": ab.main,
}


def main() -> None:
    names = sys.argv[1:] or list(BENCHES)
    for name in names:
        print(f"== {name}", flush=True)
        anyio.run(BENCHES[name])


if __name__ == "__main__":
    main()
