"""Draining one endpoint: when the answers in progress are done and the balancer has stopped sending.

This module owns when a drain is over: once no answer is in progress (listen and GET streams aside: they are not
waited for) and no request has come for `linger` seconds, or at the deadline. The linger is what keeps a rolling
restart from failing calls: a balancer that has not yet seen readiness turn false keeps sending, and each request
(refused with a retryable 503, or taken because it starts no work: a cancel, a DELETE) starts the linger again, so
the socket never closes under a connection it would reset unanswered (a 502 the balancer may not retry). It knows
no HTTP: the endpoint tells it what came and what it answers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import anyio


class Drain:
    """One endpoint's drain: whether it drains, the answers in progress, the last request that came.

    Attributes:
        linger: Seconds without a request after which a drain whose answers are done is over.
        draining: Whether a drain has begun (readiness is false from then on).
    """

    def __init__(self, linger: float) -> None:
        self.linger = linger
        self.draining = False
        self._requested_at = 0.0  # `time.monotonic()` of the last request that came while draining or stopping
        self._answering = 0
        self._quiet = anyio.Event()
        self._quiet.set()

    def requested(self) -> None:
        """A request came while draining or stopping (refused, or taken as it starts no work): the linger restarts."""
        self._requested_at = time.monotonic()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """One answer in progress, which a drain waits for."""
        self._answering += 1
        if self._answering == 1:
            self._quiet = anyio.Event()
        try:
            yield
        finally:
            self._answering -= 1
            if self._answering == 0:
                self._quiet.set()

    async def run(self, deadline: float) -> None:
        """Begin draining; return once the answers in progress are done and the linger is over, or at `deadline`."""
        self.draining = True
        self.requested()
        with anyio.move_on_after(deadline):
            while True:  # a timer whose end each request moves further, once nothing is being answered
                await self._quiet.wait()
                left = self._requested_at + self.linger - time.monotonic()
                if left <= 0 and self._answering == 0:
                    break
                await anyio.sleep(max(left, 0))
