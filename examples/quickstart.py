"""Ten lines of beam-lsp: a file's diagnostics and a proof's goal (`python examples/quickstart.py ROOT [SERVER...]`)."""

import sys

from beam_lsp import Point1, SyncLeanClient

root, *server = sys.argv[1:]
with SyncLeanClient.start(server or ["lake", "serve"], cwd=root, timeout=120) as lean:
    goals = lean.file("Demo/Goals.lean")
    goals.open()
    for diagnostic in goals.sync().diagnostics:
        print(goals.point1(diagnostic.range.start), diagnostic.message)
    print(goals.plain_goal(Point1(5, 3)))
