"""lean-lsp-mcp's presentation rules: 1-based code-point positions, diagnostic items, goal text, output budgets.

Beam answers in LSP coordinates (0-based lines, UTF-16 columns) and structured goals; lean-lsp-mcp 0.32.0 answers
1-based lines and code-point columns, goals as Lean's pretty text, and diagnostics as items with a `category`
and a `hint`. This module owns those conversions and nothing else: no Lean work, no I/O beyond reading a source
file's text. The classification rules (which message is linter noise, a `sorry`, a suggestion; which error gets
a hint) are lean-lsp-mcp's, restated here so that an agent reading them sees the same fields.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from beam_lsp.lines import codepoint_column, split_lines, utf16_column

MAX_OUTPUT_ENV: Final = "LEAN_MCP_MAX_OUTPUT_CHARS"
"""lean-lsp-mcp's per-field character budget for goals and messages (default 6000; 0 = unbounded)."""
DEFAULT_MAX_OUTPUT: Final = 6000

SEVERITY_BY_NUMBER: Final = {1: "error", 2: "warning", 3: "info", 4: "hint"}
SEVERITY_BY_NAME: Final = {"error": "error", "warning": "warning", "information": "info", "hint": "hint"}
LSP_SEVERITY: Final = {"error": 1, "warning": 2, "information": 3, "hint": 4}
"""The LSP severity number of each of Beam's severity names (Lean publishes numbers)."""
LEAN_TAGS: Final = {1: "unsolvedGoals", 2: "goalsAccomplished"}

_LINTER_MARKERS: Final = ("this linter can be disabled", "unused variable", "automatically included section variable")
_SORRY_MARKERS: Final = ("declaration uses 'sorry'", "declaration uses `sorry`")
_ERROR_HINTS: Final = (
    (
        "failed to synthesize instance of type class\n  DecidableEq ",
        "add `classical` locally, or supply the `DecidableEq` instance",
    ),
    (
        "synthesized type class instance is not definitionally equal to expression inferred by typing rules",
        "construct both expressions under the same local instance; introduce `classical` before either one when "
        "decidability is involved",
    ),
    (
        "elaboration function for `Mathlib.Tactic.subscriptTerm` has not been implemented",
        "this notation is not active; open its scoped notation or use the named declaration",
    ),
)
_UNRESOLVED_BINDER: Final = "invalid binder annotation, type is not a class instance"
_BUILD_ERROR_FILE: Final = re.compile(r"^(?:error|warning):\s*([^\s:]+\.lean):\d+:\d+:", re.MULTILINE | re.IGNORECASE)


# ---- text and positions ---------------------------------------------------------------------------------------
def read_source(path: str) -> str:
    """A source file's text as Beam reads it (UTF-8; undecodable bytes replaced)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def lines_of(text: str) -> list[str]:
    """The lines of a text as lean-lsp-mcp counts them (`str.splitlines`)."""
    return text.splitlines()


def lsp_lines(text: str) -> list[str]:
    """The lines of a text as LSP counts them (`beam_lsp.lines.split_lines`)."""
    return split_lines(text)


def to_utf16(line: str, column: int) -> int:
    """The UTF-16 offset of a 0-based code-point column of `line` (clamped to the line)."""
    return utf16_column(line, max(0, min(column, len(line))))


def from_utf16(line: str, offset: int) -> int:
    """The 0-based code-point column of a UTF-16 offset in `line` (clamped to the line)."""
    return min(codepoint_column(line, max(0, offset)), len(line))


def position(lines: Sequence[str], pos: Mapping[str, Any]) -> tuple[int, int]:
    """A 1-based (line, code-point column) of an LSP position in a text split by `lsp_lines`."""
    line = int(pos.get("line", 0))
    text = lines[line] if 0 <= line < len(lines) else ""
    return line + 1, from_utf16(text, int(pos.get("character", 0))) + 1


def first_non_blank(line: str) -> int:
    """The 0-based column of the first non-blank character (0 for a blank line)."""
    return next((i for i, ch in enumerate(line) if not ch.isspace()), 0)


def bound(text: str) -> str:
    """`text` within the output budget (`LEAN_MCP_MAX_OUTPUT_CHARS`), cutting the middle as lean-lsp-mcp does.

    The middle goes, not the end: a goal states its target last.
    """
    raw = os.environ.get(MAX_OUTPUT_ENV, str(DEFAULT_MAX_OUTPUT))
    limit = int(raw) if raw.strip().lstrip("-").isdigit() else DEFAULT_MAX_OUTPUT
    limit = max(limit, 0)
    if limit == 0 or len(text) <= limit:
        return text
    head = (limit * 2) // 3
    cut = (
        f"{text[:head]}\n\n[... {len(text) - limit} characters elided; "
        f"set {MAX_OUTPUT_ENV}=0 for the full text ...]\n\n{text[-(limit - head) :]}"
    )
    return cut if len(cut) < len(text) else text


# ---- diagnostics ----------------------------------------------------------------------------------------------
def category(severity: str, message: str) -> str:
    """lean-lsp-mcp's diagnostic category: `sorry`, `suggestion`, `linter` or `diagnostic`."""
    if any(marker in message for marker in _SORRY_MARKERS):
        return "sorry"
    if "Try this:" in message:
        return "suggestion"
    if severity == "warning" and any(marker in message for marker in _LINTER_MARKERS):
        return "linter"
    return "diagnostic"


