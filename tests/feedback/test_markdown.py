"""beam_feedback._markdown: the paste-ready report card (section order, optional sections, safe fences)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from beam_feedback import build_report
from tests.feedback.helpers import minimal_input

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


def _workspace(project: Path) -> dict[str, str]:
    return {"root": str(project)}


def test_markdown_sections_come_in_the_documented_order(project: Path, env: dict[str, str]) -> None:
    data = minimal_input(
        workspace=_workspace(project),
        kind="perf",
        impact="Agents stall.",
        workaround="Restart the server.",
        request={"method": "lean_hover"},
        response={"error": "timeout"},
        evidence=[{"name": "log.txt", "content": "line 1"}],
        include_collected=True,
    )
    markdown = build_report(data, env=env, now=NOW).markdown
    headings = re.findall(r"^#{1,3} .*$", markdown, flags=re.MULTILINE)
    assert headings == [
        "# Hover never answers",
        "## Summary",
        "## Beam Runtime",
        "## Reproduction",
        "## Expected Behavior",
        "## Actual Behavior",
        "## Impact",
        "## Beam Debug Context",
        "## Request And Response",
        "### Request",
        "### Response",
        "## Evidence",
        "### log.txt",
        "## Workaround",
    ]
    assert "Review before posting publicly" in markdown
    assert "Beam does not submit feedback automatically." in markdown
    assert "- Kind: `perf`" in markdown
    assert "- Lean toolchain: `leanprover/lean4:v4.9.0`" in markdown
    assert "- Packages: `mathlib 0123456789ab`, `local`" in markdown


def test_optional_sections_are_left_out_when_empty(project: Path, env: dict[str, str]) -> None:
    markdown = build_report(minimal_input(workspace=_workspace(project)), env=env).markdown
    for heading in ("## Impact", "## Beam Debug Context", "## Request And Response", "## Evidence", "## Workaround"):
        assert heading not in markdown


def test_evidence_containing_backticks_cannot_break_out_of_its_fence(project: Path, env: dict[str, str]) -> None:
    content = "before\n```\n## Injected heading\n````\nafter"
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.md", "content": content}])
    markdown = build_report(data, env=env).markdown
    assert "`````text\n" + content + "\n`````" in markdown
