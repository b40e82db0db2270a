"""The public API of beam-feedback beyond what `tests/test_layout.py` checks of every package."""

from __future__ import annotations

import subprocess
import sys

import beam_feedback


def test_importing_the_errors_does_not_load_the_report_machinery() -> None:
    # The MCP server imports `beam_feedback.errors` at start; reports load when a report is built.
    code = "import sys, beam_feedback.errors; print(sorted(m for m in sys.modules if m.startswith('beam_feedback')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['beam_feedback', 'beam_feedback.__about__', 'beam_feedback.errors']"


def test_the_version_matches_the_about_module() -> None:
    from beam_feedback.__about__ import __version__

    assert beam_feedback.__version__ == __version__
