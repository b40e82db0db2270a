"""lean-lsp-mcp's tools that run Lean on text.

Multi-attempt, run_code, verify, minimal hypotheses and the proof profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio

from beam_broker._probes.scratch import INCOMPLETE

from . import _text
from ._core import Base, Ctx
from ._errors import CompatError
from ._project import display

THEOREM_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*")
STANDARD_AXIOMS: Final = frozenset({"propext", "Classical.choice", "Quot.sound"})
_NATIVE_AXIOMS: Final = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})
_NATIVE_DECIDE: Final = re.compile(r"(?:^|\.)_native\.native_decide\.ax(?:_\d+)*$")
_SOURCE_WARNINGS: Final = (
    r"set_option\s+debug\.",
    r"\bunsafe\b",
    r"@\[implemented_by\b",
    r"@\[extern\b",
    r"\bopaque\b",
    r"local\s+instance\b",
    r"local\s+notation\b",
    r"local\s+macro_rules\b",
    r"scoped\s+notation\b",
    r"scoped\s+instance\b",
    r"@\[csimp\b",
    r"import\s+Lean\.Elab\b",
    r"import\s+Lean\.Meta\b",
)
_PROFILE_SKIP: Final = frozenset({"import", "initialization", "parsing", "interpretation", "linting"})
_DECL_BINDERS: Final = "(theorem|lemma|example|def)"
ATTEMPTS_PER_CALL: Final = 32
"""Most texts one `attempts` operation takes; longer snippet lists are split."""


class ProbeTools(Base):
    """The tools that run Lean on text, one method per lean-lsp-mcp tool."""

    async def multi_attempt(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_multi_attempt`: each snippet on its own at the position, on Beam's batch attempts."""
        doc = await self._open(cx, a["file_path"])
        context = self._line(doc, a["line"])
        if a["column"] is None:
            column = _text.first_non_blank(context)
        elif a["column"] > len(context) + 1:
            raise CompatError(f"Column {a['column']} out of range for line of length {len(context)}")
        else:
            column = a["column"] - 1
        snippets = [s.rstrip("\n") for s in a["snippets"]]
        attempts: list[dict[str, Any]] = []
        for chunk in range(0, len(snippets), ATTEMPTS_PER_CALL):
            texts = snippets[chunk : chunk + ATTEMPTS_PER_CALL]
            out = await cx.op("attempts", doc.args(**doc.at(a["line"] - 1, column), texts=texts))
            attempts.extend(out["attempts"])
        items = []
        for snippet, attempt in zip(snippets, attempts, strict=True):
            state = attempt.get("proof_state")
            goals = [_text.bound(_text.goal_text(g)) for g in state["goals"]] if state else []
            start = doc.at(a["line"] - 1, column)
            diagnostics = [
                _text.message_item(doc.lsp, m["severity"], m["text"], start, _tags(m["text"]))
                for m in attempt.get("messages", [])
            ]
            items.append(
                {
                    "snippet": snippet,
                    "goals": goals,
                    "diagnostics": diagnostics,
                    "timed_out": False,
                    "proof_status": None,
                }
            )
        return {"items": items}

    async def run_code(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_run_code`: a standalone text checked in a private document of the current project."""
        root = self.project.current()
        code = a["code"] if a["code"].endswith("\n") else a["code"] + "\n"
        out = await cx.op("run_code", {"workspace": {"root": str(root)}, "text": code})
        lsp = _text.lsp_lines(code)
        # Lean's messages only: the broker's own "did not finish" error (Lean stopped, e.g. at an import it cannot
        # load) is not one of them, and lean-lsp-mcp has none; it still makes `success` false, as the peer's
        # `fatal_error` does.
        diagnostics = [
            _text.message_item(lsp, m["severity"], m["text"], m["range"]["start"], _tags(m["text"]))
            for m in out["messages"]
            if not (m["text"] == INCOMPLETE and m.get("code") is None)
        ]
        return {
            "success": bool(out["success"]) and not any(d["severity"] == "error" for d in diagnostics),
            "timed_out": False,
            "diagnostics": diagnostics,
        }

    async def verify(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_verify`: the theorem's axioms (`axioms`), their trust verdict, and the file's source scan."""
        name = a["theorem_name"]
        if not THEOREM_NAME.fullmatch(name):
            raise CompatError("Invalid theorem name. Use a Lean fully qualified name such as `Namespace.theorem`.")
        doc = await self._open(cx, a["file_path"])
        # `_root_.` as lean-lsp-mcp writes it: the name is fully qualified, whatever namespace the file ends in.
        out = await cx.op("axioms", doc.args(name=f"_root_.{name}"))
        axioms = out["axioms"]
        if axioms is None:
            errors = [m["text"] for m in out["messages"] if m["severity"] == "error"]
            if errors:
                raise CompatError(f"Axiom check failed: {'; '.join(errors)}")
            raise CompatError(
                "Axiom check produced no `#print axioms` output — result is inconclusive (elaboration may not have "
                "reached the check)."
            )
        trust, non_standard = _trust(axioms)
        warnings = _scan(doc.lines) if a["scan_source"] else []
        return {"axioms": axioms, "trust": trust, "non_standard_axioms": non_standard, "warnings": warnings}

    async def minimal_hypotheses(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_minimal_hypotheses`: each explicit hypothesis dropped in a private copy of the file (`run_code`)."""
        name = a["theorem_name"]
        if not THEOREM_NAME.fullmatch(name):
            raise CompatError("Invalid theorem name. Use a Lean fully qualified name such as `Namespace.theorem`.")
        doc, synced = await self._synced(cx, a["file_path"])
        bare = name.split(".")[-1]
        shown = display(doc.root, doc.file)
        declared = re.search(rf"\b{_DECL_BINDERS}\s+{re.escape(bare)}(?![A-Za-z0-9_'])", doc.text)
        if declared is None:
            raise CompatError(f"Could not find theorem '{name}' in {shown}.")
        binders = _binders(doc.text, declared.end())
        explicit = [b for b in binders if b[0].startswith("(") and ":" in b[0]]
        skipped = len(binders) - len(explicit)
        lsp = doc.lsp
        baseline = {
            _error_key(lsp, d["range"]["start"], d["message"])
            for d in synced["diagnostics"].get("items", [])
            if d["severity"] == "error"
        }

        async def probe(binder: str, start: int, end: int) -> dict[str, Any]:
            cut = start - 1 if start > 0 and doc.text[start - 1] == " " else start
            text = doc.text[:cut] + doc.text[end:]
            out: dict[str, Any] | None = None
            with anyio.move_on_after(a["inactivity_timeout"]):
                out = await cx.op("run_code", {"workspace": doc.workspace, "text": text})
            if out is None:
                return _verdict(binder, "error", detail=f"elaboration timed out after {a['inactivity_timeout']}s")
            variant = _text.lsp_lines(text)
            new = [
                m
                for m in out["messages"]
                if m["severity"] == "error" and _error_key(variant, m["range"]["start"], m["text"]) not in baseline
            ]
            if not new:
                return _verdict(binder, "removable")
            breaks = [
                _text.message_item(variant, m["severity"], m["text"], m["range"]["start"], _tags(m["text"]))
                for m in new
            ]
            return _verdict(binder, "load-bearing", breaks=breaks)

        verdicts = [await probe(*binder) for binder in explicit]
        return {"theorem_name": name, "file": shown, "verdicts": verdicts, "skipped_implicit": skipped}

    async def profile_proof(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_profile_proof`: the declaration at a line under Lean's profiler (`profile`, on a private mirror)."""
        doc = await self._open(cx, a["file_path"])
        self._line(doc, a["line"])
        out: dict[str, Any] | None = None
        with anyio.move_on_after(a["timeout"]):
            out = await cx.op("profile", doc.args(**doc.at(a["line"] - 1, 0), threshold_ms=0))
        if out is None:
            raise CompatError(f"Profiling timed out after {a['timeout']}s")
        if not out["success"]:
            errors = [m["text"] for m in out["messages"] if m["severity"] == "error"]
            raise CompatError("Profiled declaration failed to elaborate: " + " | ".join(errors[:5]))
        total = float(out["total_ms"])
        lines = sorted((ln for ln in out["lines"] if ln["ms"] >= total * 0.01), key=lambda ln: -ln["ms"])
        categories: dict[str, float] = {}
        for c in sorted(out["categories"], key=lambda c: -c["ms"]):
            if c["category"] not in _PROFILE_SKIP and c["ms"] >= 1.0:
                categories[c["category"]] = round(categories.get(c["category"], 0.0) + c["ms"], 1)
        return {
            "ms": round(total, 1),
            "lines": [
                {"line": ln["line"] + 1, "ms": round(ln["ms"], 1), "text": ln["text"].strip()[:60]}
                for ln in lines[: a["top_n"]]
            ],
            "categories": categories,
        }


def _tags(message: str) -> list[int] | None:
    """`leanTags` of a message Beam gives without them: Lean tags its "unsolved goals" errors (tag 1)."""
    return [1] if message.startswith("unsolved goals") else None


def _trust(axioms: Sequence[str]) -> tuple[str, list[str]]:
    non_standard = [x for x in axioms if x not in STANDARD_AXIOMS]
    if "sorryAx" in axioms:
        return "incomplete", non_standard
    if any(x in _NATIVE_AXIOMS or _NATIVE_DECIDE.search(x) for x in axioms):
        return "native", non_standard
    return ("custom" if non_standard else "standard"), non_standard


def _scan(lines: Sequence[str]) -> list[dict[str, Any]]:
    """Suspicious source patterns, one warning per line (the first pattern that matches), 1-based lines."""
    out = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        for pattern in _SOURCE_WARNINGS:
            if m := re.search(pattern, text):
                out.append({"line": number, "pattern": m.group(0)})
                break
    return out


def _binders(source: str, pos: int) -> list[tuple[str, int, int]]:
    """The binder groups `(...)`, `{...}`, `[...]` right after a declaration's name."""
    closers = {"(": ")", "{": "}", "[": "]"}
    out: list[tuple[str, int, int]] = []
    while pos < len(source):
        while pos < len(source) and source[pos] in " \t\r\n":
            pos += 1
        if pos >= len(source) or source[pos] not in closers:
            break
        opener, closer, depth = source[pos], closers[source[pos]], 0
        end = -1
        for i in range(pos, len(source)):
            depth += (source[i] == opener) - (source[i] == closer)
            if depth == 0:
                end = i
                break
        if end == -1:
            break
        out.append((source[pos : end + 1], pos, end + 1))
        pos = end + 1
    return out


def _error_key(lsp: Sequence[str], start: Mapping[str, Any], message: str) -> tuple[int, int, str]:
    line, column = _text.position(lsp, start)
    return line, column, message[:120]


def _verdict(
    binder: str, status: str, *, breaks: list[dict[str, Any]] | None = None, detail: str = ""
) -> dict[str, Any]:
    return {"binder": binder.strip(), "status": status, "breaks": breaks or [], "detail": detail}
