"""The `attempts` operation: several alternative texts at one position of a document version, each answered alone.

Owns: settling the mode and the basis once (as `run_at` does), then running the alternatives on the mirror the
call checked out plus the spare mirrors free at once (`MirrorPool.spares`, within the per-document bound),
concurrently, and answering each one as `run_at` would, in the order of the texts (with a handle per success when
asked). Cost stays independent of the file's tail: every probe is a truncated mirror.

Each document version costs Lean about 3.5 ms of CPU whatever it holds (it parses the header again, walks its
snapshots, relays through the watchdog), so alternatives that can be answered from one version
(`_probe_text.shareable`: commands that cannot see each other, a name several declare renamed in all but the
first; tactics in copies of the enclosing declaration) run up to `PER_VERSION` to a mirror version, one group of
consecutive ones per mirror (`run.run_batch`); any other batch, and a group whose answer cannot be split per
alternative, runs one probe per alternative (`run.run_probe`).

Scheduling: each mirror takes the next waiting group. When none is waiting, a mirror that is done may help a group
that has been running on another mirror for more than twice the batch's mean time per group so far (a mirror that
had to start its Lean worker, or elaborate a long prefix first): the first of the two runs to finish answers it,
the other is cancelled. So a cold spare mirror never makes a batch slower than running it on the warm mirror
alone, and it is warm for the next batch. It never touches the source document.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

import anyio

from beam_broker import _probe_text as probe
from beam_broker._call import Call
from beam_lsp import Position

from . import models as pm
from .run import Outcome, mint, proof_mode, run_batch, run_probe

if TYPE_CHECKING:
    from beam_broker._mirrors import Mirror

T = TypeVar("T")
Run = Callable[["Mirror", int], Awaitable[T]]
"""`run(mirror, index)`: work item `index` (a group of alternatives) on `mirror`."""

PER_VERSION: Final = 8
"""Alternatives one shared version holds before a batch spreads over more mirrors (at most one per CPU).

A second version costs Lean its ~3.3 ms of CPU again, about what several more small alternatives cost in one
version; and on a machine whose cores are busy (agents run several Lean processes), a second mirror is no faster.
"""

HELP_AFTER: Final = 2.0
"""A mirror with nothing left to do helps a group running longer than this many mean times per group."""


async def attempts(call: Call, inp: pm.AttemptsInput) -> pm.AttemptsResult:
    """Run every text at the position on its own; one attempt per text, in order."""
    client, doc = await call.checked(inp)
    text_doc = client.document(doc.uri)
    pos = Position(line=inp.line, character=inp.character)
    text_doc.validate(pos)
    source = text_doc.text
    pool = call.runtime.pool(doc.uri)
    async with pool.checkout(probe.declaration_text(text_doc, pos)) as first:
        proof = await proof_mode(call, client, doc, pos, first)
        basis = probe.proof_basis(text_doc, pos) if proof else probe.command_basis(text_doc, pos)

        texts = list(inp.texts)
        start = probe.declaration_start(text_doc, pos)
        shared = probe.shareable(texts, basis, source, start)
        wanted = min(-(-len(texts) // PER_VERSION), _cores()) if shared else len(texts)
        async with pool.spares(source[: basis.prefix_end], wanted - 1) as spares:
            mirrors = [first, *spares]
            groups = _groups(len(texts), len(mirrors) if shared else len(texts))

            async def run(mirror: Mirror, index: int) -> list[Outcome]:
                members = [texts[i] for i in groups[index]]
                if len(members) > 1:
                    together = await run_batch(call, client, doc, mirror, source, basis, members, start)
                    if together is not None:
                        return together
                return [await run_probe(call, client, doc, mirror, source, basis, [text]) for text in members]

            outcomes = [o for group in await run_all(mirrors, len(groups), run) for o in group]
    found: list[pm.Attempt] = []
    for text, outcome in zip(inp.texts, outcomes, strict=True):
        handle = mint(call, doc, basis, (text,)) if inp.handles and outcome.success else None
        found.append(
            pm.Attempt(
                success=outcome.success,
                messages=outcome.messages,
                traces=outcome.traces,
                proof_state=outcome.proof_state,
                next_handle=handle,
            )
        )
    mode = cast(Any, basis.mode)  # `proof` or `command` (`probe.Basis`)
    return pm.AttemptsResult(workspace=call.workspace, version=doc.version, mode=mode, attempts=found)


def _cores() -> int:
    """CPUs this process may run on: more groups than that only adds versions for Lean to elaborate."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _groups(count: int, mirrors: int) -> list[list[int]]:
    """Alternatives `0..count-1` in `mirrors` runs of consecutive ones, as even as can be (none empty)."""
    n = min(count, mirrors)
    size, extra = divmod(count, n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(n)]


