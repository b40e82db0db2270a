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
    "The text is run speculatively against the selected document snapshot and is not persisted as source. "
    "To keep a result, first edit and save the Lean file with your normal file-editing tool, and only then "
    "call lean_sync (or lean_update) so Beam reads it from disk. Lean elaboration is not an OS sandbox: "
    "project code and tactics may perform IO."
)
PROGRESS_SENTENCE = (
    "Pass tools/call params._meta.progressToken for live progress; without one, a slow call emits at most "
    "one status log."
)
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
        description="Evict the cached Lean runtime for this workspace descriptor (shut its Lean server down, forget "
        "its document mirror, invalidate its proof handles). Idempotent: returns dropped: false with reason "
        "'notFound' when nothing is cached. Cache management only; it selects no context for later calls. "
        f"{PROGRESS_SENTENCE}",
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
            "Run Lean text at a position of a document version: inside a tactic proof the text runs as tactics "
            "on the goals there, elsewhere as a command after the enclosing command.",
            SPECULATIVE,
            "No follow-up handle is retained.",
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
            "Like lean_run_at, but a successful result may include next_handle: an opaque handle for "
            "lean_run_with / lean_run_with_linear / lean_release.",
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
        description=_d("Hover information (type and docs) at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "signature_help",
        m.PositionInput,
        m.SignatureHelpResult,
        navigation.signature_help,
        description=_d("Signature help at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "definition",
        m.PositionInput,
        m.LspList,
        navigation.definition,
        description=_d("Definition locations of the symbol at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "references",
        m.ReferencesInput,
        m.LspList,
        navigation.references,
        description=_d("References to the symbol at a position of a document version, across the project."),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "document_symbols",
        m.DocumentInput,
        m.LspList,
        navigation.document_symbols,
        description=_d("Declarations and sections of a document version."),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "workspace_symbols",
        m.WorkspaceSymbolsInput,
        m.LspList,
        navigation.workspace_symbols,
        description=_d("Fuzzy search for declarations across the workspace (no document version)."),
        read_only=True,
        progress=Progress.PREPARATION,
    ),
    WorkspaceOperation(
        "goals",
        m.GoalsInput,
        m.GoalsResult,
        goals.goals,
        description=_d(
            "Structured proof goals before or after the tactic at a position of a document version "
            "(mode 'before' or 'after'); no speculative text."
        ),
        read_only=True,
        version_bound=True,
    ),
    WorkspaceOperation(
        "todo",
        m.TodoInput,
        m.TodoResult,
        goals.todo,
        description=_d(
            "Actionable items in a range of a document version: sorry, holes, diagnostics, code "
            "actions and incomplete proofs, with positions where lean_run_at can try a fix."
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
            "Resolve a code_action returned by lean_todo for the same document version. The result "
            "may contain an LSP WorkspaceEdit; the client must apply it, then call lean_update or "
            "lean_sync."
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
            "Continue from a handle and consume it (on success or failure); a successful result may include a "
            "fresh next_handle.",
            SPECULATIVE,
        ),
        metrics_key="run_with",
    ),
    WorkspaceOperation(
        "release",
        pm.ReleaseInput,
        m.NullResult,
        run.release,
        description=_d("Release a proof handle."),
    ),
    WorkspaceOperation(
        "update",
        m.FileInput,
        m.UpdateResult,
        sync.update,
        description=_d(
            "Read the current on-disk Lean source into Beam's mirror and return its document version and "
            "whether it changed; no diagnostics barrier."
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
            "Read the current on-disk Lean source, wait until Lean has elaborated that version, and return "
            "diagnostic counts and save readiness. Beam never applies or recovers speculative text: edit and "
            "save the file first."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="sync_file",
        extension_fields=_REBUILD,
    ),
    WorkspaceOperation(
        "refresh",
        m.SyncInput,
        m.SyncReply,
        sync.refresh,
        description=_d(
            "Close and reopen the document from the current on-disk Lean source (version 1), then sync it; use "
            "after upstream modules changed."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="refresh_file",
        extension_fields=_REBUILD,
    ),
    WorkspaceOperation(
        "save",
        m.SaveInput,
        m.SaveReply,
        save.save,
        description=_d(
            "Sync the current on-disk source, then write its Lean/Lake build artifacts (a development "
            "checkpoint, not a CI build) when the document is save-ready."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="save_olean",
    ),
    WorkspaceOperation(
        "close_save",
        m.SaveInput,
        m.CloseSaveResult,
        save.close_save,
        description=_d("Save the document's Lean/Lake build artifacts (as lean_save), then close it."),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="close",
    ),
    WorkspaceOperation(
        "close",
        m.FileInput,
        m.CloseResult,
        sync.close,
        description=_d("Close the document in Lean and forget its mirror; succeeds when it is not open."),
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
            "Lean's completions at a position of a document version (identifiers, fields after a dot, module "
            "names in imports), in Lean's order, each with its kind and the detail (type) and documentation Lean "
            "resolves for it. At most limit items are returned; dropped counts the rest."
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
            "Outline of a document version, from Lean: its imports (Lean's module hierarchy) and every "
            "declaration, namespace and section in document order, with its kind (the declaration keyword), "
            "modifiers, name, signature and docstring (Lean's hover on the name), enclosing namespaces and "
            "range. Lean answers once the whole file is elaborated."
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
    ),
    WorkspaceOperation(
        "attempts",
        pm.AttemptsInput,
        pm.AttemptsResult,
        attempts.attempts,
        description=_d(
            "Run several alternative Lean texts at one position of a document version, each on its own as "
            "lean_run_at would (tactics on the goals there inside a proof, else a command after the enclosing "
            "command), concurrently on the document's probe mirrors. Each attempt answers success, messages, traces "
            "and the goals after it, in the order of texts; with handles: true a successful attempt also returns "
            "next_handle (for lean_run_with). The cost follows the enclosing declaration, not the rest of the file.",
            SPECULATIVE,
        ),
        destructive=False,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
    ),
    WorkspaceOperation(
        "axioms",
        pm.AxiomsInput,
        pm.AxiomsResult,
        axioms.axioms,
        description=_d(
            "The axioms a declaration depends on, from Lean's #print axioms run as a command probe on a private "
            "mirror of a document version: the declaration Lean lists at line and character, or name (as it "
            "resolves right after that declaration, or after the document's last line without a position). "
            "uses_sorry flags sorryAx (a sorry, or an "
            "error Lean recovered from); nonstandard lists the axioms beyond propext, Classical.choice and "
            "Quot.sound. axioms is null when Lean printed no list (see messages: an unknown name, say). The source "
            "file is never touched."
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
            "Elaborate the declaration Lean lists at a position of a document version with Lean's profiler on "
            "(set_option profiler and trace.profiler), on a private mirror holding the source up to it, and return "
            "Lean's times: per category (elaboration, type checking, ...), per source line, and the trace steps with "
            "the most time of their own (steps under threshold_ms are left out), plus the declaration's messages. "
            "The source file is never touched."
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
    ),
    WorkspaceOperation(
        "run_code",
        pm.RunCodeInput,
        pm.RunCodeResult,
        scratch.run_code,
        description=_d(
            "Check a standalone Lean text in the context of a workspace (its header may import the workspace's "
            "modules and dependencies) in a private in-memory document: no file is written to the project. Returns "
            "every message Lean reports (#eval and #check output included) with its range in the text, and success "
            "when there is no error. The text is bounded by the workspace's source size limit. Lean elaboration is "
            "not an OS sandbox: project code and #eval may perform IO."
        ),
        read_only=True,
        progress=_FULL_PROGRESS,
        extension=True,
    ),
    WorkspaceOperation(
        "term_goal",
        m.PositionInput,
        om.TermGoalResult,
        widgets.term_goal,
        description=_d(
            "The expected type of the term at a position of a document version (Lean's $/lean/plainTermGoal): "
            "goal is Lean's text of it (hypotheses, then the expected type after ⊢) and range the term's range; "
            "both are null where Lean has no term."
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
            "The panel widgets Lean shows at a position of a document version (Lean.Widget.getWidgets over Lean's "
            "RPC): each instance as Lean sends it (id, javascriptHash, props, range). Pass a javascriptHash to "
            "lean_widget_source for the widget's JavaScript."
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
            "The JavaScript module of a widget, by the javascriptHash lean_widgets returned, as Lean serves it for "
            "a document version, from Lean.Widget.getWidgetSource. The module's text is source.sourcetext."
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
            "Lean's interactive diagnostics of a document version (Lean.Widget.getInteractiveDiagnostics over Lean's "
            "RPC), optionally only those of lines start_line up to end_line. Messages are Lean's tagged text, with "
            "embedded expressions and traces. Waits until Lean finished elaborating the version, as lean_sync does."
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
        extension=True,
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
