"""Admission control: a bound on calls in flight, globally and per workspace, in two lanes, and draining.

Owns who may run now. Every workspace-scoped call takes a slot of its lane in its workspace, then one of the lane
in the whole broker; without a free slot it waits (first come, first served) at most `admission_wait` seconds,
then fails with `busy` (nothing ran: safe to retry, `data.retryAfterMs` says when). The two lanes are the
starvation rule: *heavy* calls (whole-file barriers, Lake builds, batches: `OperationSpec.heavy`) have slots of
their own, so however many of them queue, a cheap call (hover, goals, a probe) only ever waits for other cheap
calls. While draining every new call fails at once with `busy`, `data.reason = "draining"`. Plain anyio
primitives and counters: no Lean, no I/O.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Literal

import anyio

from beam_broker.config import BrokerConfig
from beam_broker.errors import BUSY, BrokerError

Lane = Literal["cheap", "heavy"]
LANES: tuple[Lane, ...] = ("cheap", "heavy")
DRAIN_RETRY_MS = 1000
"""The retry hint of a call refused while draining: by then a balancer has taken the replica out."""


@dataclasses.dataclass
class _Slots:
    """One bounded set of slots: a FIFO-fair semaphore and its limit."""

    limit: int
    semaphore: anyio.Semaphore

    @classmethod
    def of(cls, limit: int) -> _Slots:
        return cls(limit, anyio.Semaphore(limit))

    @property
    def idle(self) -> bool:
        stats = self.semaphore.statistics()
        return self.semaphore.value == self.limit and stats.tasks_waiting == 0


@dataclasses.dataclass
class LaneCounts:
    """Calls of one lane now: admitted and running, and waiting for a slot."""

    in_flight: int = 0
    waiting: int = 0


class Admission:
    """The admission state of one broker (see the module doc)."""

    def __init__(self, config: BrokerConfig) -> None:
        """Slots from `config`'s limits."""
        self.config = config
        self.draining = False
        self.lanes: dict[Lane, LaneCounts] = {lane: LaneCounts() for lane in LANES}
        self.by_workspace: dict[tuple[Lane, str], LaneCounts] = {}
        self.rejected: dict[str, int] = {}
        """Calls refused, by reason (`busy`: no slot in time; `draining`)."""
        self._global = {"cheap": _Slots.of(config.max_calls), "heavy": _Slots.of(config.max_heavy_calls)}
        self._workspace: dict[tuple[Lane, str], _Slots] = {}

    def _limits(self, lane: Lane) -> tuple[int, int]:
        if lane == "heavy":
            return self.config.max_heavy_calls, self.config.max_workspace_heavy_calls
        return self.config.max_calls, self.config.max_workspace_calls

    def counts(self, key: str) -> LaneCounts:
        """Calls in flight and waiting in one workspace, both lanes together."""
        out = LaneCounts()
        for lane in LANES:
            each = self.by_workspace.get((lane, key))
            if each is not None:
                out.in_flight += each.in_flight
                out.waiting += each.waiting
        return out

    def _refuse(self, reason: str, message: str, data: dict[str, object]) -> BrokerError:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        return BrokerError(BUSY, message, {"reason": reason, **data})

    @contextlib.asynccontextmanager
    async def admit(self, key: str, root: str, lane: Lane) -> AsyncIterator[None]:
        """Hold a slot of `lane` in workspace `key` and in the broker for the block.

        Raises:
            BrokerError: `busy` when no slot was free within `admission_wait` (`data.scope` says which bound was
                full: `workspace` or `global`), or at once while draining.
        """
        if self.draining:
            raise self._refuse(
                "draining",
                "this Beam server is draining (shutting down): the call was not run; retry it (a load balancer "
                "sends it to another replica)",
                {"retryAfterMs": DRAIN_RETRY_MS},
            )
        global_limit, workspace_limit = self._limits(lane)
        slots = self._workspace.get((lane, key))
        if slots is None:
            slots = self._workspace[(lane, key)] = _Slots.of(workspace_limit)
        counts = self.by_workspace.setdefault((lane, key), LaneCounts())
        held: list[_Slots] = []
        scope = "workspace"
        counts.waiting += 1
        self.lanes[lane].waiting += 1
        try:
            with anyio.move_on_after(self.config.admission_wait):
                await slots.semaphore.acquire()
                held.append(slots)
                scope = "global"
                await self._global[lane].semaphore.acquire()
                held.append(self._global[lane])
        finally:
            counts.waiting -= 1
            self.lanes[lane].waiting -= 1
            if len(held) < 2:  # timed out or cancelled: after the counts, so an idle workspace's table goes
                self._release(held, lane, key)
        if len(held) < 2:
            limit = workspace_limit if scope == "workspace" else global_limit
            where = f"in workspace {root}" if scope == "workspace" else "in this Beam server"
            raise self._refuse(
                "busy",
                f"Beam is busy: {limit} {lane} calls are already running {where}, and no slot came free within "
                f"{self.config.admission_wait:g} s; nothing was run: retry later",
                {"scope": scope, "lane": lane, "limit": limit, "retryAfterMs": self._retry_ms()},
            )
        counts.in_flight += 1
        self.lanes[lane].in_flight += 1
        try:
            yield
        finally:
            counts.in_flight -= 1
            self.lanes[lane].in_flight -= 1
            self._release(held, lane, key)

    def _retry_ms(self) -> int:
        return max(100, int(self.config.admission_wait * 1000))

    def _release(self, held: list[_Slots], lane: Lane, key: str) -> None:
        for slots in held:
            slots.semaphore.release()
        held.clear()
        mine = self._workspace.get((lane, key))
        counts = self.by_workspace.get((lane, key))
        if mine is not None and mine.idle and (counts is None or counts.in_flight == counts.waiting == 0):
            # a workspace's slots live while it has calls: the table does not grow with every root ever seen
            del self._workspace[(lane, key)]
            self.by_workspace.pop((lane, key), None)
