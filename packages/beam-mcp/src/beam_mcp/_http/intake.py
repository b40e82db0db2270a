"""Capacity for request bodies in flight: a bounded pool in which the oldest body makes way for a newer one.

This module owns the rule that keeps slow clients from monopolising the endpoint while they send their bodies:
at most `max_receiving` requests may be receiving a body at once, each for at most `body_deadline` seconds, and
a request that needs a slot when all are taken evicts the one that has been receiving longest. A client that
sends its body with its head holds a slot for a moment, so a newcomer always gets in, and trickling clients can
only evict one another. Peers are not told apart: on a loopback endpoint (or behind a proxy) every client is one
peer. It must not do I/O or speak HTTP (`wire.py` reads bodies inside a slot and answers an eviction).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import anyio

log = logging.getLogger("beam_mcp.http")


class Slot:
    """One body being received: cancelled when it is evicted or its deadline passes.

    Attributes:
        scope: Cancelled on eviction, and at the body's deadline.
        evicted: Whether a newer request took the slot.
    """

    def __init__(self, deadline: float) -> None:
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + deadline)
        self.evicted = False

    def evict(self) -> None:
        """Give the slot up for a newer request: the body's read is cancelled."""
        self.evicted = True
        self.scope.cancel()


class Intake:
    """The request bodies being received by one endpoint.

    Attributes:
        limit: Bodies received at once (at least one).
        deadline: Seconds one body may take in all.
        evictions: How many bodies were evicted so far.
    """

    def __init__(self, limit: int, deadline: float) -> None:
        self.limit = max(limit, 1)
        self.deadline = deadline
        self.evictions = 0
        self._receiving: dict[Slot, None] = {}  # oldest first

    @property
    def receiving(self) -> int:
        """Bodies being received now."""
        return len(self._receiving)

    @contextlib.contextmanager
    def slot(self) -> Iterator[Slot]:
        """Receive one body in the block, evicting the oldest body in flight when every slot is taken.

        The block is cancelled (and the cancellation absorbed) when the slot is evicted or its deadline passes:
        check `slot.scope.cancelled_caught` after it.
        """
        while len(self._receiving) >= self.limit:
            oldest = next(iter(self._receiving))
            del self._receiving[oldest]
            oldest.evict()
            self.evictions += 1
            log.info("evicted a slow request body (%d bodies may arrive at once)", self.limit)
        slot = Slot(self.deadline)
        self._receiving[slot] = None
        try:
            with slot.scope:
                yield slot
        finally:
            self._receiving.pop(slot, None)
