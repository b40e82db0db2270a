"""lean-lsp-mcp's tools as projections of Beam's broker operations.

Each tool method turns lean-lsp-mcp's arguments (a `file_path`, 1-based lines, code-point columns) into calls of
registry operations through `Broker.call` (`goals`, `hover`, `attempts`, `run_code`, `axioms`, ... at the version
Beam reported last for the file; `update`/`sync` when it has not seen the file, or the operation says the file
changed), and Beam's answers into lean-lsp-mcp's output shapes (`_text`). It never
talks to Lean itself and holds no Lean rule: what Lean says comes from the broker, what the agent sees is
lean-lsp-mcp's presentation of it. The state a drop-in needs lives here, per server, and nowhere in the broker:
the current project root, and the last document version Beam reported for each file (the broker's contract stays
stateless: every call names its workspace and version).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import unquote, urlparse

import anyio

from beam_broker.errors import BrokerError

from . import _search, _text, _web
from ._errors import CompatError
from ._project import PROJECT_PATH_ENV, Project, directory, display, files_under

if TYPE_CHECKING:
    from beam_mcp._calls import CallRun, Calls

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
_COMPLETION_KINDS: Final = {"enumMember": "enum_member", "event": "theorem", "typeParameter": "type_parameter"}
_OUTLINE_TAGS: Final = {
    "theorem": "Thm",
    "lemma": "Thm",
    "structure": "Struct",
    "class": "Class",
    "namespace": "Ns",
    "example": "Ex",
}
_PROFILE_SKIP: Final = frozenset({"import", "initialization", "parsing", "interpretation", "linting"})
_DECL_BINDERS: Final = "(theorem|lemma|example|def)"
ATTEMPTS_PER_CALL: Final = 32
"""Most texts one `attempts` operation takes; longer snippet lists are split."""


@dataclasses.dataclass
class Ctx:
    """One running tool call: the broker through `Calls`, and the call's notifier.

    `fresh` asks `Projection._open` for the file's version again instead of taking the one Beam reported last
    (the surface runs a call again so when the broker says that version is no longer current: `Outdated`).
    """

    calls: Calls
    run: CallRun
    fresh: bool = False

    async def op(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run a broker operation for this call.

        Raises:
            Outdated: The operation named a document version that is no longer current (the file changed).
        """
        try:
            return await self.calls.broker_call(self.run, name, arguments)
        except Exception as exc:
            data = getattr(exc, "data", None)
            if _code(exc) == "contentModified" and isinstance(data, dict):
                if data.get("reason") == "documentVersionMismatch" and not self.fresh:
                    raise Outdated from exc
            raise


class Outdated(Exception):
    """A call used the version Beam reported last for a file, and the file has changed since: ask again."""


@dataclasses.dataclass(frozen=True)
class Doc:
    """A file as this call sees it: its project, canonical path, Beam's version and the text on disk."""

    root: Path
    file: Path
    version: int
    text: str

    @property
    def workspace(self) -> dict[str, str]:
        """The workspace descriptor of its project."""
        return {"root": str(self.root)}

    @property
    def lines(self) -> list[str]:
        """Its lines as lean-lsp-mcp counts them."""
        return _text.lines_of(self.text)

    @property
    def lsp(self) -> list[str]:
        """Its lines as LSP counts them."""
        return _text.lsp_lines(self.text)

    def at(self, line: int, column: int) -> dict[str, Any]:
        """The operation arguments of a 0-based line and code-point column (UTF-16 `character`)."""
        lsp = self.lsp
        text = lsp[line] if 0 <= line < len(lsp) else ""
        return {"line": line, "character": _text.to_utf16(text, column)}

    def args(self, **more: Any) -> dict[str, Any]:
        """Operation arguments naming this document version."""
        return {"workspace": self.workspace, "path": str(self.file), "version": self.version, **more}


def _code(exc: BaseException) -> str | None:
    return exc.code if isinstance(exc, BrokerError) else None


