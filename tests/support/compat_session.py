"""The scripted agent session of the lean-lsp-mcp parity test, its normalisation, and the differences Beam keeps.

One session (open, diagnostics of a broken file, goals before and after a line and at a column, hover, term goals,
widgets, interactive diagnostics, completions, multi-attempt, run_code, verify, outline) is run against
lean-lsp-mcp 0.32.0 and against `lean-beam-mcp --tools lean-lsp-mcp` on the demo project (with two files of its own
added), through the MCP SDK client. `normalise` removes what legitimately differs between two runs (the project's
absolute path, the order of diagnostics Lean reports on one line); `DIFFERENCES` is every remaining difference,
each with the reason Beam keeps it (the same list is in docs/mcp-clients.md, "Coming from lean-lsp-mcp").
`PEER_SESSION` is the peer's normalised answers recorded from a real run (`tox -e peers -- --record`); the
real-lane test compares Beam's live answers with it, so the parity check runs in CI without installing the peer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

PEER = "lean-lsp-mcp==0.32.0"
PEER_SESSION = Path(__file__).resolve().parent.parent / "mcp" / "compat_peer_session.json"
"""lean-lsp-mcp 0.32.0's normalised answers to `session`, recorded on the real Lean lane."""
ROOT_MARK = "<root>"

FILES = {
    "Demo/Complete.lean": "prelude\nimport Demo.Basic\n\ndef c : MyNat := MyNat.\n",
    "Demo/Attempt.lean": (
        "prelude\nimport Demo.Basic\n\ntheorem t1 (p q : Prop) (hp : p) (hq : q) : p := by\n  skip\n  exact hp\n"
    ),
}
"""Files the session adds to the demo project (an incomplete name to complete, a proof to attempt on)."""

Call = tuple[str, dict[str, Any]]


def session(root: Path) -> list[Call]:
    """The calls, in order; `file_path`s absolute (one relative to `LEAN_PROJECT_PATH`, as agents also write)."""

    def f(rel: str) -> str:
        return str(root / rel)

    return [
        ("lean_diagnostic_messages", {"file_path": f("Demo/Broken.lean")}),
        ("lean_diagnostic_messages", {"file_path": "Demo/Warn.lean"}),
        ("lean_diagnostic_messages", {"file_path": f("Demo/Goals.lean"), "severity": "error"}),
        ("lean_goal", {"file_path": f("Demo/Goals.lean"), "line": 5}),
        ("lean_goal", {"file_path": f("Demo/Goals.lean"), "line": 5, "column": 3}),
        ("lean_goal", {"file_path": f("Demo/Goals.lean"), "line": 4, "column": 1, "format": "structured"}),
        ("lean_hover_info", {"file_path": f("Demo/Proofs.lean"), "line": 4, "column": 28}),
        ("lean_hover_info", {"file_path": f("Demo/Broken.lean"), "line": 4, "column": 21}),
        ("lean_term_goal", {"file_path": f("Demo/Proofs.lean"), "line": 4, "column": 28}),
        ("lean_term_goal", {"file_path": f("Demo/Proofs.lean"), "line": 7}),
        ("lean_get_widgets", {"file_path": f("Demo/Proofs.lean"), "line": 4, "column": 28}),
        ("lean_diagnostic_messages", {"file_path": f("Demo/Broken.lean"), "interactive": True}),
        ("lean_completions", {"file_path": f("Demo/Complete.lean"), "line": 4, "column": 24}),
        ("lean_multi_attempt", {"file_path": f("Demo/Attempt.lean"), "line": 5, "snippets": ["exact hp", "skip"]}),
        ("lean_run_code", {"code": "prelude\nimport Demo.Basic\n\n#check myTrue\ntheorem x : MyTrue := MyNat.zero\n"}),
        ("lean_verify", {"file_path": f("Demo/Proofs.lean"), "theorem_name": "idProof"}),
        ("lean_file_outline", {"file_path": f("Demo/Proofs.lean")}),
    ]


def answer(tool: str, is_error: bool, structured: Any, text: str | None) -> dict[str, Any]:
    """One recorded answer: the tool, whether it failed, and its structured content (or its text on failure)."""
    return {"tool": tool, "is_error": is_error, "structured": None if is_error else structured, "text": text}


