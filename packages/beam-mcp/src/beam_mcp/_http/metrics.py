"""What `GET /metrics` answers: the replica's metrics in Prometheus text format, with `prometheus_client`.

This module owns the metric names (the Grafana dashboard in `deploy/grafana/` is built on them) and how they are
made: call counts by tool and outcome and their latency histograms are `prometheus_client` metrics fed by the
broker's call listener; everything that is a state (calls in flight and waiting, workspaces, open documents,
resident memory of the Lean trees, the budget) or a count the broker keeps (evictions, Lean restarts, refused
calls) is read from `McpServer.broker_status()` at scrape time by a collector. Each endpoint has its own
registry, so nothing is global. It must not do I/O beyond what `broker_status()` reads (memory: the broker's
last measurement, never a new one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from beam_mcp.server import McpServer

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Seconds: a warm hover answers in milliseconds, a sync of a large file or a save in tens of seconds."""

NAMES: Final = (
    "beam_calls_total",
    "beam_call_duration_seconds",
    "beam_calls_in_flight",
    "beam_calls_waiting",
    "beam_calls_rejected_total",
    "beam_workspaces",
    "beam_open_documents",
    "beam_lean_resident_bytes",
    "beam_lean_resident_bytes_all",
    "beam_memory_budget_bytes",
    "beam_evictions_total",
    "beam_lean_restarts_total",
    "beam_ready",
    "beam_draining",
)
"""Every metric family this endpoint exposes (counters with their `_total` sample name)."""


class Metrics:
    """The metrics of one endpoint: a registry of its own, fed by `server`'s call listener and its status."""

    def __init__(self, server: McpServer) -> None:
        """Register the call metrics and the status collector; start listening to calls."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "beam_calls",
            "Tool calls that ended, by tool and outcome (success, or the error code: busy, contentModified, ...)",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "beam_call_duration_seconds",
            "Time from a tool call's arrival at the broker to its answer (refused calls included)",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StatusCollector(server))
        server.observe_calls(self.observe)

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        """Count one finished call."""
        self.calls.labels(tool, outcome).inc()
        self.latency.labels(tool).observe(seconds)

    def call_counts(self) -> list[tuple[tuple[str, str], float]]:
        """Calls by (tool, outcome), sorted: the `beam_calls_total` samples."""
        samples = [sample for family in self.calls.collect() for sample in family.samples]
        return sorted(
            ((s.labels["tool"], s.labels["outcome"]), s.value) for s in samples if s.name == "beam_calls_total"
        )

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)


class _StatusCollector(Collector):
    """The broker's state at scrape time (nothing but zeros while the broker loads)."""

    def __init__(self, server: McpServer) -> None:
        self.server = server

    def describe(self) -> list[Metric]:
        return []  # unchecked: the families depend on what the broker reports

    def collect(self) -> Iterator[Metric]:
        status: dict[str, Any] = self.server.broker_status() or {}
        lanes = status.get("lanes") or {}
        in_flight = GaugeMetricFamily(
            "beam_calls_in_flight", "Tool calls admitted and running, by lane", labels=["lane"]
        )
        waiting = GaugeMetricFamily("beam_calls_waiting", "Tool calls waiting for a slot, by lane", labels=["lane"])
        for lane in ("cheap", "heavy"):
            counts = lanes.get(lane) or {}
            in_flight.add_metric([lane], counts.get("in_flight", 0))
            waiting.add_metric([lane], counts.get("waiting", 0))
        yield in_flight
        yield waiting
        rejected = CounterMetricFamily(
            "beam_calls_rejected", "Tool calls refused before they ran, by reason (busy, draining)", labels=["reason"]
        )
        for reason, count in (status.get("rejections") or {}).items():
            rejected.add_metric([reason], count)
        yield rejected
        workspaces = status.get("workspaces") or []
        yield GaugeMetricFamily(
            "beam_workspaces", "Workspace runtimes open (each with its Lean server)", len(workspaces)
        )
        documents = GaugeMetricFamily("beam_open_documents", "Source documents open in Lean", labels=["workspace"])
        resident = GaugeMetricFamily(
            "beam_lean_resident_bytes",
            "Resident memory of a workspace's Lean process tree (server, file workers, probe mirrors)",
            labels=["workspace", "toolchain"],
        )
        for ws in workspaces:
            documents.add_metric([ws["root"]], ws["openDocuments"])
            resident.add_metric([ws["root"], ws["toolchain"] or ""], ws["residentBytes"])
        yield documents
        yield resident
        yield GaugeMetricFamily(
            "beam_lean_resident_bytes_all", "Resident memory of every Lean process tree", status.get("residentBytes", 0)
        )
        budget = status.get("memoryBudgetBytes")
        yield GaugeMetricFamily(
            "beam_memory_budget_bytes", "The memory budget of the Lean trees (0: none)", budget if budget else 0
        )
        evictions = CounterMetricFamily(
            "beam_evictions",
            "Evictions, by kind (document, workspace) and reason (memory, idle)",
            labels=["kind", "reason"],
        )
        for each in status.get("evictions") or []:
            evictions.add_metric([each["kind"], each["reason"]], each["count"])
        yield evictions
        yield CounterMetricFamily(
            "beam_lean_restarts", "Lean servers restarted after they died", status.get("sessionRestarts", 0)
        )
        yield GaugeMetricFamily("beam_ready", "1 while the replica takes calls (readiness)", int(self.server.ready))
        yield GaugeMetricFamily("beam_draining", "1 while the replica drains", int(self.server.draining))
