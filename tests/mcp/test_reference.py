"""The tool reference page (`_reference`): `docs/mcp-tools.md` is generated from the registry, like `tools/list`."""

from __future__ import annotations

from pathlib import Path

from beam_mcp._reference import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mcp-tools.md"


def test_the_tool_reference_page_is_generated_from_the_registry() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), "regenerate: python -m beam_mcp._reference > docs/mcp-tools.md"


def test_the_page_documents_every_tool_and_its_arguments() -> None:
    page = render()
    for tool in ("beam_version", "lean_sync", "lean_drop_workspace", "beam_feedback_report"):
        assert f"\n## {tool}\n" in page
    assert "| `workspace` | object {root} | yes |" in page
    assert "No arguments." in page  # beam_version, beam_stats