@dataclasses.dataclass
class _Batch(Generic[T]):
    """The shared state of one batch: what waits, what runs where since when, what is answered."""

    waiting: list[int]
    results: list[T | None]
    running: dict[int, list[tuple[anyio.CancelScope, float]]] = dataclasses.field(default_factory=dict)
    durations: list[float] = dataclasses.field(default_factory=list)
    failure: Exception | None = None
    answered: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    """Set (and replaced) whenever an alternative is answered."""

    def answer(self, index: int, outcome: T, took: float) -> None:
        self.results[index] = outcome
        self.durations.append(took)
        self.answered.set()
        self.answered = anyio.Event()

    def helpable(self, now: float) -> tuple[int | None, float]:
        """An alternative running alone for long enough to help (or None), and how long until the next one is.

        Nothing is helpable before a first answer gives the batch a mean time per alternative.
        """
        soonest = float("inf")
        if not self.durations:
            return None, soonest
        limit = HELP_AFTER * sum(self.durations) / len(self.durations)
        for index, runs in self.running.items():
            if self.results[index] is not None or len(runs) != 1:
                continue
            wait = runs[0][1] + limit - now
            if wait <= 0:
                return index, 0.0
            soonest = min(soonest, wait)
        return None, soonest


async def run_all(mirrors: Sequence[Mirror], count: int, run: Run[T]) -> list[T]:
    """Run work items `0..count-1` on `mirrors` concurrently (see the module docstring); their outcomes in order.

    The first failure (a dead server fails every probe) cancels the rest and is raised alone.
    """
    batch: _Batch[T] = _Batch(list(range(count)), [None] * count)
    async with anyio.create_task_group() as tg:
        for mirror in mirrors:
            tg.start_soon(_work, batch, mirror, run, tg.cancel_scope)
    if batch.failure is not None:
        raise batch.failure
    return [outcome for outcome in batch.results if outcome is not None]


async def _work(batch: _Batch[T], mirror: Mirror, run: Run[T], group: anyio.CancelScope) -> None:
    """One mirror's share of a batch: waiting alternatives first, then help for slow ones, until all are answered."""
    while True:
        if batch.waiting:
            index = batch.waiting.pop(0)
        else:
            found, wait = batch.helpable(time.monotonic())
            if found is None:
                if wait == float("inf"):
                    return
                answered = batch.answered
                with anyio.move_on_after(wait):  # until that run is slow enough to help, or something is answered
                    await answered.wait()
                continue
            index = found
        started = time.monotonic()
        with anyio.CancelScope() as scope:
            runs = batch.running.setdefault(index, [])
            runs.append((scope, started))
            try:
                outcome = await run(mirror, index)
            except Exception as exc:
                if batch.failure is None:
                    batch.failure = exc
                group.cancel()
                return
            finally:
                runs.remove((scope, started))
        if scope.cancelled_caught or batch.results[index] is not None:
            continue  # another mirror answered it first
        batch.answer(index, outcome, time.monotonic() - started)
        for other, _ in list(runs):
            other.cancel()
