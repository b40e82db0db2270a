"""Per-workspace counters: Lean sessions started and restarted, worker exits, and per-operation outcomes.

Owns the `byBackend.lean` shape of `stats()` (upstream's field names, hence the camelCase). Plain data: no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .errors import INVALID_PARAMS, REQUEST_CANCELLED, WORKER_EXITED

SUCCESS = "success"


@dataclasses.dataclass
class OpMetrics:
    """Outcomes and latencies of one operation key."""

    count: int = 0
    successCount: int = 0
    errorCount: int = 0
    cancelledCount: int = 0
    workerExitedCount: int = 0
    invalidParamsCount: int = 0
    totalLatencyMs: float = 0.0
    maxLatencyMs: float = 0.0
    lastLatencyMs: float = 0.0

    def wire(self) -> dict[str, Any]:
        """The JSON shape (average instead of total)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "totalLatencyMs"}
        out["avgLatencyMs"] = round(self.totalLatencyMs / self.count, 3) if self.count else 0.0
        return out


@dataclasses.dataclass
class Metrics:
    """Counters of one workspace runtime."""

    sessionStarts: int = 0
    sessionRestarts: int = 0
    workerExits: int = 0
    ops: dict[str, OpMetrics] = dataclasses.field(default_factory=dict)

    def record(self, key: str, outcome: str, latency_ms: float) -> None:
        """Count one finished call: `outcome` is `SUCCESS` or the error code it ended with."""
        op = self.ops.setdefault(key, OpMetrics())
        op.count += 1
        op.totalLatencyMs += latency_ms
        op.lastLatencyMs = round(latency_ms, 3)
        op.maxLatencyMs = round(max(op.maxLatencyMs, latency_ms), 3)
        if outcome == SUCCESS:
            op.successCount += 1
            return
        op.errorCount += 1
        if outcome == REQUEST_CANCELLED:
            op.cancelledCount += 1
        elif outcome == WORKER_EXITED:
            op.workerExitedCount += 1
            self.workerExits += 1
        elif outcome == INVALID_PARAMS:
            op.invalidParamsCount += 1

    def wire(self) -> dict[str, Any]:
        """The `byBackend.lean` JSON."""
        totals = {
            "requestCount": sum(o.count for o in self.ops.values()),
            "successCount": sum(o.successCount for o in self.ops.values()),
            "errorCount": sum(o.errorCount for o in self.ops.values()),
            "cancelledCount": sum(o.cancelledCount for o in self.ops.values()),
            "workerExitedCount": sum(o.workerExitedCount for o in self.ops.values()),
            "invalidParamsCount": sum(o.invalidParamsCount for o in self.ops.values()),
        }
        return {
            "sessionStarts": self.sessionStarts,
            "sessionRestarts": self.sessionRestarts,
            "workerExits": self.workerExits,
            **totals,
            "ops": {k: v.wire() for k, v in sorted(self.ops.items())},
        }
