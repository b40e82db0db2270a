"""`lean-beam` results as text for a person: what a terminal shows instead of the JSON.

Owns one renderer per output model of the registry (keyed by the model's class name, so a new output model
without one fails a test, and falls back to JSON here), the exit status a result implies (Lean reported errors in
the file), and errors as text. Diagnostics and positions print as Lean prints them (`render`); goals as Lean
shows them (`hyps ⊢ target`); hover as its text; symbols as an indented outline; probe results as messages
followed by the goals after (one block per batch attempt); axioms, profiler times and scratch messages as Lean
prints them. It reads files only through `Sources` and never calls the broker.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .position import Source, lean_position, where
from .render import Sources, diagnostic_key, diagnostic_line, display, error_line, message_line

Result = Mapping[str, Any]
SCRATCH: Final = "<scratch>"
"""How a `run_code` text is named in its positions (it is no file)."""


@dataclasses.dataclass
class View:
    """What rendering a result needs besides the result: the project's files, the call's file, what was printed.

    Attributes:
        sources: The project's files (for positions and source lines).
        path: The call's file argument (root-relative), when it has one.
        printed: Keys of the diagnostics already printed (streamed live while the call ran).
        text: The call's Lean text argument, when it has one (`run_code`'s messages are placed in it).
    """

    sources: Sources
    path: str | None = None
    printed: set[str] = dataclasses.field(default_factory=set)
    text: str | None = None

    def relative(self, uri: str) -> str:
        """A location's URI as a path: root-relative inside the project."""
        path = display(uri)
        root = self.sources.root.rstrip("/") + "/"
        return path[len(root) :] if path.startswith(root) else path

    def where(self, uri_or_path: str, position: Mapping[str, Any] | None) -> str:
        """`FILE:LINE:COL` as Lean prints it."""
        return self.sources.where(self.relative(uri_or_path), position)

    def diagnostics(self, items: Sequence[Mapping[str, Any]]) -> list[str]:
        """The lines of the diagnostics not printed yet (and remember them)."""
        out = []
        for item in items:
            key = diagnostic_key(item)
            if key not in self.printed:
                self.printed.add(key)
                out.append(diagnostic_line(item, self.sources))
        return out


# ---- exit status --------------------------------------------------------------------------------------
def file_has_errors(result: Result) -> bool:
    """Whether a result reports errors in the file (a sync that is not save-ready, or errors counted).

    Only a sync's verdict counts: other answers that list diagnostics (`interactive_diagnostics`) answered the call.
    """
    readiness = result.get("readiness")
    diagnostics = result.get("diagnostics")
    counts = (diagnostics.get("counts") if isinstance(diagnostics, Mapping) else None) or {}
    if isinstance(readiness, Mapping) and readiness.get("save_ready") is False:
        return True
    return isinstance(counts.get("error"), int) and counts["error"] > 0