class Projection:
    """lean-lsp-mcp 0.32.0's tools over Beam's operations, with the per-server state a drop-in needs.

    Args:
        env: The environment the projection reads (`LEAN_PROJECT_PATH`, the web tools' URLs).
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.project = Project(self.env.get(PROJECT_PATH_ENV))
        self.versions: dict[str, int] = {}
        """The last version Beam reported for each canonical file: what a tool asks about (`_open`) and what
        `lean_build` re-syncs."""
        self.limits = _web.RateLimits()

    # ---- documents --------------------------------------------------------------------------------------------
    async def _open(self, cx: Ctx, file_path: str) -> Doc:
        """The file as this call sees it, at the version Beam reported last for it.

        Every version-bound operation reads the file again and refuses a version that is no longer its text's
        (`Outdated`, and the call runs again with `cx.fresh`), so the version need not be asked for first; a file
        not seen yet, or a fresh call, is read into Beam first (`update`: a version without a barrier).
        """
        root, file = self.project.resolve(file_path)
        known = self.versions.get(str(file))
        if known is not None and not cx.fresh:
            return self._doc(root, file, known)
        out = await cx.op("update", {"workspace": {"root": str(root)}, "path": str(file)})
        return self._doc(root, file, int(out["version"]))

    async def _synced(self, cx: Ctx, file_path: str) -> tuple[Doc, dict[str, Any]]:
        """Read the file and wait until Lean elaborated it (`sync`, every diagnostic in the result)."""
        root, file = self.project.resolve(file_path)
        args = {"workspace": {"root": str(root)}, "path": str(file), "diagnostic_scope": "all"}
        out = await cx.op("sync", {**args, "diagnostics_in_result": True})
        return self._doc(root, file, int(out["version"])), out

    def _doc(self, root: Path, file: Path, version: int) -> Doc:
        self.versions[str(file)] = version
        return Doc(root, file, version, _text.read_source(str(file)))

    async def _lean_diagnostics(self, cx: Ctx, doc: Doc, fallback: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Lean's diagnostics of the document version as Lean published them (`leanTags`, silent ones included).

        They come from Beam's diagnostics cache for the file (a read that never starts Lean work); when the cache
        already holds another version, from `fallback` (the `sync` items: visible diagnostics only).
        """
        broker = await cx.calls.broker()
        try:
            cached = broker.diagnostics(str(doc.file))
        except Exception as exc:
            if _code(exc) is None:
                raise
            cached = {}
        if cached.get("version") == doc.version:
            return [dict(d) for d in cached.get("diagnostics", [])]
        return [{"severity": d["severity"], "message": d["message"], "fullRange": d["range"]} for d in fallback]

    def _line(self, doc: Doc, line: int) -> str:
        lines = doc.lines
        if line < 1 or line > len(lines):
            raise CompatError(f"Line {line} out of range (file has {len(lines)} lines)")
        return lines[line - 1]

    # ---- diagnostics ------------------------------------------------------------------------------------------
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
            if _code(exc) is None:
                raise
            cached = {}
        items = [item for d in cached.get("diagnostics", []) if (item := _text.lsp_item(lsp, d)) is not None]
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
        end = _text.to_utf16(lsp[line], len(lsp[line])) if 0 <= line < len(lsp) else 0
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
                    if _code(exc) is None:
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

    # ---- goals ------------------------------------------------------------------------------------------------
    async def _goals(self, cx: Ctx, doc: Doc, line: int, column: int, mode: str) -> list[str] | None:
        """Goals at a 0-based position (None: Lean has no proof state there)."""
        try:
            out = await cx.op("goals", doc.args(**doc.at(line, column), mode=mode))
        except Exception as exc:
            if _code(exc) == "invalidParams":
                return None
            raise
        return [_text.goal_text(goal) for goal in out["goals"]]

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
                column = a["column"] - 1
                mode = "after" if column >= len(context.rstrip()) else "before"
                goals = await self._goals(cx, doc, a["line"] - 1, column, mode)
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

    # ---- navigation -------------------------------------------------------------------------------------------
    async def hover_info(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_hover_info`: Lean's hover at a position, the hovered text, and the diagnostics there."""
        doc = await self._open(cx, a["file_path"])
        line, column = a["line"] - 1, a["column"] - 1
        out = await cx.op("hover", doc.args(**doc.at(line, column)))
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
        out = await cx.op("completions", doc.args(**doc.at(line, column), limit=500))
        items = list(out["items"])
        prefix = _completion_prefix(doc.lines, a["line"], a["column"])

        def key(item: Mapping[str, Any]) -> tuple[int, str]:
            label = str(item["label"]).lower()
            if not prefix:
                return 0, label
            return (0 if label.startswith(prefix) else 1 if prefix in label else 2), label

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
        target = _uri_path(location.get("targetUri") or location.get("uri") or "")
        if target is None or not target.is_file():
            raise CompatError(f"Could not open declaration file `{target}` for `{symbol}`.")
        content = _text.read_source(str(target))
        lines = content.splitlines()
        shown = display(doc.root, target)
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
        out = await cx.op("references", doc.args(**doc.at(a["line"] - 1, a["column"] - 1), include_declaration=True))
        found = out["result"]
        total = len(found)
        if a["max_results"] is not None:
            found = found[: a["max_results"]]
        texts: dict[Path, list[str]] = {doc.file: doc.lsp}
        items = []
        for location in found:
            path = _uri_path(location.get("uri", ""))
            if path is None:
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
                    "file_path": display(doc.root, path),
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

    # ---- trying code ------------------------------------------------------------------------------------------
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
        diagnostics = [
            _text.message_item(lsp, m["severity"], m["text"], m["range"]["start"], _tags(m["text"]))
            for m in out["messages"]
        ]
        return {
            "success": not any(d["severity"] == "error" for d in diagnostics),
            "timed_out": False,
            "diagnostics": diagnostics,
        }

    async def verify(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_verify`: the theorem's axioms (`axioms`), their trust verdict, and the file's source scan."""
        name = a["theorem_name"]
        if not THEOREM_NAME.fullmatch(name):
            raise CompatError("Invalid theorem name. Use a Lean fully qualified name such as `Namespace.theorem`.")
        doc = await self._open(cx, a["file_path"])
        out = await cx.op("axioms", doc.args(name=name))
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

    # ---- project ----------------------------------------------------------------------------------------------
    async def build(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_build`: re-sync every file this server has open, saving their stale imports first."""
        if a["clean"] or a["fetch_cache"]:
            raise CompatError(
                "lean_build with clean or fetch_cache is not available: Beam builds the imports of open files "
                "(lean_sync's rebuild_imports); run `lake clean` or `lake exe cache get` yourself"
            )
        if a["lean_project_path"]:
            candidate = directory(a["lean_project_path"], None)
            if candidate is None:
                raise CompatError(f"Lean project path '{a['lean_project_path']}' does not exist.")
            self.project.root = candidate
        root = self.project.current()
        log: list[str] = []
        errors: list[str] = []
        for path in files_under(root, list(self.versions)):
            args = {"workspace": {"root": str(root)}, "path": path, "rebuild_imports": True}
            try:
                out = await cx.op("sync", args)
            except Exception as exc:
                if _code(exc) is None:
                    raise
                errors.append(f"{display(root, Path(path))}: {getattr(exc, 'message', exc)}")
                continue
            self.versions[path] = int(out["version"])
            log.extend(f"built {module}" for module in out.get("rebuilt_imports") or [])
            log.append(f"synced {display(root, Path(path))}")
        lines = log[-a["output_lines"] :] if a["output_lines"] > 0 else []
        return {"success": not errors, "output": "\n".join(lines), "errors": errors}

    async def local_search(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_local_search`: declarations in the project's sources, with Beam's symbol index when it runs."""
        if a["project_root"]:
            candidate = directory(a["project_root"], self.project.root)
            if candidate is None:
                raise CompatError(f"Invalid project root '{a['project_root']}': no such directory")
            self.project.root = candidate
        elif self.project.root is None:
            raise CompatError("Lean project path not set. Call a file-based tool first.")
        root = self.project.current()
        query = a["query"].strip()
        found = await anyio.to_thread.run_sync(_search.search, root, query, a["limit"])
        broker = await cx.calls.broker()
        index = "unavailable"
        if broker.cached(str(root)) is not None:
            try:
                out = await cx.op("workspace_symbols", {"workspace": {"root": str(root)}, "query": query})
            except Exception as exc:
                if _code(exc) is None:
                    raise
                index = "error"
            else:
                symbols = []
                for sym in out["result"]:
                    path = _uri_path((sym.get("location") or {}).get("uri", ""))
                    if isinstance(sym.get("name"), str) and path is not None:
                        symbols.append({"name": sym["name"], "kind": _search.INDEX_KIND, "file": display(root, path)})
                found = _search.merge(found, symbols, query, a["limit"])
                index = "consulted"
        return {"items": found, "index": index}

    # ---- widgets ----------------------------------------------------------------------------------------------
    async def get_widgets(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_get_widgets`: the panel widgets at a position, as Lean sends them."""
        doc = await self._open(cx, a["file_path"])
        out = await cx.op("widgets", doc.args(**doc.at(a["line"] - 1, a["column"] - 1)))
        return {"widgets": out["widgets"]}

    async def get_widget_source(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_get_widget_source`: a widget's JavaScript module by its hash."""
        doc = await self._open(cx, a["file_path"])
        out = await cx.op("widget_source", doc.args(javascript_hash=a["javascript_hash"]))
        return {"source": out["source"]}

    # ---- web search -------------------------------------------------------------------------------------------
    async def leansearch(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_leansearch`."""
        self.limits.take("leansearch", _web.TOOL_LIMIT)
        return await _web.leansearch(self.env, a["query"], a["num_results"])

    async def loogle(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_loogle` (rate limited only on the public service)."""
        if not _web.custom(self.env, _web.LOOGLE_URL_ENV):
            self.limits.take("loogle", _web.LOOGLE_LIMIT)
        return await _web.loogle(self.env, a["query"], a["num_results"])

    async def leanfinder(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_leanfinder`."""
        self.limits.take("leanfinder", _web.TOOL_LIMIT)
        return await _web.leanfinder(self.env, a["query"], a["num_results"], a["version"])

    async def hammer_premise(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_hammer_premise`: the first goal at a position, sent to the premise service."""
        if not _web.custom(self.env, _web.HAMMER_URL_ENV):
            self.limits.take("hammer_premise", _web.TOOL_LIMIT)
        doc = await self._open(cx, a["file_path"])
        goals = await self._goals(cx, doc, a["line"] - 1, a["column"] - 1, "before")
        if not goals:
            status = "no_goal" if goals is None else "complete"
            raise CompatError(
                f"No goals found at line {a['line']}, column {a['column']} (status: {status}). "
                "Try a different position."
            )
        return await _web.hammer_premise(self.env, goals[0], a["num_results"])


# ---- helpers --------------------------------------------------------------------------------------------------
T = TypeVar("T")
U = TypeVar("U")


async def both(first: Awaitable[T], second: Awaitable[U]) -> tuple[T, U]:
    """Two awaitables at once (Lean answers two positions of a document in parallel).

    The first failure is raised alone, as a sequential call would raise it (never an exception group: the surface
    maps errors one by one).
    """
    results: list[Any] = [None, None]
    failures: list[Exception] = []

    async def run(index: int, work: Awaitable[Any]) -> None:
        try:
            results[index] = await work
        except Exception as exc:
            failures.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0, first)
        tg.start_soon(run, 1, second)
    if failures:
        raise failures[0]
    return results[0], results[1]


def _find_symbol(symbols: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    for symbol in symbols:
        if symbol.get("name") == name:
            return symbol
        found = _find_symbol(symbol.get("children") or [], name)
        if found is not None:
            return found
    return None


def _tags(message: str) -> list[int] | None:
    """`leanTags` of a message Beam gives without them: Lean tags its "unsolved goals" errors (tag 1)."""
    return [1] if message.startswith("unsolved goals") else None


def _uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(os.path.realpath(unquote(parsed.path)))


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