def hint(severity: str, message: str) -> str | None:
    """lean-lsp-mcp's guidance for a recognised error, or None."""
    if severity != "error":
        return None
    for marker, text in _ERROR_HINTS:
        if marker in message:
            return text
    if _UNRESOLVED_BINDER in message:
        head = message.partition(_UNRESOLVED_BINDER)[2].split(maxsplit=1)
        if head and head[0].startswith("?m."):
            return (
                "the binder type is unresolved; check that its class name resolves here (imports, namespace, "
                "shadowing) before changing the binder"
            )
    return None


def severity_name(value: Any) -> str:
    """lean-lsp-mcp's severity word of an LSP severity number or a Beam severity name."""
    if isinstance(value, int):
        return SEVERITY_BY_NUMBER.get(value, f"unknown({value})")
    return SEVERITY_BY_NAME.get(str(value), str(value))


def message_item(
    lines: Sequence[str],
    severity: Any,
    message: str,
    start: Mapping[str, Any],
    lean_tags: Iterable[int] | None = None,
) -> dict[str, Any]:
    """One `DiagnosticMessage` (1-based line, code-point column) from an LSP-coordinates diagnostic."""
    name = severity_name(severity)
    line, column = position(lines, start)
    tags = [LEAN_TAGS.get(tag, str(tag)) for tag in lean_tags] if lean_tags else None
    return {
        "severity": name,
        "message": bound(message),
        "line": line,
        "column": column,
        "lean_tags": tags or None,
        "category": category(name, message),
        "hint": hint(name, message),
    }


def lsp_item(lines: Sequence[str], diagnostic: Mapping[str, Any]) -> dict[str, Any] | None:
    """A `DiagnosticMessage` from a Lean diagnostic as Lean publishes it (`fullRange` first), or None."""
    rng = diagnostic.get("fullRange") or diagnostic.get("range")
    if not isinstance(rng, Mapping):
        return None
    return message_item(
        lines,
        diagnostic.get("severity", 1),
        str(diagnostic.get("message", "")),
        rng.get("start", {}),
        diagnostic.get("leanTags"),
    )


def line_span(diagnostic: Mapping[str, Any]) -> tuple[int, int] | None:
    """The 0-based (first, last) line of a Lean diagnostic's `range` (its `fullRange` when it has none)."""
    rng = diagnostic.get("range") or diagnostic.get("fullRange")
    if not isinstance(rng, Mapping):
        return None
    return int(rng.get("start", {}).get("line", 0)), int(rng.get("end", {}).get("line", 0))