def refused_save(error: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The sync verdict of a save refused because the file has errors (`data.sync`), else None."""
    data = error.get("data")
    sync = data.get("sync") if isinstance(data, Mapping) else None
    return sync if isinstance(sync, Mapping) and file_has_errors(sync) else None


# ---- pieces -------------------------------------------------------------------------------------------
def goal_lines(goals: Sequence[Mapping[str, Any]]) -> list[str]:
    """Goals as Lean shows them: `case` name, hypotheses `a b : T`, then `⊢ target`; a blank line between."""
    if not goals:
        return ["no goals"]
    out: list[str] = []
    for i, goal in enumerate(goals):
        if i:
            out.append("")
        if goal.get("userName"):
            out.append(f"case {goal['userName']}")
        for hyp in goal.get("hyps") or []:
            value = f" := {hyp['value']}" if hyp.get("value") is not None else ""
            out.append(f"{' '.join(hyp.get('names') or ['_'])} : {hyp.get('type', '')}{value}")
        out.append(f"{goal.get('goalPrefix', '⊢ ')}{goal.get('target', '')}")
    return out


def _counts(counts: Mapping[str, Any]) -> str:
    parts = []
    for label in ("error", "warning", "information", "hint"):
        n = counts.get(label)
        if isinstance(n, int) and n:
            word = "info message" if label == "information" else label
            parts.append(f"{n} {word}{'s' if n != 1 else ''}")
    return ", ".join(parts) or "no errors or warnings"


_READINESS: Final = {
    "ok": "save-ready",
    "documentErrors": "not save-ready",
    "documentDidNotElaborateSuccessfully": "did not elaborate successfully",
}


def sync_summary(sync: Result) -> str:
    """`Demo/Broken.lean (version 1): 1 error, not save-ready`."""
    counts = (sync.get("diagnostics") or {}).get("counts") or {}
    readiness = sync.get("readiness") or {}
    verdict = _READINESS.get(str(readiness.get("reason")), str(readiness.get("reason")))
    return f"{sync.get('path')} (version {sync.get('version')}): {_counts(counts)}, {verdict}"


def _blocking(sync: Result, view: View) -> list[str]:
    path = str(sync.get("path", view.path or "?"))
    readiness = sync.get("readiness") or {}
    items = [{**d, "path": path} for d in readiness.get("blocking_diagnostics") or []]
    messages = readiness.get("blocking_messages") or []
    return view.diagnostics(items) + [message_line(path, "error", str(m.get("message"))) for m in messages]


def error_lines(result: Result, view: View) -> list[str]:
    """The errors of a sync verdict not printed yet, as Lean prints them (empty for any other result).

    With JSON output stderr carries them in every mode (`--quiet`, or a warm sync that streamed nothing), so a
    script that keeps only stderr still reads what is wrong.
    """
    return _blocking(result, view) if isinstance(result.get("readiness"), Mapping) else []


def _hover_text(contents: Any) -> list[str]:
    if isinstance(contents, list):
        return [line for part in contents for line in _hover_text(part)]
    if isinstance(contents, Mapping):
        text = str(contents.get("value", ""))
    else:
        text = str(contents)
    out = []
    for line in text.splitlines():
        if line.startswith("```"):
            continue
        out.append("" if line.strip() == "***" else line)
    return out


def _source_line(view: View, uri: str, position: Mapping[str, Any] | None) -> str:
    source = view.sources.get(view.relative(uri))
    line = (position or {}).get("line")
    return source.line(line).strip() if source is not None and isinstance(line, int) else ""


# ---- one renderer per output model --------------------------------------------------------------------
def _drop(result: Result, view: View) -> list[str]:
    root = (result.get("workspace") or {}).get("root")
    if result.get("dropped"):
        return [f"dropped the Lean runtime of {root}"]
    return [f"nothing to drop: no Lean runtime for {root}"]


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Run messages as Lean prints them: information as its text, the rest prefixed by their severity and name."""
    out = []
    for message in messages:
        severity = str(message.get("severity"))
        text = str(message.get("text", ""))
        out.append(text if severity == "information" else message_line(None, severity, text, message.get("code")))
    return out


def _run(result: Result, view: View) -> list[str]:
    out = _messages(result.get("messages") or [])
    out.extend(str(t) for t in result.get("traces") or [])
    state = result.get("proof_state")
    if isinstance(state, Mapping):
        if out:
            out.append("")
        out.extend(goal_lines(state.get("goals") or []))
    if not result.get("success") and not out:
        out.append("error: the text did not elaborate")
    if result.get("next_handle") is not None:
        out.append(f"handle: {json.dumps(result['next_handle'], ensure_ascii=False, separators=(',', ':'))}")
    return out or ["ok"]


def _hover(result: Result, view: View) -> list[str]:
    if "contents" not in result:
        return ["no hover information"]
    return _hover_text(result["contents"]) or ["no hover information"]


def _signature_help(result: Result, view: View) -> list[str]:
    signatures = result.get("signatures")
    if not signatures:
        return ["no signature help"]
    out = []
    for signature in signatures:
        out.append(str(signature.get("label", "")))
        doc = signature.get("documentation")
        if doc:
            out.extend(f"  {line}" for line in _hover_text(doc))
    return out


def _symbols(items: Sequence[Mapping[str, Any]], view: View, depth: int, rows: list[tuple[str, str]]) -> None:
    source = view.sources.get(view.path) if view.path is not None else None
    for item in items:
        start = (item.get("range") or {}).get("start") or {}
        chosen = (item.get("selectionRange") or {}).get("start") or start
        line, character = _int(chosen.get("line")), _int(chosen.get("character"))
        head = ""
        if source is not None and start.get("line") == line:
            head = source.line(line)[_int(start.get("character")) : character].strip()
        name = f"{head} {item.get('name')}" if head and len(head) <= 40 else str(item.get("name"))
        rows.append(("  " * depth + name, str(lean_position(source, line, character))))
        _symbols(item.get("children") or [], view, depth + 1, rows)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _lsp_list(result: Result, view: View) -> list[str]:
    items = result.get("result") or []
    if not items:
        return ["nothing found"]
    first = items[0]
    if "selectionRange" in first or "children" in first:  # DocumentSymbol: an outline
        rows: list[tuple[str, str]] = []
        _symbols(items, view, 0, rows)
        width = min(60, max(len(name) for name, _ in rows))
        return [f"{name:<{width}}  {where}".rstrip() for name, where in rows]
    out = []
    for item in items:
        if "location" in item:  # SymbolInformation (workspace symbols)
            location = item["location"]
            container = f" (in {item['containerName']})" if item.get("containerName") else ""
            start = (location.get("range") or {}).get("start")
            out.append(f"{view.where(location.get('uri', '?'), start)}: {item.get('name')}{container}")
            continue
        uri = str(item.get("targetUri", item.get("uri", "?")))  # LocationLink or Location
        start = ((item.get("targetSelectionRange") or item.get("range")) or {}).get("start")
        text = _source_line(view, uri, start)
        out.append(f"{view.where(uri, start)}: {text}" if text else view.where(uri, start))
    return out


def _goals(result: Result, view: View) -> list[str]:
    return goal_lines(result.get("goals") or [])


def _todo(result: Result, view: View) -> list[str]:
    path = view.path or "?"
    items = result.get("items") or []
    if not items:
        return [f"{path}: nothing to do (version {result.get('version')})"]
    out = []
    for item in items:
        start = (item.get("range") or {}).get("start")
        message = str(item.get("message") or item.get("kind"))
        out.append(f"{view.where(path, start)}: {item.get('kind')}: {message}")
        text, at = item.get("run_at_text"), item.get("run_at_position")
        if text and isinstance(at, Mapping):
            out.append(f"  try: lean-beam run-at {shlex.quote(view.where(path, at))} --text {shlex.quote(str(text))}")
    return out


def _edits(edit: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found = [(uri, e) for uri, edits in (edit.get("changes") or {}).items() for e in edits]
    for change in edit.get("documentChanges") or []:
        uri = (change.get("textDocument") or {}).get("uri", "?")
        found.extend((uri, e) for e in change.get("edits") or [])
    return found


def _code_action(result: Result, view: View) -> list[str]:
    action = result.get("code_action") or {}
    out = [str(action.get("title", "code action"))]
    for uri, edit in _edits(action.get("edit") or {}):
        where = view.where(uri, (edit.get("range") or {}).get("start"))
        out.append(f"  {where}: replace with {json.dumps(edit.get('newText', ''), ensure_ascii=False)}")
    return out


def _null(result: Result, view: View) -> list[str]:
    return ["done"]


def _update(result: Result, view: View) -> list[str]:
    state = "read from disk" if result.get("changed") else "unchanged"
    return [f"{view.path} (version {result.get('version')}): {state}"]


def _rebuilt(result: Result) -> list[str]:
    """What `--rebuild-imports` did before the file was checked (nothing when it was not asked or not needed)."""
    rebuilt = result.get("rebuilt_imports")
    if rebuilt is None:
        return []
    if not rebuilt:  # saved already, but the file's worker had loaded them before: it was started again
        return [f"{result.get('path')}: reloaded its imports (they were saved already)"]
    return [f"{result.get('path')}: saved its stale imports first: {', '.join(map(str, rebuilt))}"]


def _sync(result: Result, view: View) -> list[str]:
    items = (result.get("diagnostics") or {}).get("items") or []
    return [*_rebuilt(result), *view.diagnostics(items), sync_summary(result)]


def _saved(saved: Result) -> str:
    return f"{saved.get('path')} (version {saved.get('version')}): saved {saved.get('module')} to {saved.get('olean')}"


def _save(result: Result, view: View) -> list[str]:
    return [_saved(result)]


def _close_save(result: Result, view: View) -> list[str]:
    return [_saved(result.get("saved") or {}), f"{view.path}: closed"]


def _close(result: Result, view: View) -> list[str]:
    return [f"{view.path}: closed"]


def _completions(result: Result, view: View) -> list[str]:
    items = result.get("items") or []
    out = []
    for item in items:
        kind = f" ({item['kind']})" if item.get("kind") else ""
        detail = f" : {item['detail']}" if item.get("detail") else ""
        out.append(f"{item.get('label')}{detail}{kind}")
    dropped = result.get("dropped")
    if isinstance(dropped, int) and dropped:
        out.append(f"... and {dropped} more (--limit N shows more)")
    return out or ["no completions"]


def _outline(result: Result, view: View) -> list[str]:
    out = [f"import {i.get('module')}" for i in result.get("imports") or []]
    rows: list[tuple[str, str]] = []
    source = view.sources.get(view.path) if view.path is not None else None
    for entry in result.get("declarations") or []:
        name, signature = str(entry.get("name")), entry.get("signature")
        shown = signature if isinstance(signature, str) and signature.startswith(name) else name
        head = " ".join([*(entry.get("modifiers") or []), *([entry["kind"]] if entry.get("kind") else []), shown])
        start = (entry.get("selection_range") or entry.get("range") or {}).get("start") or {}
        where = lean_position(source, _int(start.get("line")), _int(start.get("character")))
        rows.append(("  " * len(entry.get("container") or []) + head.splitlines()[0], str(where)))
    if rows:
        width = min(60, max(len(text) for text, _ in rows))
        out.extend(f"{text:<{width}}  {where}" for text, where in rows)
    return out or ["nothing declared"]


def _attempts(result: Result, view: View) -> list[str]:
    out = []
    for i, attempt in enumerate(result.get("attempts") or [], 1):
        out.append(f"attempt {i}: {'succeeded' if attempt.get('success') else 'failed'}")
        # Indent every line of a multi-line message too, so each attempt reads as one block.
        out.extend(f"  {piece}" if piece else "" for line in _run(attempt, view) for piece in line.split("\n"))
    return out or ["no attempts"]


def _axioms(result: Result, view: View) -> list[str]:
    out = _messages(result.get("messages") or [])
    name = result.get("name")
    if result.get("uses_sorry"):
        out.append(f"warning: {name} depends on sorryAx (a sorry, or an error Lean recovered from)")
    others = [a for a in result.get("nonstandard") or [] if a != "sorryAx"]
    if others:
        out.append(f"{name} depends on nonstandard axioms: {', '.join(others)}")
    return out or [f"{name}: Lean printed no axioms"]


def _profile(result: Result, view: View) -> list[str]:
    out = [f"{result.get('name')}: {result.get('total_ms')} ms"]
    out.extend(f"  {c.get('category')}: {c.get('ms')} ms" for c in result.get("categories") or [])
    for line in result.get("lines") or []:
        where = view.where(view.path or "?", {"line": _int(line.get("line")), "character": 0})
        out.append(f"{where}: {line.get('ms')} ms: {line.get('text')}")
    steps = result.get("slowest") or []
    if steps:
        out.append("slowest steps (time of their own):")
        out.extend(f"  [{s.get('trace_class')}] {s.get('self_ms')} ms: {s.get('text')}" for s in steps)
    return out + _messages(result.get("messages") or [])


def _run_code(result: Result, view: View) -> list[str]:
    out = []
    scratch = Source.of(view.text) if view.text is not None else None
    for message in result.get("messages") or []:
        at = where(SCRATCH, scratch, (message.get("range") or {}).get("start"))
        out.append(message_line(at, str(message.get("severity")), str(message.get("text")), message.get("code")))
    if not out:
        out.append("ok" if result.get("success") else "error: the text did not elaborate")
    return out


def _term_goal(result: Result, view: View) -> list[str]:
    goal = result.get("goal")
    return str(goal).splitlines() if goal else ["no term here"]


def _widgets(result: Result, view: View) -> list[str]:
    out = []
    for widget in result.get("widgets") or []:
        start = (widget.get("range") or {}).get("start")
        where = f"{view.where(view.path, start)}: " if view.path is not None and start else ""
        out.append(f"{where}{widget.get('id', '?')} (javascriptHash {widget.get('javascriptHash', '?')})")
    return out or ["no widgets"]


def _widget_source(result: Result, view: View) -> list[str]:
    source = result.get("source") or {}
    return str(source.get("sourcetext", "")).splitlines() or ["(empty module)"]


def _tagged_text(value: Any) -> str:
    """The text of Lean's `TaggedText` (`{"text"}`, `{"append": [...]}`, `{"tag": [info, tagged]}`).

    The same rule as beam-lsp's tagged-text models (`plain()`), kept here so that printing needs no model module
    (a warm `lean-beam` builds its parser and prints without pydantic).
    """
    if isinstance(value, Mapping):
        if "text" in value:
            return str(value["text"])
        if "append" in value:
            return "".join(_tagged_text(part) for part in value["append"] or [])
        if "tag" in value and isinstance(value["tag"], list) and len(value["tag"]) == 2:
            return _tagged_text(value["tag"][1])
    return ""


def _message_text(value: Any) -> str:
    """The plain text of an interactive message: `TaggedText` of Lean's `MsgEmbed`s.

    Expressions, goals, widgets and traces are tags whose text is in the embed, not in the tagged part.
    """
    if not isinstance(value, Mapping):
        return ""
    if "text" in value:
        return str(value["text"])
    if "append" in value:
        return "".join(_message_text(part) for part in value["append"] or [])
    tag = value.get("tag")
    if not (isinstance(tag, list) and len(tag) == 2):
        return ""
    embed, content = tag
    if isinstance(embed, Mapping):
        if "expr" in embed:
            return _tagged_text(embed["expr"])
        if isinstance(embed.get("goal"), Mapping):
            return f"⊢ {_tagged_text(embed['goal'].get('type'))}"
        if isinstance(embed.get("widget"), Mapping):
            return _message_text(embed["widget"].get("alt"))
        if isinstance(embed.get("trace"), Mapping):
            trace = embed["trace"]
            children = (trace.get("children") or {}).get("strict") or []
            return "".join([_message_text(trace.get("msg")), *("\n" + _message_text(c) for c in children)])
    return _message_text(content)


_LSP_SEVERITIES: Final = {1: "error", 2: "warning", 3: "information", 4: "hint"}


def _interactive_diagnostics(result: Result, view: View) -> list[str]:
    out = []
    for item in result.get("diagnostics") or []:
        start = (item.get("range") or {}).get("start")
        where = view.where(view.path, start) if view.path is not None else "?"
        severity = _LSP_SEVERITIES.get(_int(item.get("severity")), "error")
        out.append(message_line(where, severity, _message_text(item.get("message")), item.get("code")))
    return out or ["no diagnostics"]


RENDERERS: Final[dict[str, Callable[[Result, View], list[str]]]] = {
    "DropResult": _drop,
    "RunResult": _run,
    "HoverResult": _hover,
    "SignatureHelpResult": _signature_help,
    "LspList": _lsp_list,
    "GoalsResult": _goals,
    "TodoResult": _todo,
    "CodeActionResolveResult": _code_action,
    "NullResult": _null,
    "UpdateResult": _update,
    "SyncReply": _sync,
    "SaveReply": _save,
    "CloseSaveResult": _close_save,
    "CloseResult": _close,
    "CompletionsResult": _completions,
    "OutlineResult": _outline,
    "AttemptsResult": _attempts,
    "AxiomsResult": _axioms,
    "ProfileResult": _profile,
    "RunCodeResult": _run_code,
    "TermGoalResult": _term_goal,
    "WidgetsResult": _widgets,
    "WidgetSourceResult": _widget_source,
    "InteractiveDiagnosticsResult": _interactive_diagnostics,
}
"""Output model name -> renderer (`HoverResult` and `SignatureHelpResult` also cover `{"result": null}`)."""


def render(output_model: str, result: Result, view: View) -> list[str]:
    """The text of a result (pretty JSON for an output model without a renderer)."""
    renderer = RENDERERS.get(output_model)
    if renderer is None:
        return json.dumps(result, ensure_ascii=False, indent=2).splitlines()
    return renderer(result, view)


def render_error(error: Mapping[str, Any], view: View, *, verbose: bool = False) -> tuple[list[str], list[str]]:
    """An error as `(stdout lines, stderr lines)`: a refused save shows the file's errors on stdout.

    The protocol code of the error (`[invalidParams]`) is shown only when `verbose` (`error_line`).
    """
    out: list[str] = []
    sync = refused_save(error)
    if sync is not None:
        out = [*_blocking(sync, view), sync_summary(sync)]
        return out, ["lean-beam: not saved: the file has errors"]
    return out, [error_line(error, verbose=verbose)]
