"""The Grafana dashboard in `deploy/grafana/` is built on the names `/metrics` exposes, and nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path

from beam_mcp._http.metrics import NAMES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "lean-beam-mcp.json"
SUFFIXES = ("_bucket", "_count", "_sum")


def test_every_panel_queries_only_metrics_the_endpoint_exposes_and_every_metric_is_shown() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    used: set[str] = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            for name in re.findall(r"\bbeam_[a-z_]+", target["expr"]):
                base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)
                assert base in NAMES, f"{panel['title']}: {name} is not exposed"
                used.add(base)
    assert used == set(NAMES)