def in_lines(diagnostic: Mapping[str, Any], first: int, last: int) -> bool:
    """Whether a Lean diagnostic's lines meet the 0-based line range [first, last]."""
    span = line_span(diagnostic)
    return span is not None and span[1] >= first and span[0] <= last


def at_position(diagnostic: Mapping[str, Any], line: int, column: int) -> bool:
    """Whether a Lean diagnostic's `range` holds a 0-based position (code-point columns, as lean-lsp-mcp tests)."""
    rng = diagnostic.get("range") or diagnostic.get("fullRange")
    if not isinstance(rng, Mapping):
        return False
    start, end = rng.get("start", {}), rng.get("end", {})
    l0, l1 = start.get("line"), end.get("line")
    if l0 is None or l1 is None or not l0 <= line <= l1:
        return False
    c0, c1 = int(start.get("character", 0)), int(end.get("character", column + 1))
    if l0 == l1 and c0 == c1:
        return column == c0
    return not ((line == l0 and column < c0) or (line == l1 and column >= c1))


def failed_dependencies(message: str) -> list[str] | None:
    """The files a Lake build failure at 1:1 names (None when the message is no build output)."""
    if "lake setup-file" not in message and _BUILD_ERROR_FILE.search(message) is None:
        return None
    return sorted(set(_BUILD_ERROR_FILE.findall(message)))


def diagnostics_result(
    items: Iterable[dict[str, Any]], *, severity: str | None, success: bool, raw_messages: Iterable[str]
) -> dict[str, Any]:
    """A `DiagnosticsResult`: build failures at 1:1 taken out, `severity` filtered, exact repeats dropped."""
    kept: list[dict[str, Any]] = []
    failed: list[str] = []
    seen: set[tuple[str, int, int, str]] = set()
    for item, full in zip(items, raw_messages, strict=True):
        if item["line"] == 1 and item["column"] == 1:
            deps = failed_dependencies(full)
            if deps is not None:
                failed = deps
                continue
        if severity is not None and item["severity"] != severity:
            continue
        key = (item["severity"], item["line"], item["column"], full)
        if key in seen:
            continue
        seen.add(key)
        kept.append(item)
    return {
        "partial": False,
        "still_elaborating_lines": None,
        "success": success,
        "timed_out": False,
        "items": kept,
        "failed_dependencies": failed,
    }


# ---- goals ----------------------------------------------------------------------------------------------------
def goal_text(goal: Mapping[str, Any]) -> str:
    """One of Beam's structured goals as Lean's pretty text (`case`, hypotheses, `⊢ target`)."""
    out: list[str] = []
    name = goal.get("userName")
    if name:
        out.append(f"case {name}")
    for hyp in goal.get("hyps", []):
        line = f"{' '.join(hyp.get('names', []))} : {hyp.get('type', '')}"
        if hyp.get("value") is not None:
            line += f" := {hyp['value']}"
        out.append(line)
    out.append(f"{goal.get('goalPrefix', '⊢ ')}{goal.get('target', '')}")
    return "\n".join(out)


def structured_goal(text: str) -> dict[str, Any]:
    """lean-lsp-mcp's `StructuredGoal` of a goal's pretty text (context entries split at `:`)."""
    text = (text or "").strip()
    if not text or text.lower() == "no goals":
        return {"context": [], "goal": None, "status": "complete", "pretty": text}
    if "⊢" not in text:
        return {"context": [], "goal": text, "status": "unknown", "pretty": text}
    context_text, target = text.split("⊢", 1)
    context: list[dict[str, str]] = []
    name: str | None = None
    parts: list[str] = []

    def flush() -> None:
        if name is not None:
            context.append({"name": name, "type": " ".join(p.strip() for p in parts).strip()})

    for line in context_text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if ":" in stripped and not line.startswith(" "):
            flush()
            head, _, rest = stripped.partition(":")
            name, parts = head.strip(), [rest.strip()]
        elif name is not None:
            parts.append(stripped)
    flush()
    return {"context": context, "goal": target.strip(), "status": "open", "pretty": text}
