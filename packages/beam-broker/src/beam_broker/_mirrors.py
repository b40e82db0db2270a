"""Probe mirrors: the private documents speculative probes run in, pooled per source document.

Each source document gets at most `limit` mirrors (URIs beside the source, never written to disk); each one is
a Lean file worker of its own. A probe checks a mirror out (`async with pool.checkout() as mirror`): probes on
one mirror are serialized, concurrent probes use the other mirrors or queue on the least contended one. Idle
mirrors are closed by the runtime's reaper. This module never decides what a probe's text is (`_probe`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from beam_lsp import LeanClient

_MIRROR = re.compile(r"_beamProbe\d+\.lean$")


def is_mirror_path(path: str) -> bool:
    """Whether a path or URI names a private probe mirror (never a user document)."""
    return bool(_MIRROR.search(path))


@dataclasses.dataclass
class Mirror:
    """One private mirror document (a Lean file worker of its own)."""

    uri: str
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)
    opened: bool = False
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    waiting: int = 0

    @property
    def idle(self) -> bool:
        """Nobody holds or waits for it."""
        return not self.lock.locked() and self.waiting == 0


async def _close(client: LeanClient | None, mirror: Mirror) -> None:
    if mirror.opened and client is not None and client.exited is None:
        await client.close(mirror.uri)
        client.cache.forget(mirror.uri)


@dataclasses.dataclass
class MirrorPool:
    """The mirrors of one source document: at most `limit`, probes on one mirror serialized."""

    source_uri: str
    limit: int
    mirrors: list[Mirror] = dataclasses.field(default_factory=list)
    _created: int = 0

    def mirror_uri(self, k: int) -> str:
        """A private URI beside the source: `<Stem>_beamProbe<k>.lean` (a valid module name, never on disk)."""
        path = Path(self.source_uri.removeprefix("file://"))
        stem = path.stem.replace(".", "_")
        return f"file://{path.parent.as_posix()}/{stem}_beamProbe{k}.lean"

    def _slot(self) -> Mirror:
        """An idle mirror, a new one (under the limit), or the least contended one to wait for."""
        for mirror in self.mirrors:
            if not mirror.lock.locked():
                return mirror
        if len(self.mirrors) < self.limit:
            # Never reuse a URI: a closed mirror's didClose may still be on its way to Lean.
            self._created += 1
            mirror = Mirror(self.mirror_uri(self._created))
            self.mirrors.append(mirror)
            return mirror
        return min(self.mirrors, key=lambda m: m.waiting)

    @contextlib.asynccontextmanager
    async def checkout(self) -> AsyncIterator[Mirror]:
        """Hold a mirror for one probe (waiting for it when every mirror is busy)."""
        mirror = self._slot()
        mirror.waiting += 1
        try:
            await mirror.lock.acquire()
        finally:
            mirror.waiting -= 1
        try:
            yield mirror
        finally:
            mirror.last_used = time.monotonic()
            mirror.lock.release()

    async def close_all(self, client: LeanClient | None) -> None:
        """Close every open mirror in Lean and forget them."""
        mirrors, self.mirrors = self.mirrors, []
        for mirror in mirrors:
            await _close(client, mirror)

    async def close_idle(self, client: LeanClient | None, idle_seconds: float) -> None:
        """Close mirrors unused for `idle_seconds` (each holds a Lean worker process)."""
        now = time.monotonic()
        expired = [m for m in self.mirrors if m.idle and now - m.last_used >= idle_seconds]
        self.mirrors = [m for m in self.mirrors if m not in expired]
        for mirror in expired:
            await _close(client, mirror)
