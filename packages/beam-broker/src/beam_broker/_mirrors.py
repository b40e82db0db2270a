"""Probe mirrors: the private documents speculative probes run in, pooled per source document.

Each source document gets at most `limit` mirrors (URIs beside the source, never written to disk); each one is
a Lean file worker of its own. A probe checks a mirror out (`async with pool.checkout() as mirror`): probes on
one mirror are serialized, concurrent probes use the other mirrors or queue on the least contended one. Idle
mirrors are closed by the runtime's reaper. A mirror remembers the text it holds, so a position request that
needs the same text again sends nothing but the request, and an edit of the source is applied to the mirror
probed last (`follow`; unless a probe writes that mirror within `FOLLOW_DELAY`), so the first probe after an edit
finds Lean done with it. A batch of probes (`lean_attempts`) holds one mirror checked out and whatever `spares`
finds free at once. This module never decides what a probe's text is (`_probe_text`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from beam_lsp import common_prefix

from . import _outbound as outbound
from ._documents import header_imports, header_text

if TYPE_CHECKING:
    from beam_lsp import LeanClient, Redactor

    from ._documents import Loaded
    from ._freshness import Freshness

SCRATCH = "_beamScratch.lean"
"""The `run_code` scratch document's name under a workspace root (never on disk; its mirrors are
`_beamScratch_beamProbe<k>`; `_probes/scratch.py` runs texts in it, the runtime may start it ahead)."""
SPLIT_CHARS = 8192
"""A probe that would make the best idle mirror re-elaborate more source than this gets a new mirror (if allowed)."""
FOLLOW_CHARS = 65536
"""A source edit is applied to a mirror (`follow`) only when its copy of the source is at most this long: each new
version of a mirror costs Lean a walk over every declaration before the change, edited or not."""
FOLLOW_DELAY = 0.05
"""Seconds a source edit waits before it is applied to the mirror probed last. A probe sent within them (a
`lean_run_at` right after `lean_update`, or one that read the edited file itself) puts the edit and the probe in
one mirror version; following at once would make Lean elaborate two versions back to back (measured: 1.5x a
settled probe at once without following, 2.0x with). An agent that takes longer finds the edit done."""


def is_mirror_path(path: str) -> bool:
    """Whether a path or URI names a private probe mirror (never a user document; `_outbound` owns the test)."""
    return outbound.names_mirror(path)


@dataclasses.dataclass
class Mirror:
    """One private mirror document (a Lean file worker of its own), and the text it holds in Lean."""

    uri: str
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)
    opened: bool = False
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    waiting: int = 0
    text: str | None = None
    header: str | None = None
    writes: int = 0
    """How many versions were sent to Lean (a follow whose mirror was written meanwhile gives way)."""
    loaded: Loaded | None = None
    """What its worker loaded for its imports (when a write started it; None: not known)."""

    @property
    def idle(self) -> bool:
        """Nobody holds or waits for it."""
        return not self.lock.locked() and self.waiting == 0


def _shared(a: str | None, b: str | None) -> int:
    """The length of the beginning `a` and `b` share (`beam_lsp.common_prefix`; 0 when either is missing)."""
    return common_prefix(a, b) if a and b else 0


def _cost(mirror: Mirror, text: str | None) -> int:
    """What putting `text` in a mirror costs Lean, in characters.

    What it elaborates anew (counted twice), plus how much longer or shorter the mirror's text gets: dropping a
    long elaborated tail is not free either, and a mirror holding a text of another length is better kept for
    probes there.
    """
    held, wanted = mirror.text or "", text or ""
    return 2 * (len(wanted) - _shared(held, wanted)) + abs(len(held) - len(wanted))


async def write(
    client: LeanClient, mirror: Mirror, text: str, *, freshness: Freshness | None = None
) -> tuple[int, bool]:
    """Put `text` in the mirror: didOpen the first time, didChange (no didSave) after.

    When this starts the mirror's worker (an open, or a new header, which Lean answers with a new worker),
    `freshness` notes what that worker loads for its imports (`Mirror.loaded`).

    Returns:
        The mirror's new version, and whether Lean keeps the header it had (a change that leaves the imports
        alone: only then may the caller take the reported barrier, see `LeanClient.sync`).
    """
    header = header_text(text)
    kept = mirror.opened and header == mirror.header
    if not kept and freshness is not None:
        mirror.loaded = await freshness.loading(header_imports(text))
    if mirror.opened:
        version = await client.change(mirror.uri, text, save=False)
    else:
        version = await client.open(mirror.uri, text)
        mirror.opened = True
    mirror.text, mirror.header = text, header
    mirror.writes += 1
    return version, kept


async def show(client: LeanClient, mirror: Mirror, text: str, *, freshness: Freshness | None = None) -> None:
    """Make the mirror hold `text` (nothing is sent when it already does and its worker did not fail)."""
    if not mirror.opened or mirror.text != text or client.cache.document_progress(mirror.uri).fatal:
        await write(client, mirror, text, freshness=freshness)


async def restart(client: LeanClient, mirror: Mirror) -> None:
    """Close the mirror's worker in Lean; the next write opens it again (and its worker loads the imports anew)."""
    await _close(client, mirror)
    mirror.opened, mirror.text, mirror.header, mirror.loaded = False, None, None, None