def _replace(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace(root, ROOT_MARK)
    if isinstance(value, list):
        return [_replace(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, root) for k, v in value.items()}
    return value


def _by_position(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda d: (d["line"], d["column"], d["message"]))


def normalise(answers: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """Answers without what legitimately differs between runs: the project's path, and the order of diagnostics
    (Lean publishes a file's messages in the order its elaboration finishes; both servers keep Lean's order)."""
    out = []
    for entry in _replace(copy.deepcopy(answers), str(root)):
        s = entry["structured"]
        if s is not None and entry["tool"] == "lean_run_code":
            s["diagnostics"] = _by_position(s["diagnostics"])
        if s is not None and entry["tool"] == "lean_diagnostic_messages" and "items" in s["result"]:
            s["result"]["items"] = _by_position(s["result"]["items"])
        out.append(entry)
    return out


Difference = tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]
"""Why Beam answers differently, and the projection both answers are compared under."""


def _outline_shape(entry: dict[str, Any]) -> dict[str, Any]:
    s = entry["structured"]
    keep = [{k: d[k] for k in ("name", "start_line", "end_line")} for d in s["declarations"]]
    return {**entry, "structured": {**s, "declarations": keep}}


def _attempt_shape(entry: dict[str, Any]) -> dict[str, Any]:
    s = entry["structured"]
    return {**entry, "structured": {"items": [{"snippet": i["snippet"]} for i in s["items"]]}}


def _verify_shape(entry: dict[str, Any]) -> dict[str, Any]:
    s = entry["structured"]
    return {**entry, "structured": {k: v for k, v in s.items() if k != "warnings"}}


def _message_text(value: Any) -> str:
    """The text of Lean's interactive message (`TaggedText` of `MsgEmbed`s: an embed holds its own text)."""
    if not isinstance(value, dict):
        return ""
    if "text" in value:
        return str(value["text"])
    if "append" in value:
        return "".join(_message_text(part) for part in value["append"])
    embed, content = value["tag"]
    if "expr" in embed:
        return _message_text(embed["expr"])
    return _message_text(content)


def _interactive_shape(entry: dict[str, Any]) -> dict[str, Any]:
    s = entry["structured"]
    if "diagnostics" not in s["result"]:
        return entry
    plain = [{**d, "message": _message_text(d["message"])} for d in s["result"]["diagnostics"]]
    return {**entry, "structured": {"result": {"diagnostics": plain}}}


DIFFERENCES: dict[str, Difference] = {
    "lean_diagnostic_messages": (
        "With interactive=true, Beam's messages are Lean's plain-text interactive messages: Beam's Lean session does "
        "not say hasWidgets, because with it Lean publishes trace messages as '(trace)' placeholders (Beam's "
        "diagnostics, run_at traces and profiler lines would lose their text). lean-lsp-mcp's session says it, so "
        "its messages tag each expression for exploring over RPC; the text, ranges and severities are the same.",
        _interactive_shape,
    ),
    "lean_multi_attempt": (
        "Beam runs each snippet on its batch attempts (a private copy of the declaration up to the position, the "
        "rest of the file left out): an item's diagnostics are the messages the snippet itself caused, at the "
        "snippet's position, and its goals are the proof state right after it. lean-lsp-mcp re-elaborates a copy "
        "of the whole file per snippet and also reports errors of the surrounding proof (such as the theorem's "
        "'unsolved goals') that overlap the snippet's lines.",
        _attempt_shape,
    ),
    "lean_file_outline": (
        "Beam's outline reads each declaration's keyword and signature from Lean (kind Thm for a theorem, "
        "type_signature from Lean's hover); lean-lsp-mcp guesses the kind from an `#info_trees` copy of the file "
        "and, where that gives nothing, answers Def with no signature.",
        _outline_shape,
    ),
    "lean_verify": (
        "Beam scans the source itself; lean-lsp-mcp's scan needs ripgrep and otherwise returns one placeholder "
        "warning at line 0.",
        _verify_shape,
    ),
}
"""The session's differences by tool (the same list is in docs/mcp-clients.md)."""


def compared(entry: dict[str, Any]) -> dict[str, Any]:
    """An answer as the parity check compares it (a listed difference's projection applied)."""
    difference = DIFFERENCES.get(entry["tool"])
    if difference is None or entry["is_error"]:
        return entry
    return difference[1](entry)


def mismatches(beam: list[dict[str, Any]], peer: list[dict[str, Any]]) -> list[str]:
    """Every call whose compared answers differ, as readable lines (empty: parity)."""
    out = []
    for index, (b, p) in enumerate(zip(beam, peer, strict=True)):
        cb, cp = compared(b), compared(p)
        if cb != cp:
            out.append(f"call {index} {b['tool']}:\n  beam {json.dumps(cb)}\n  peer {json.dumps(cp)}")
    return out


def load_peer() -> list[dict[str, Any]]:
    """The recorded peer answers."""
    recorded: list[dict[str, Any]] = json.loads(PEER_SESSION.read_text(encoding="utf-8"))
    return recorded


README_CONFIG = {"mcpServers": {"lean-lsp": {"command": "uvx", "args": ["lean-lsp-mcp"], "env": {}}}}
"""A client configuration as lean-lsp-mcp's README shows it (`LEAN_PROJECT_PATH` is filled in per project)."""
BEAM_COMMAND = ("lean-beam-mcp", "--tools", "lean-lsp-mcp")
"""What replaces the README's command (and arguments) to switch to Beam."""


def switched(config: dict[str, Any], root: Path) -> dict[str, Any]:
    """The README's configuration with only the command changed (and the project filled in)."""
    out = copy.deepcopy(config)
    server = out["mcpServers"]["lean-lsp"]
    server["command"], server["args"] = BEAM_COMMAND[0], list(BEAM_COMMAND[1:])
    server["env"]["LEAN_PROJECT_PATH"] = str(root)
    return out


async def run_session(client: Any, root: Path, timeout: float = 300) -> list[dict[str, Any]]:
    """Run the session on a connected `mcp.Client`; the answers in order (not normalised)."""
    import anyio

    out = []
    for tool, arguments in session(root):
        with anyio.fail_after(timeout):
            result = await client.call_tool(tool, arguments)
        text = "".join(getattr(c, "text", "") for c in result.content) if result.is_error else None
        out.append(answer(tool, bool(result.is_error), result.structured_content, text))
    return out


def add_files(root: Path) -> None:
    """Write the session's own files into a copy of the demo project."""
    for rel, text in FILES.items():
        (root / rel).write_text(text, encoding="utf-8")
