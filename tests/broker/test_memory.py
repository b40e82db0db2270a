"""Measuring a process tree's resident memory from /proc: the root, every process below it, file workers by URI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from beam_broker._serve import memory

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc on this system: trees measure 0")

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()",
                          "--worker", sys.argv[1]], stdin=subprocess.PIPE)
print(child.pid, flush=True)
sys.stdin.read()
child.stdin.close()
child.wait()
"""


def test_a_tree_is_measured_whole_and_its_file_workers_by_the_uri_they_serve() -> None:
    uri = "file:///work/project/A.lean"
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, uri], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None and parent.stdin is not None
        # the child's pid, and its word that it runs (until then its command line may still be empty: exec)
        lines = {parent.stdout.readline().strip(), parent.stdout.readline().strip()}
        child = int(next(line for line in lines if line.isdigit()))
        assert "ready" in lines
        try:
            usage = memory.measure(parent.pid)
            assert set(memory.descendants(parent.pid)) == {parent.pid, child}
            assert usage.processes == 2
            assert list(usage.documents) == [uri]
            assert 0 < usage.documents[uri] < usage.total
            # both map the interpreter's files: counted once in the total, in each process in the plain sum
            assert usage.total < usage.rss
            assert memory.worker_uri(parent.pid) is None
        finally:
            parent.stdin.close()
            parent.wait()
    assert memory.measure(parent.pid).total == 0  # gone: nothing resident


def test_no_process_measures_nothing() -> None:
    assert memory.measure(None) == memory.TreeUsage()


def test_a_tree_holds_its_anonymous_memory_and_its_shared_file_pages_once(monkeypatch: pytest.MonkeyPatch) -> None:
    mib = 1024 * 1024
    held = {1: (20 * mib, 90 * mib), 2: (18 * mib, 89 * mib), 3: (30 * mib, 95 * mib), 4: (0, 0)}  # 4: ended
    monkeypatch.setattr(memory, "descendants", lambda pid: iter([1, 2, 3, 4]))
    monkeypatch.setattr(memory, "resident", lambda pid: held[pid])
    monkeypatch.setattr(memory, "worker_uri", lambda pid: {2: "file:///a", 3: "file:///b"}.get(pid))
    usage = memory.measure(1)
    assert usage == memory.TreeUsage(
        total=(20 + 18 + 30 + 95) * mib,
        processes=3,
        documents={"file:///a": 18 * mib, "file:///b": 30 * mib},  # what closing each frees
        rss=(110 + 107 + 125) * mib,
    )
