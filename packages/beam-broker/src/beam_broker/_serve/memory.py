"""Resident memory of a Lean process tree, read from `/proc` (Linux): the server and every process below it.

Owns how Beam measures what a workspace's Lean costs: the tree under the server process Beam started (`lake serve`
and its `lean --server` watchdog, whose children are the file workers, one per open document or probe mirror),
what each process holds, and which document each file worker serves (the `file://` URI Lean passes on the
worker's command line, spelled as Beam sent it: percent-encoded, checked on real Lean 4.35).

What a tree holds is its processes' *anonymous* resident memory (`/proc/<pid>/statm`: resident minus
file-backed; the heap where elaboration grows), summed, plus its *file-backed* resident pages (Lean's shared
library, the mapped `.olean` files) counted once, as the largest process's. Every Lean process maps the same
library and, within a workspace, mostly the same `.olean` files, so summing each process's resident set counts
those pages once per process: measured on the demo project, a worker is 105-108 MiB resident of which 87-90 MiB
are file-backed and shared, so the plain sum overstated a four-process tree (server, two documents, a probe
mirror) 2.7 times (430 MiB against 160 MiB proportional), and it would overstate a Mathlib workspace, whose every
worker maps gigabytes of `.olean` files, about as many times as it has workers. What closing one document frees is
its worker's anonymous memory (its file pages stay mapped by the others), which is what the budget's plan
counts. `statm` is what keeps this cheap (about 13 us per process; the exact proportional figure in
`smaps_rollup` costs about 1.6 ms per Lean process, walking every mapping). A measurement reads a few small files
per process and never blocks on anything but `/proc`. Elsewhere (no `/proc`) every tree measures 0 and nothing is
evicted for memory. Plain functions: no state, no Lean I/O.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
WORKER_FLAG = "--worker"


@dataclasses.dataclass(frozen=True)
class TreeUsage:
    """One process tree's resident memory.

    Attributes:
        total: What the tree holds: every process's anonymous resident bytes plus the largest file-backed resident
            set among them (the pages they share, counted once; see the module doc). The budget bounds this.
        processes: How many processes the tree has.
        documents: Anonymous resident bytes of each file worker, by the document URI it serves (probe mirrors
            included): what closing it frees.
        rss: Every process's resident set summed (shared pages counted in each), for reference.
    """

    total: int = 0
    processes: int = 0
    documents: dict[str, int] = dataclasses.field(default_factory=dict)
    rss: int = 0


@dataclasses.dataclass
class Occupancy:
    """What the memory budget and the idle timeout know of one workspace runtime.

    Attributes:
        in_flight: Calls running on it (the broker counts them; an eviction never takes a runtime in use).
        last_active: `time.monotonic()` of the last call's start or end.
        evicting: Chosen for eviction: a call that finds it set opens a new runtime instead.
        usage: The last measurement of its Lean tree.
    """

    in_flight: int = 0
    last_active: float = dataclasses.field(default_factory=time.monotonic)
    evicting: bool = False
    usage: TreeUsage = dataclasses.field(default_factory=TreeUsage)


def _children(pid: int) -> list[int] | None:
    """The children of every thread of `pid` (`/proc/<pid>/task/*/children`); None where the kernel lacks it."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                out += [int(word) for word in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # no CONFIG_PROC_CHILDREN: scan every process instead
        except (OSError, ValueError):
            continue
    return out


def _parents() -> dict[int, list[int]]:
    """Every process's children, from each process's parent in `/proc/<pid>/stat` (the slow way)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
        if len(fields) > 1 and fields[1].isdigit():
            tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def descendants(pid: int) -> Iterator[int]:
    """`pid` and every process below it (each once; processes that end meanwhile may or may not be listed)."""
    seen: set[int] = set()
    todo = [pid]
    slow: dict[int, list[int]] | None = None
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        kids = _children(current) if slow is None else slow.get(current, [])
        if kids is None:
            slow = _parents()
            kids = slow.get(current, [])
        todo += kids


def resident(pid: int) -> tuple[int, int]:
    """Bytes resident in one process: anonymous, and file-backed (or shared memory); (0, 0) once it has ended."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            words = f.read().split()
        rss, shared = int(words[1]) * PAGE_SIZE, int(words[2]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0, 0
    return max(rss - shared, 0), shared


def worker_uri(pid: int) -> str | None:
    """The document URI a Lean file worker serves (`lean --worker ... file:///...`), else None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().decode("utf-8", errors="replace").split("\0")
    except OSError:
        return None
    if WORKER_FLAG not in words:
        return None
    return next((w for w in reversed(words) if w.startswith("file://")), None)


def measure(pid: int | None) -> TreeUsage:
    """The resident memory of the tree under `pid` (an empty usage for None or where `/proc` is missing)."""
    if pid is None or not os.path.isdir("/proc"):
        return TreeUsage()
    anonymous = files = rss = processes = 0
    documents: dict[str, int] = {}
    for each in descendants(pid):
        anon, mapped = resident(each)
        if anon == mapped == 0:
            continue  # ended meanwhile (or a zombie): it holds nothing
        anonymous += anon
        files = max(files, mapped)
        rss += anon + mapped
        processes += 1
        uri = worker_uri(each) if each != pid else None
        if uri is not None:
            documents[uri] = documents.get(uri, 0) + anon
    return TreeUsage(anonymous + files, processes, documents, rss)
