"""Measuring a process tree's resident memory from /proc: the root, every process below it, file workers by URI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from beam_broker import _memory as memory

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc on this system: trees measure 0")

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "--worker", sys.argv[1]],
                         stdin=subprocess.PIPE)
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
        child = int(parent.stdout.readline())
        try:
            usage = memory.measure(parent.pid)
            assert set(memory.descendants(parent.pid)) == {parent.pid, child}
            assert usage.processes == 2
            assert list(usage.documents) == [uri]
            assert 0 < usage.documents[uri] < usage.total
            assert memory.worker_uri(parent.pid) is None
        finally:
            parent.stdin.close()
            parent.wait()
    assert memory.measure(parent.pid).total == 0  # gone: nothing resident


def test_no_process_measures_nothing() -> None:
    assert memory.measure(None) == memory.TreeUsage()
