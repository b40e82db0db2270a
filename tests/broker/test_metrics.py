"""Per-workspace metrics: outcomes by error code, latencies, totals."""

from __future__ import annotations

from beam_broker import errors as codes
from beam_broker._metrics import SUCCESS, Metrics


def test_outcomes_are_counted_by_kind_and_worker_exits_are_totalled() -> None:
    metrics = Metrics()
    metrics.record("sync_file", SUCCESS, 10.0)
    metrics.record("sync_file", codes.WORKER_EXITED, 30.0)
    metrics.record("hover", codes.REQUEST_CANCELLED, 1.0)
    metrics.record("hover", codes.INVALID_PARAMS, 2.0)
    metrics.record("hover", codes.CONTENT_MODIFIED, 3.0)
    wire = metrics.wire()
    assert (wire["requestCount"], wire["successCount"], wire["errorCount"]) == (5, 1, 4)
    assert (wire["cancelledCount"], wire["workerExitedCount"], wire["invalidParamsCount"]) == (1, 1, 1)
    assert wire["workerExits"] == 1 and list(wire["ops"]) == ["hover", "sync_file"]
    sync = wire["ops"]["sync_file"]
    assert (sync["avgLatencyMs"], sync["maxLatencyMs"], sync["lastLatencyMs"]) == (20.0, 30.0, 30.0)
    assert "totalLatencyMs" not in sync
