"""lean-lsp-mcp's tools that read a document.

Diagnostics, goals, hover, completions, navigation, the outline, code actions and widgets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from . import _search, _text
from ._core import Base, Ctx, Doc, both, error_code, uri_path
from ._errors import CompatError

_COMPLETION_KINDS: Final = {"enumMember": "enum_member", "event": "theorem", "typeParameter": "type_parameter"}
_OUTLINE_TAGS: Final = {
    "theorem": "Thm",
    "lemma": "Thm",
    "structure": "Struct",
    "class": "Class",
    "namespace": "Ns",
    "example": "Ex",
}


class DocTools(Base):
    """The document tools, one method per lean-lsp-mcp tool."""

    async def diagnostic_messages(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_diagnostic_messages`."""
        if a["interactive"]:
            return await self._interactive_diagnostics(cx, a)
        timeout = a["timeout_s"]
        result: tuple[Doc, dict[str, Any]] | None = None
        with anyio.move_on_after(timeout if timeout is not None else float("inf")):
            result = await self._synced(cx, a["file_path"])
        if result is None:
            return await self._partial(cx, a)
        doc, synced = result
        start, end = a["start_line"], a["end_line"]
        if a["declaration_name"]:
            start, end = await self._declaration_lines(cx, doc, a["declaration_name"])
        raw = await self._lean_diagnostics(cx, doc, synced["diagnostics"].get("items", []))
        if start is not None or end is not None:
            first = start - 1 if start is not None else 0
            last = end - 1 if end is not None else 2**30
            raw = [d for d in raw if _text.in_lines(d, first, last)]
        lsp = doc.lsp
        pairs = [(item, str(d.get("message", ""))) for d in raw if (item := _text.lsp_item(lsp, d)) is not None]
        # Success is the verdict of the lines asked about (the schema's "the queried file/range has no errors").
        errors = any(d.get("severity", 1) == 1 and not d.get("isSilent") for d in raw)
        return {
            "result": _text.diagnostics_result(
                [p[0] for p in pairs], severity=a["severity"], success=not errors, raw_messages=[p[1] for p in pairs]
            )
        }

    async def _interactive_diagnostics(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`interactive=true`: Lean's interactive diagnostics of the file's complete version, in a line range."""
        doc = await self._open(cx, a["file_path"])
        start, end = a["start_line"], a["end_line"]
        if a["declaration_name"]:
            start, end = await self._declaration_lines(cx, doc, a["declaration_name"])
        lines: dict[str, int] = {}
        if start is not None or end is not None:
            lines = {"start_line": start - 1 if start is not None else 0, "end_line": end if end is not None else 2**30}
        out = await cx.op("interactive_diagnostics", doc.args(**lines))
        return {"result": {"diagnostics": out["diagnostics"]}}

    async def _partial(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """What Beam knows while Lean still elaborates: the cached diagnostics and the lines still in progress."""
        _, file = self.project.resolve(a["file_path"])
        lsp = _text.lsp_lines(_text.read_source(str(file)))
        broker = await cx.calls.broker()
        try:
            cached = broker.diagnostics(str(file))
        except Exception as exc:
            if error_code(exc) is None:
                raise
            cached = {}
        raw = cached.get("diagnostics", [])
        start, end = a["start_line"], a["end_line"]
        if start is not None or end is not None:  # the range asked about, as in a complete answer
            raw = [d for d in raw if _text.in_lines(d, start - 1 if start else 0, end - 1 if end else 2**30)]
        items = [item for d in raw if (item := _text.lsp_item(lsp, d)) is not None]
        if a["severity"] is not None:
            items = [item for item in items if item["severity"] == a["severity"]]
        ranges = [[r["start"]["line"] + 1, r["end"]["line"] + 1] for r in cached.get("processing", [])]
        return {
            "result": {
                "partial": True,
                "still_elaborating_lines": ranges or None,
                "success": False,
                "timed_out": True,
                "items": items,
                "failed_dependencies": [],
            }
        }

    async def _declaration_lines(self, cx: Ctx, doc: Doc, name: str) -> tuple[int, int]:
        out = await cx.op("document_symbols", doc.args())
        found = _find_symbol(out["result"], name)
        if found is None:
            raise CompatError(f"Declaration '{name}' not found in file.")
        rng = found["range"]
        return int(rng["start"]["line"]) + 1, int(rng["end"]["line"]) + 1

    async def code_actions(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_code_actions`: the code actions Lean offers on a line, resolved to edits."""
        doc = await self._open(cx, a["file_path"])
        line = a["line"] - 1
        lsp = doc.lsp
        if line >= len(lsp):  # no diagnostic and no text there: lean-lsp-mcp finds no action (Beam would refuse)
            return {"actions": []}
        end = _text.to_utf16(lsp[line], len(lsp[line]))
        todo = await cx.op(
            "todo",
            doc.args(
                start_line=line,
                start_character=0,
                end_line=line,
                end_character=end,
                kinds=["code_action"],
                suggest="none",
            ),
        )
        actions: list[dict[str, Any]] = []
        seen: set[str] = set()
        for item in todo["items"]:
            action = item.get("code_action")
            if not isinstance(action, dict) or action.get("title", "") in seen:
                continue
            seen.add(action.get("title", ""))
            resolved = action
            if "edit" not in action:
                try:
                    resolved = (await cx.op("code_action_resolve", doc.args(code_action=action)))["code_action"]
                except Exception as exc:
                    if error_code(exc) is None:
                        raise
                    continue
            actions.append(
                {
                    "title": action.get("title", ""),
                    "is_preferred": bool(action.get("isPreferred", False)),
                    "edits": _edits(resolved.get("edit") or {}, lsp),
                }
            )
        return {"actions": actions}

    async def goal(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_goal`: goals at a column, or before and after a line."""
        doc = await self._open(cx, a["file_path"])
        context = self._line(doc, a["line"])
        structured = a["format"] == "structured"

        def render(goals: list[str] | None) -> list[Any]:
            return [_text.structured_goal(g) if structured else _text.bound(g) for g in goals or []]

        timeout = a["timeout_s"]
        answer: dict[str, Any] | None = None
        with anyio.move_on_after(timeout if timeout is not None else float("inf")):
            if a["column"] is None:
                before, after = await both(
                    self._goals(cx, doc, a["line"] - 1, _text.first_non_blank(context), "before"),
                    self._goals(cx, doc, a["line"] - 1, len(context), "after"),
                )
                answer = {
                    "line_context": context,
                    "goals": None,
                    "goals_before": render(before),
                    "goals_after": render(after),
                    "status": None,
                }
            else:
                goals = await self._goals(cx, doc, a["line"] - 1, a["column"] - 1, "exact")
                status = "no_goal_at_position" if goals is None else ("goals" if goals else "complete")
                answer = {
                    "line_context": context,
                    "goals": render(goals),
                    "goals_before": None,
                    "goals_after": None,
                    "status": status,
                }
        if answer is None:
            return {
                "line_context": context,
                "goals": [],
                "goals_before": None,
                "goals_after": None,
                "status": "still_elaborating",
            }
        return answer

    async def term_goal(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_term_goal`: the expected type at a column (default: the line's last character)."""
        doc = await self._open(cx, a["file_path"])
        context = self._line(doc, a["line"])
        column = (a["column"] if a["column"] is not None else max(len(context), 1)) - 1
        out = await cx.op("term_goal", doc.args(**doc.at(a["line"] - 1, column)))
        goal = out["goal"]
        expected = goal.replace("```lean\n", "").replace("\n```", "") if goal else None
        return {"line_context": context, "expected_type": expected}

    async def hover_info(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_hover_info`: Lean's hover at a position, the hovered text, and the diagnostics there."""
        doc = await self._open(cx, a["file_path"])
        line, column = a["line"] - 1, a["column"] - 1
        out = {} if _past_end(doc, line) else await cx.op("hover", doc.args(**doc.at(line, column)))
        if "contents" not in out:
            raise CompatError(f"No hover information at line {a['line']}, column {a['column']}")
        contents = out["contents"]
        value = contents.get("value", "No hover information available.") if isinstance(contents, dict) else contents
        info = str(value).replace("```lean\n", "").replace("\n```", "").strip()
        lsp = doc.lsp
        symbol = _extract(doc.text, lsp, out.get("range"))
        raw = await self._lean_diagnostics(cx, doc, [])
        here = [d for d in raw if _text.at_position(_codepoints(lsp, d), line, column)]
        items = [item for d in here if (item := _text.lsp_item(lsp, d)) is not None]
        return {"symbol": symbol, "info": info, "diagnostics": items}

    async def completions(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_completions`: Lean's completions, ordered and cut as lean-lsp-mcp does."""
        doc = await self._open(cx, a["file_path"])
        line, column = a["line"] - 1, a["column"] - 1
        if _past_end(doc, line):
            return {"items": []}
        at = doc.args(**doc.at(line, column), limit=500)
        # Lean ranks its items (`sortText`, on every item Lean 4 sends): lean-lsp-mcp keeps that order, and so
        # does the broker, so only the items shown with details need resolving.
        out = await cx.op("completions", {**at, "resolve": min(a["resolve_details"], a["max_completions"])})
        items = list(out["items"])
        if not any(item.get("sort_text") for item in items):  # no ranking from Lean: lean-lsp-mcp ranks by prefix
            prefix = _completion_prefix(doc.lines, a["line"], a["column"])

            def key(item: Mapping[str, Any]) -> tuple[int, str]:
                label = str(item["label"]).lower()
                if not prefix:
                    return 0, label
                return (0 if label.startswith(prefix) else 1 if prefix in label else 2), label

            if a["resolve_details"]:  # another order: the items shown first may not be resolved yet
                items = list((await cx.op("completions", at))["items"])
            items.sort(key=key)
        items = items[: a["max_completions"]]
        return {
            "items": [
                {
                    "label": item["label"],
                    "kind": _COMPLETION_KINDS.get(item["kind"], item["kind"]) if item.get("kind") else None,
                    "detail": item.get("detail") if index < a["resolve_details"] else None,
                }
                for index, item in enumerate(items)
            ]
        }

    async def declaration_file(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_declaration_file`: the source around the declaration of a symbol written in the file."""
        doc = await self._open(cx, a["file_path"])
        symbol = a["symbol"]
        found = next(((n, ln.find(symbol)) for n, ln in enumerate(doc.lines) if symbol in ln), None)
        if found is None:
            raise CompatError(f"Symbol `{symbol}` (case sensitive) not found in file. Add it first.")
        out = await cx.op("definition", doc.args(**doc.at(*found)))
        if not out["result"]:
            raise CompatError(f"No declaration available for `{symbol}`.")
        location = out["result"][0]
        target = uri_path(location.get("targetUri") or location.get("uri") or "")
        if target is None or not target.is_file():
            raise CompatError(f"Could not open declaration file `{target}` for `{symbol}`.")
        shown = _search.shown(doc.root, _search.stdlib_sources(doc.root), target)
        if shown is None:  # lean-lsp-mcp's path policy refuses it
            raise CompatError(f"Path '{target}' is outside the active Lean project, dependencies, and stdlib roots.")
        content = _text.read_source(str(target))
        lines = content.splitlines()
        if a["full_file"]:
            return {
                "file_path": shown,
                "content": content,
                "start_line": 1,
                "end_line": len(lines),
                "total_lines": len(lines),
            }
        rng = location.get("targetRange") or location.get("range") or {}
        first = int(rng.get("start", {}).get("line", 0))
        last = int(rng.get("end", {}).get("line", first))
        start = max(0, first - a["context_lines"])
        end = min(len(lines), last + 1 + a["context_lines"])
        return {
            "file_path": shown,
            "content": "\n".join(lines[start:end]),
            "start_line": start + 1,
            "end_line": end,
            "total_lines": len(lines),
        }

    async def references(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_references`: every reference to the symbol at a position, the declaration included."""
        doc = await self._open(cx, a["file_path"])
        if _past_end(doc, a["line"] - 1):
            return {"items": [], "total": 0}
        out = await cx.op("references", doc.args(**doc.at(a["line"] - 1, a["column"] - 1), include_declaration=True))
        found = out["result"]
        total = len(found)
        if a["max_results"] is not None:
            found = found[: a["max_results"]]
        texts: dict[Path, list[str]] = {doc.file: doc.lsp}
        stdlib = _search.stdlib_sources(doc.root)
        items = []
        for location in found:
            path = uri_path(location.get("uri", ""))
            if path is None:
                continue
            shown = _search.shown(doc.root, stdlib, path)
            if shown is None:  # outside the project, its packages and the stdlib: lean-lsp-mcp leaves it out
                continue
            if path not in texts:
                try:
                    texts[path] = _text.lsp_lines(_text.read_source(str(path)))
                except OSError:
                    texts[path] = []
            rng = location.get("range", {})
            line, column = _text.position(texts[path], rng.get("start", {}))
            end_line, end_column = _text.position(texts[path], rng.get("end", {}))
            items.append(
                {
                    "file_path": shown,
                    "line": line,
                    "column": column,
                    "end_line": end_line,
                    "end_column": end_column,
                }
            )
        return {"items": items, "total": total}

    async def file_outline(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_file_outline`: imports and declarations (one flat list in document order, as lean-lsp-mcp)."""
        doc = await self._open(cx, a["file_path"])
        out = await cx.op("outline", doc.args())
        declarations = []
        for entry in out["declarations"]:
            kind = entry.get("kind") or ""
            if kind in ("section", "end", "mutual"):
                continue
            signature = entry.get("signature")
            if signature:
                head = entry["name"].rsplit(".", 1)[-1]
                for prefix in (entry["name"], head):
                    if signature.startswith(prefix):
                        signature = signature[len(prefix) :].strip()
                        break
            declarations.append(
                {
                    "name": entry["name"],
                    "kind": _OUTLINE_TAGS.get(kind, "Def"),
                    "start_line": int(entry["range"]["start"]["line"]) + 1,
                    "end_line": int(entry["range"]["end"]["line"]) + 1,
                    "type_signature": signature or None,
                    "children": [],
                }
            )
        imports = [imp["module"] for imp in out.get("imports") or []]
        total = None
        limit = a["max_declarations"]
        if limit and len(declarations) > limit:
            total, declarations = len(declarations), declarations[:limit]
        return {"imports": imports, "declarations": declarations, "total_declarations": total}

    async def get_widgets(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_get_widgets`: the panel widgets at a position, as Lean sends them."""
        doc = await self._open(cx, a["file_path"])
        if _past_end(doc, a["line"] - 1):
            return {"widgets": []}
        out = await cx.op("widgets", doc.args(**doc.at(a["line"] - 1, a["column"] - 1)))
        return {"widgets": out["widgets"]}

    async def get_widget_source(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_get_widget_source`: a widget's JavaScript module by its hash."""
        doc = await self._open(cx, a["file_path"])
        out = await cx.op("widget_source", doc.args(javascript_hash=a["javascript_hash"]))
        return {"source": out["source"]}


def _past_end(doc: Doc, line: int) -> bool:
    """Whether a 0-based line is past the document's end.

    Lean answers nothing there and lean-lsp-mcp passes that on (no hover; no completions, references or widgets),
    where the broker would refuse the position.
    """
    return line >= len(doc.lsp)


def _find_symbol(symbols: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    for symbol in symbols:
        if symbol.get("name") == name:
            return symbol
        found = _find_symbol(symbol.get("children") or [], name)
        if found is not None:
            return found
    return None


def _codepoints(lsp: Sequence[str], diagnostic: Mapping[str, Any]) -> dict[str, Any]:
    """A Lean diagnostic with its `range` in 0-based code-point columns (for position tests)."""
    out = dict(diagnostic)
    rng = diagnostic.get("range") or diagnostic.get("fullRange")
    if isinstance(rng, Mapping):
        start = _text.position(lsp, rng.get("start", {}))
        end = _text.position(lsp, rng.get("end", {}))
        out["range"] = {
            "start": {"line": start[0] - 1, "character": start[1] - 1},
            "end": {"line": end[0] - 1, "character": end[1] - 1},
        }
    return out


def _extract(text: str, lsp: Sequence[str], rng: Mapping[str, Any] | None) -> str:
    """The text a hover range covers (empty without one)."""
    if not rng:
        return ""
    (l0, c0), (l1, c1) = _text.position(lsp, rng["start"]), _text.position(lsp, rng["end"])
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    if not (0 < l0 <= len(lsp) and 0 < l1 <= len(lsp)):
        return "Range out of bounds"
    return text[offsets[l0 - 1] + c0 - 1 : offsets[l1 - 1] + c1 - 1]


def _completion_prefix(lines: Sequence[str], line: int, column: int) -> str:
    if line < 1 or line > len(lines):
        return ""
    before = lines[line - 1][: column - 1] if column > 0 else ""
    if before.endswith("."):
        return ""
    return re.split(r"[\s()\[\]{},:;.]+", before)[-1].lower()


def _edits(edit: Mapping[str, Any], lsp: Sequence[str]) -> list[dict[str, Any]]:
    """The text edits of a workspace edit (`documentChanges` or `changes`), in 1-based code-point positions."""
    groups: list[Sequence[Mapping[str, Any]]] = [c.get("edits", []) for c in edit.get("documentChanges") or []]
    groups += list((edit.get("changes") or {}).values())
    out = []
    for group in groups:
        for e in group:
            start = _text.position(lsp, e["range"]["start"])
            end = _text.position(lsp, e["range"]["end"])
            out.append(
                {
                    "new_text": e["newText"],
                    "start_line": start[0],
                    "start_column": start[1],
                    "end_line": end[0],
                    "end_column": end[1],
                }
            )
    return out
