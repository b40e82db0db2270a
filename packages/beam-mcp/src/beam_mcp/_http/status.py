"""What `GET /` answers: a small HTML status page for people, with no JavaScript.

This module owns the page: the replica's state (ready, draining, uptime, memory against the budget), each workspace
(its root, toolchain, resident memory, open documents, calls in flight and waiting, idle time), calls by tool and
outcome, and the latest evictions and errors. Every number is the one `/metrics` exposes at the same moment (the
same `broker_status()` and the same counters). Text from workspaces (paths) is escaped. The page refreshes itself
with a `<meta http-equiv="refresh">`. It must not do I/O or know HTTP.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING, Any

from beam_mcp.__about__ import __version__
from beam_mcp._protocol import SERVER_NAME

if TYPE_CHECKING:
    from beam_mcp.server import McpServer

    from .metrics import Metrics

REFRESH_SECONDS = 5
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; } .ok { color: #176f2c; } .bad { color: #a4161a; }
"""


def _mib(value: Any) -> str:
    return f"{(value or 0) / 2**20:.0f} MiB"


def _row(*cells: Any, numeric: tuple[int, ...] = ()) -> str:
    out = []
    for i, cell in enumerate(cells):
        css = ' class="n"' if i in numeric else ""
        out.append(f"<td{css}>{html.escape(str(cell))}</td>")
    return "<tr>" + "".join(out) + "</tr>"


def _table(headers: list[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f"<p>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def page(server: McpServer, metrics: Metrics) -> bytes:
    """The status page as UTF-8 HTML."""
    status: dict[str, Any] = server.broker_status() or {}
    ready = server.ready
    state = "ready" if ready else "draining" if server.draining else "not ready"
    budget = status.get("memoryBudgetBytes")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        f"<title>{SERVER_NAME} status</title><style>{STYLE}</style></head><body>",
        f"<h1>{SERVER_NAME} {html.escape(__version__)}</h1>",
        f'<p id="state">State: <span class="{"ok" if ready else "bad"}">{state}</span>'
        f" &middot; up {status.get('uptimeMs', 0) // 1000} s"
        f" &middot; Lean memory <span id=resident>{_mib(status.get('residentBytes'))}</span>"
        f" of budget <span id=budget>{_mib(budget) if budget else 'none'}</span>"
        f" &middot; Lean restarts {status.get('sessionRestarts', 0)}</p>",
    ]
    lanes = status.get("lanes") or {}
    lane_rows = [
        _row(
            lane, (lanes.get(lane) or {}).get("in_flight", 0), (lanes.get(lane) or {}).get("waiting", 0), numeric=(1, 2)
        )
        for lane in ("cheap", "heavy")
    ]
    parts += ["<h2>Calls now</h2>", _table(["lane", "in flight", "waiting"], lane_rows, "")]
    ws_rows = [
        _row(
            ws["root"],
            ws["toolchain"] or "configured command",
            _mib(ws["residentBytes"]),
            ws["openDocuments"],
            ws["callsInFlight"],
            ws["callsWaiting"],
            f"{ws['idleSeconds']:g} s",
            numeric=(2, 3, 4, 5, 6),
        )
        for ws in status.get("workspaces") or []
    ]
    parts += [
        f"<h2>Workspaces ({len(ws_rows)})</h2>",
        _table(
            ["root", "toolchain", "memory", "open documents", "in flight", "waiting", "idle"],
            ws_rows,
            "No workspace is open.",
        ),
    ]
    call_rows = [_row(tool, outcome, int(count), numeric=(2,)) for (tool, outcome), count in metrics.call_counts()]
    parts += ["<h2>Calls by tool</h2>", _table(["tool", "outcome", "calls"], call_rows, "No calls yet.")]
    counts = status.get("evictions") or []
    count_rows = [_row(e["kind"], e["reason"], e["count"], numeric=(2,)) for e in counts]
    recent_rows = [
        _row(_when(e["at"]), e["kind"], e["reason"], e["path"] or e["root"], _mib(e["bytes"]), numeric=(4,))
        for e in status.get("recentEvictions") or []
    ]
    parts += [
        "<h2>Evictions</h2>",
        _table(["kind", "reason", "count"], count_rows, "No evictions."),
        _table(["when", "kind", "reason", "what", "memory"], recent_rows, ""),
    ]
    error_rows = [_row(_when(e["at"]), e["tool"], e["code"], e["root"] or "") for e in status.get("recentErrors") or []]
    parts += ["<h2>Recent errors</h2>", _table(["when", "tool", "code", "workspace"], error_rows, "No errors.")]
    parts.append("</body></html>")
    return "\n".join(parts).encode("utf-8")
