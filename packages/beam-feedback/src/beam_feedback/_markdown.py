"""Rendering a report as paste-ready Markdown.

This module owns the section order, the sharing banner and the formatting of collected context.
It renders exactly what it is given: it must not collect, redact or decide what a confidential
report may contain (the caller strips and redacts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import JsonValue

from beam_feedback.models import FeedbackReport, ReportMetadata

PUBLIC_BANNER: Final = (
    "> **Review before posting publicly:** this report may contain paths, project details, logs or "
    "other text you did not mean to share. Beam does not submit feedback automatically."
)
CONFIDENTIAL_BANNER: Final = (
    "> **Confidential report: do not post this report publicly.** Share it only through a private "
    "channel you trust. Beam does not submit feedback automatically."
)
_INLINE_EVIDENCE_LIMIT: Final = 8000
_MAX_PACKAGES: Final = 20
_BACKTICKS: Final = re.compile(r"`+")


@dataclass(frozen=True)
class EvidenceText:
    """One evidence entry ready to render and write.

    Attributes:
        name: The entry's file name.
        text: The full text (JSON content already pretty-printed).
        language: The fence language (``json`` or ``text``).
        source: Where a path entry was read from, or None for inline content.
    """

    name: str
    text: str
    language: str
    source: str | None


def _fenced(text: str, language: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside ``text``."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def _code(value: object) -> str:
    text = str(value)
    fence = "``" if "`" in text else "`"
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def _pretty(value: JsonValue) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _get(data: JsonValue, *path: str) -> JsonValue:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _runtime_lines(metadata: ReportMetadata, collected: dict[str, JsonValue]) -> list[str]:
    lines = [f"- Generated at: {_code(metadata.generated_at)}"]
    identity = _get(collected, "identity")
    if isinstance(identity, dict):
        server = f"{identity.get('name')} {identity.get('version')}"
        lines.append(f"- Server: {_code(server)}")
        if identity.get("mcp_protocol") is not None:
            lines.append(f"- MCP protocol: {_code(identity['mcp_protocol'])}")
    beam = _get(collected, "beam")
    if isinstance(beam, dict) and beam:
        lines.append("- Beam: " + ", ".join(_code(f"{name} {version}") for name, version in beam.items()))
    python = _get(collected, "python")
    if isinstance(python, dict):
        lines.append(f"- Python: {_code(python.get('version'))} ({python.get('implementation')})")
    system = _get(collected, "os")
    if isinstance(system, dict):
        release = f"{system.get('system')} {system.get('release')}"
        lines.append(f"- OS: {_code(release)} ({system.get('machine')})")
    lines.append(f"- Active root: {_code(metadata.active_root) if metadata.active_root else 'none'}")
    runtime_active = _get(collected, "identity", "runtime_active")
    runtime_line = f"- Runtime active: {'yes' if runtime_active else 'no'}"
    open_files = _get(collected, "runtime", "open_files")
    if isinstance(open_files, list):
        runtime_line += f" ({len(open_files)} open file{'s' if len(open_files) != 1 else ''})"
    lines.append(runtime_line)
    workspace = _get(collected, "workspace")
    if isinstance(workspace, dict):
        toolchain = workspace.get("lean_toolchain")
        lines.append(f"- Lean toolchain: {_code(toolchain) if toolchain else 'not found'}")
        lakefile = _get(workspace, "lakefile", "file")
        lines.append(f"- Lakefile: {_code(lakefile) if lakefile else 'not found'}")
        packages = _get(workspace, "manifest", "packages")
        if isinstance(packages, list) and packages:
            shown = []
            for package in packages[:_MAX_PACKAGES]:
                if isinstance(package, dict):
                    rev = package.get("rev")
                    shown.append(_code(f"{package.get('name')} {str(rev)[:12]}" if rev else package.get("name")))
            more = len(packages) - _MAX_PACKAGES
            lines.append("- Packages: " + ", ".join(shown) + (f", and {more} more" if more > 0 else ""))
    git = _get(collected, "git")
    if isinstance(git, dict):
        branch = git.get("branch") or "detached"
        commit = str(git.get("commit") or "no commits")[:12]
        state = "dirty" if git.get("dirty") else "clean"
        lines.append(f"- Source: branch {_code(branch)}, commit {_code(commit)}, {state}")
    tools = _get(collected, "tools")
    if isinstance(tools, dict):
        lines.extend(f"- {tool}: {_code(tools[tool])}" for tool in ("elan", "lake") if tools.get(tool))
    return lines


def render_markdown(
    report: FeedbackReport,
    metadata: ReportMetadata,
    *,
    collected: dict[str, JsonValue],
    warnings: Sequence[str],
    evidence: Sequence[EvidenceText],
    include_collected: bool,
) -> str:
    """Render the report card.

    Sections, in order: title, sharing banner, Summary (with kind, severity, tags), Beam Runtime
    (with collection warnings), Reproduction, Expected Behavior, Actual Behavior, Impact,
    Beam Debug Context (only with ``include_collected``), Request And Response, Evidence,
    Workaround. Empty optional sections are left out.
    """
    parts = [f"# {report.title.strip()}", CONFIDENTIAL_BANNER if metadata.confidential else PUBLIC_BANNER]
    summary = ["## Summary", "", report.summary.strip()]
    facts = []
    if metadata.kind:
        facts.append(f"- Kind: {_code(metadata.kind)}")
    if metadata.severity:
        facts.append(f"- Severity: {_code(metadata.severity)}")
    if metadata.tags:
        facts.append("- Tags: " + ", ".join(_code(tag) for tag in metadata.tags))
    if facts:
        summary += ["", *facts]
    parts.append("\n".join(summary))
    runtime = ["## Beam Runtime", "", *_runtime_lines(metadata, collected)]
    if warnings:
        runtime.append("- Collection warnings:")
        runtime.extend(f"  - {warning}" for warning in warnings)
    parts.append("\n".join(runtime))
    parts.append(f"## Reproduction\n\n{report.reproduction.strip()}")
    parts.append(f"## Expected Behavior\n\n{report.expected.strip()}")
    parts.append(f"## Actual Behavior\n\n{report.actual.strip()}")
    if report.impact and report.impact.strip():
        parts.append(f"## Impact\n\n{report.impact.strip()}")
    if include_collected:
        parts.append(f"## Beam Debug Context\n\n{_fenced(_pretty(collected), 'json')}")
    if report.request is not None or report.response is not None:
        exchange = ["## Request And Response"]
        if report.request is not None:
            exchange.append(f"### Request\n\n{_fenced(_pretty(report.request), 'json')}")
        if report.response is not None:
            exchange.append(f"### Response\n\n{_fenced(_pretty(report.response), 'json')}")
        parts.append("\n\n".join(exchange))
    if evidence:
        items = ["## Evidence"]
        for entry in evidence:
            text = entry.text
            note = f"From {_code(entry.source)}.\n\n" if entry.source else ""
            if len(text) > _INLINE_EVIDENCE_LIMIT:
                text = text[:_INLINE_EVIDENCE_LIMIT]
                note += (
                    f"Shown truncated to {_INLINE_EVIDENCE_LIMIT} characters; "
                    f"a bundle holds the full text as {_code('evidence/' + entry.name)}.\n\n"
                )
            items.append(f"### {entry.name}\n\n{note}{_fenced(text, entry.language)}")
        parts.append("\n\n".join(items))
    if report.workaround and report.workaround.strip():
        parts.append(f"## Workaround\n\n{report.workaround.strip()}")
    return "\n\n".join(parts) + "\n"
