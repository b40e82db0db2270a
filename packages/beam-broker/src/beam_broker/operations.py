"""The operation registry: every broker operation declared once, in the public tool order.

Each entry names its input and output models, its handler (the coroutine function that implements it) and its
flags. The MCP tool list (names, input and output schemas, annotations, descriptions) and the `lean-beam` CLI
subcommands are derived from the registry; nothing else lists operations, and nothing dispatches by name.

A spec (`_spec`, re-exported here) is generic in its input and output models (`WorkspaceOperation[SyncInput,
SyncReply]`), so the type checker holds every handler to the models its entry names. A `Registry` is what a broker
(and the MCP server) serves: `REGISTRY`, built from `OPERATIONS`, unless a caller passes another (tests inject
handlers that way).

Importing this module is cheap: it loads the models, and the handler modules (which build on the runtime and the
Lean client stack) only when a handler first runs, so the MCP server answers `tools/list` from here at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from beam_lsp.lazy import lazy_coroutines

from . import models as m
from ._ops import models as om
from ._probes import models as pm
from ._spec import PREPARING, BrokerOperation, Operation, OperationSpec, Registry, Scope, WorkspaceOperation
from .events import Progress

__all__ = [
    "BY_NAME",
    "BY_TOOL",
    "NO_SOURCE_EDITS",
    "OPERATIONS",
    "PREPARING",
    "PROGRESS_SENTENCE",
    "REGISTRY",
    "SPECULATIVE",
    "BrokerOperation",
    "Operation",
    "OperationSpec",
    "Progress",
    "Registry",
    "Scope",
    "WorkspaceOperation",
]

if TYPE_CHECKING:
    from ._ops import completions, goals, navigation, outline, save, sync, widgets, workspaces
    from ._probes import attempts, axioms, profile, run, scratch

NO_SOURCE_EDITS = "Beam never applies source edits to `.lean` files on disk; the client applies source edits."
SPECULATIVE = (
    "The text is not persisted as source: to keep it, first edit and save the Lean file, and only then call "
    "lean_sync. Lean is not an OS sandbox: code may perform IO."
)
PROGRESS_SENTENCE = "Pass _meta.progressToken for progress; a slow call without one sends one status log."
"""The progress sentence every tool description ends with (the MCP server's own tools use it too)."""
if not TYPE_CHECKING:  # type checkers see the modules themselves, and so check every handler against its models
    completions, goals, navigation, outline, save, sync, widgets, workspaces = (
        lazy_coroutines(f"{__package__}._ops.{name}")
        for name in ("completions", "goals", "navigation", "outline", "save", "sync", "widgets", "workspaces")
    )
    attempts, axioms, profile, run, scratch = (
        lazy_coroutines(f"{__package__}._probes.{name}") for name in ("attempts", "axioms", "profile", "run", "scratch")
    )


_REBUILD = frozenset({"rebuild_imports", "rebuilt_imports"})
"""`sync`/`refresh` saving stale imports first: beyond upstream Beam's tool surface."""


def _d(*parts: str) -> str:
    return " ".join([*parts, PROGRESS_SENTENCE, NO_SOURCE_EDITS])


_FULL_PROGRESS = Progress.PREPARATION | Progress.SETUP | Progress.FILE

_DECLARED = (  # not annotated: each entry is typed by its own models, so each handler is checked against them
    BrokerOperation(
        "drop_workspace",
        m.WorkspaceInput,
        m.DropResult,
        workspaces.drop_workspace,
        description="Stop this workspace's Lean and forget its documents and handles. dropped is false when none "
        f"was cached; it selects nothing for later calls. {PROGRESS_SENTENCE}",
        idempotent=True,
        cancellable=False,
        fence=True,
        progress=Progress.PREPARATION,
        preparing="preparing workspace eviction",
    ),
    WorkspaceOperation(
        "run_at",
        pm.RunAtInput,
        pm.RunResult,
        run.run_at,
        description=_d(
            "Run Lean text at a position of a document version: inside a proof as tactics on the goals there, "
            "else as a command after the enclosing command. No handle is kept.",
            SPECULATIVE,
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
    ),
    WorkspaceOperation(
        "run_at_handle",
        pm.RunAtInput,
        pm.RunResult,
        run.run_at_handle,
        description=_d(
            "As lean_run_at, but a successful result may include next_handle (for lean_run_with, lean_release).",
            SPECULATIVE,
        ),
        destructive=False,
        version_bound=True,
        metrics_key="run_at",
        progress=_FULL_PROGRESS,
    ),
    WorkspaceOperation(
        "hover",
        m.PositionInput,
        m.HoverResult,
        navigation.hover,
        description=_d(
            "Hover (type and docs) at a position of a document version.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "signature_help",
        m.PositionInput,
        m.SignatureHelpResult,
        navigation.signature_help,
        description=_d(
            "Signature help at a position of a document version.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "definition",
        m.PositionInput,
        m.LspList,
        navigation.definition,
        description=_d(
            "Where the symbol at a position of a document version is defined.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "references",
        m.ReferencesInput,
        m.LspList,
        navigation.references,
        description=_d(
            "References to the symbol at a position of a document version, across the project.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "document_symbols",
        m.DocumentInput,
        m.LspList,
        navigation.document_symbols,
        description=_d(
            "Declarations and sections of a document version.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "workspace_symbols",
        m.WorkspaceSymbolsInput,
        m.LspList,
        navigation.workspace_symbols,
        description=_d(
            "Fuzzy search for declarations across the workspace.",
        ),
        read_only=True,
        progress=Progress.PREPARATION,
    ),
    WorkspaceOperation(
        "goals",
        m.GoalsInput,
        m.GoalsResult,
        goals.goals,
        description=_d(
            "Proof goals before or after the tactic at a position of a document version.",
        ),
        read_only=True,
        version_bound=True,
        extension_fields=frozenset({"exact"}),
    ),
    WorkspaceOperation(
        "todo",
        m.TodoInput,
        m.TodoResult,
        goals.todo,
        description=_d(
            "Actionable items in a range of a document version (sorry, holes, diagnostics, code actions, "
            "incomplete proofs), with positions where lean_run_at can try a fix.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "code_action_resolve",
        m.CodeActionResolveInput,
        m.CodeActionResolveResult,
        goals.code_action_resolve,
        description=_d(
            "Resolve a lean_todo code_action. The result may contain an LSP WorkspaceEdit; the client must apply "
            "it, then call lean_sync.",
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "run_with",
        pm.RunWithInput,
        pm.RunResult,
        run.run_with,
        description=_d(
            "Continue from a handle without consuming it; a successful result may include a fresh next_handle.",
            SPECULATIVE,
        ),
        destructive=False,
    ),
    WorkspaceOperation(
        "run_with_linear",
        pm.RunWithInput,
        pm.RunResult,
        run.run_with_linear,
        description=_d(
            "Continue from a handle and consume it; a successful result may include a fresh next_handle.",
            SPECULATIVE,
        ),
        metrics_key="run_with",
    ),
    WorkspaceOperation(
        "release",
        pm.ReleaseInput,
        m.NullResult,
        run.release,
        description=_d(
            "Release a proof handle.",
        ),
    ),
    WorkspaceOperation(
        "update",
        m.FileInput,
        m.UpdateResult,
        sync.update,
        description=_d(
            "Read the current on-disk Lean source into Beam's mirror and return its document version (no "
            "waiting for Lean).",
        ),
        progress=Progress.PREPARATION,
        metrics_key="update_file",
    ),
    WorkspaceOperation(
        "sync",
        m.SyncInput,
        m.SyncReply,
        sync.sync,
        description=_d(
            "Read the current on-disk Lean source, wait until Lean elaborated it, and return diagnostic counts "
            "and save readiness. Beam never applies or recovers speculative text: edit and save the file first.",
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="sync_file",
        extension_fields=_REBUILD,
        heavy=True,
    ),
    WorkspaceOperation(
        "refresh",
        m.SyncInput,
        m.SyncReply,
        sync.refresh,
        description=_d(
            "Reopen the document from the current on-disk Lean source (version 1) and sync it; use after its "
            "imports changed.",
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="refresh_file",
        extension_fields=_REBUILD,
        heavy=True,
    ),
    WorkspaceOperation(
        "save",
        m.SaveInput,
        m.SaveReply,
        save.save,
        description=_d(
            "Sync, then write the file's Lean/Lake build artifacts when it is save-ready (a checkpoint, not a CI "
            "build).",
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="save_olean",
        heavy=True,
    ),
    WorkspaceOperation(
        "close_save",
        m.SaveInput,
        m.CloseSaveResult,
        save.close_save,
        description=_d(
            "Write the document's Lean/Lake build artifacts (as lean_save), then close it.",
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="close",
        heavy=True,
    ),
    WorkspaceOperation(
        "close",
        m.FileInput,
        m.CloseResult,
        sync.close,
        description=_d(
            "Close the document in Lean; succeeds when it is not open.",
        ),
        idempotent=True,
        progress=Progress.PREPARATION,
    ),
    # ---- beyond upstream Beam's 24 tools: `--tools beam` leaves these out ----------------------------------
    WorkspaceOperation(
        "completions",
        om.CompletionsInput,
        om.CompletionsResult,
        completions.completions,
        description=_d(
            "Lean's completions at a position of a document version, in Lean's order, with kind, detail and "
            "docs; dropped counts those beyond limit.",
        ),
        read_only=True,
        version_bound=True,
        extension=True,
    ),
    WorkspaceOperation(
        "outline",
        om.OutlineInput,
        om.OutlineResult,
        outline.outline,
        description=_d(
            "Imports, then every declaration, namespace and section of a document version with its kind, "
            "modifiers, signature, docstring and range (once Lean elaborated the whole file).",
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
        heavy=True,
    ),
    WorkspaceOperation(
        "attempts",
        pm.AttemptsInput,
        pm.AttemptsResult,
        attempts.attempts,
        description=_d(
            "Run several alternative texts at one position of a document version, each as lean_run_at would, "
            "concurrently; each answers success, messages and goals (with handles: true, next_handle). The cost "
            "follows the enclosing declaration, not the file.",
            SPECULATIVE,
        ),
        destructive=False,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
        heavy=True,
    ),
    WorkspaceOperation(
        "axioms",
        pm.AxiomsInput,
        pm.AxiomsResult,
        axioms.axioms,
        description=_d(
            "The axioms a declaration (at a position, or by name) depends on, from #print axioms on a private "
            "mirror: uses_sorry flags sorryAx; nonstandard lists those beyond propext, Classical.choice and "
            "Quot.sound.",
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
    ),
    WorkspaceOperation(
        "profile",
        pm.ProfileInput,
        pm.ProfileResult,
        profile.profile,
        description=_d(
            "Lean's profiler on the declaration at a position of a document version, on a private mirror: times "
            "per category and per line, the slowest trace steps, and its messages.",
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
        heavy=True,
    ),
    WorkspaceOperation(
        "run_code",
        pm.RunCodeInput,
        pm.RunCodeResult,
        scratch.run_code,
        description=_d(
            "Check a standalone Lean text (it may import the workspace's modules) in memory: every message with "
            "its range, success when there is no error. Lean is not an OS sandbox: #eval may perform IO.",
        ),
        read_only=True,
        progress=_FULL_PROGRESS,
        extension=True,
        heavy=True,
    ),
    WorkspaceOperation(
        "term_goal",
        m.PositionInput,
        om.TermGoalResult,
        widgets.term_goal,
        description=_d(
            "The expected type of the term at a position of a document version, and the term's range; null where "
            "there is no term.",
        ),
        read_only=True,
        version_bound=True,
        extension=True,
    ),
    WorkspaceOperation(
        "widgets",
        m.PositionInput,
        om.WidgetsResult,
        widgets.widgets,
        description=_d(
            "Lean's panel widgets at a position of a document version (id, javascriptHash, props, range); "
            "lean_widget_source gives their JavaScript.",
        ),
        read_only=True,
        version_bound=True,
        extension=True,
    ),
    WorkspaceOperation(
        "widget_source",
        om.WidgetSourceInput,
        om.WidgetSourceResult,
        widgets.widget_source,
        description=_d(
            "A widget's JavaScript module, by the javascriptHash lean_widgets returned (text in source.sourcetext).",
        ),
        read_only=True,
        version_bound=True,
        extension=True,
    ),
    WorkspaceOperation(
        "interactive_diagnostics",
        om.InteractiveDiagnosticsInput,
        om.InteractiveDiagnosticsResult,
        widgets.interactive_diagnostics,
        description=_d(
            "Lean's interactive diagnostics (tagged text) of a document version once elaborated, optionally of "
            "lines start_line up to end_line.",
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
        heavy=True,
    ),
)

_SNAPSHOT = frozenset({"snapshot"})
"""Upstream Beam's current snapshot tokens beside versions: beyond the `beam` tool surface."""
_ANSWERS_SNAPSHOT = frozenset({"update", "sync", "refresh", "save", "close_save", "todo", "code_action_resolve"})
"""The operations whose results carry the document's `snapshot` (at the top, or in the save they nest)."""


def _snapshots(op: Operation) -> Operation:
    """`op` with `snapshot` among its extension fields when it takes one (a `PinnedInput`) or answers one."""
    if op.name in _ANSWERS_SNAPSHOT or issubclass(op.input_model, m.PinnedInput):
        return dataclasses.replace(op, extension_fields=op.extension_fields | _SNAPSHOT)
    return op


OPERATIONS: tuple[Operation, ...] = tuple(_snapshots(op) for op in _DECLARED)
"""Every operation, in public tool order."""
REGISTRY = Registry(OPERATIONS)
"""The registry every broker and MCP server serves unless given another."""
BY_TOOL: Mapping[str, Operation] = REGISTRY.by_tool
BY_NAME: Mapping[str, Operation] = REGISTRY.by_name