async def warm(client: LeanClient, pool: MirrorPool, header: str, freshness: Freshness, redactor: Redactor) -> None:
    """Open a mirror of `pool` (the scratch document's: `BrokerConfig.warm_scratch`) holding `header`.

    Its worker starts and loads the imports; a probe text with the same header is then a change of an open
    document, which keeps the worker and its imports (a new header is a new worker: about 200 ms for the demo
    project, seconds with Mathlib). Never raises: it is a background task, and a failure is only logged (redacted).
    """
    try:
        async with pool.checkout(header) as mirror:
            if not mirror.opened:  # a probe got there first
                await show(client, mirror, header, freshness=freshness)
    except Exception as exc:  # a background task must not take the runtime (and its Lean) down
        outbound.log_failure(logging.getLogger(__name__), redactor, exc, "opening %s ahead failed", pool.source_uri)


def followed(held: str, old: str, new: str) -> str | None:
    """The text a mirror holding `held` (a copy of `old`'s beginning, then a probe) holds with `old` -> `new` applied.

    None when the edit does not touch the copied beginning (the mirror's text stays right as it is), reaches past
    it, or would cost Lean much: more than `SPLIT_CHARS` of the copy to elaborate again, or a copy longer than
    `FOLLOW_CHARS` to walk.
    """
    copied = _shared(held, old)
    start = _shared(old, new)
    if start >= copied or copied > FOLLOW_CHARS or copied - start > SPLIT_CHARS:
        return None
    kept = copied + len(new) - len(old)  # where the copy ends in `new` if the edit lies inside it
    if kept < 0 or old[copied:] != new[kept:]:
        return None  # the edit reaches past the copy
    return new[:kept] + held[copied:]


async def follow(client: LeanClient, pool: MirrorPool, old: str, new: str, *, delay: float = 0) -> bool:
    """Apply a source edit to the mirror probed last after `delay` seconds, for Lean to elaborate before a probe.

    The next probe most likely comes near the last one, so only the most recently used mirror follows, and only
    when it is idle (else it is its probe's), nothing was written to it during the delay (a probe took it and
    sent its own text), the edit lies inside its copy of the source, keeps the header and costs Lean little
    (`followed`). A mirror holding nothing but a copy of the source (goals, hover) follows at once: the text it
    gets is the one the next question there needs, which then sends nothing new. Nothing waits for Lean.
    Returns whether the mirror was changed.
    """
    opened = [m for m in pool.mirrors if m.opened and m.text is not None]
    if not opened:
        return False
    mirror = max(opened, key=lambda m: m.last_used)
    writes = mirror.writes
    if delay > 0 and not old.startswith(mirror.text or ""):  # a probe after the copy: one sent now rewrites it
        await anyio.sleep(delay)
    if mirror.writes != writes or mirror not in pool.mirrors:
        return False
    text = followed(mirror.text or "", old, new)
    if not mirror.idle or text is None or header_text(text) != mirror.header:
        return False
    mirror.lock.acquire_nowait()
    try:
        await write(client, mirror, text)
    finally:
        mirror.lock.release()
    return True


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

    def _slot(self, text: str | None) -> Mirror:
        """The mirror for a probe whose text will be `text`: an idle one, a new one, or one to wait for.

        Lean re-elaborates a mirror from the first character its text changes at, and forgets what came after:
        so among the idle mirrors the one whose text is closest to `text` (`_cost`) is taken. When that
        would still re-elaborate more than `SPLIT_CHARS` of `text` and the pool has room, a new mirror is made
        instead (a worker start, cheaper than that much elaboration), so that probes alternating between distant
        positions of a long file keep one warm mirror each.
        """
        idle = [m for m in self.mirrors if not m.lock.locked()]
        if idle:
            best = min(idle, key=lambda m: _cost(m, text))
            full = len(self.mirrors) >= self.limit
            if full or text is None or best.text is None or len(text) - _shared(best.text, text) <= SPLIT_CHARS:
                return best
        if len(self.mirrors) < self.limit:
            return self._new()
        return min(self.mirrors, key=lambda m: m.waiting)

    def _new(self) -> Mirror:
        # Never reuse a URI: a closed mirror's didClose may still be on its way to Lean.
        self._created += 1
        mirror = Mirror(self.mirror_uri(self._created))
        self.mirrors.append(mirror)
        return mirror

    @contextlib.asynccontextmanager
    async def checkout(self, text: str | None = None) -> AsyncIterator[Mirror]:
        """Hold a mirror for one probe (waiting for it when every mirror is busy).

        Args:
            text: What the probe will put in the mirror (or its beginning), to pick the mirror Lean has the
                most of already elaborated.
        """
        mirror = self._slot(text)
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

    @contextlib.asynccontextmanager
    async def spares(self, text: str | None, most: int) -> AsyncIterator[list[Mirror]]:
        """Hold up to `most` more mirrors for a batch of probes, never waiting: only mirrors free right now.

        Idle mirrors come first, the one holding the text closest to `text` first (`_cost`), then new ones within
        the limit. The caller already holds one mirror (`checkout`); mirrors busy with other probes are left to
        them, so a batch never queues behind another call for its extra mirrors.
        """
        taken: list[Mirror] = []
        try:
            while len(taken) < most:
                idle = [m for m in self.mirrors if m.idle]
                if idle:
                    mirror = min(idle, key=lambda m: _cost(m, text))
                elif len(self.mirrors) < self.limit:
                    mirror = self._new()
                else:
                    break
                mirror.lock.acquire_nowait()
                taken.append(mirror)
            yield taken
        finally:
            for mirror in taken:
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
