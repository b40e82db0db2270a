"""The operation registry: every broker operation declared once, in the public tool order.

The MCP tool list (names, input schemas, annotations, descriptions) and the `lean-beam` CLI subcommands are
derived from `OPERATIONS`; nothing else lists operations. Each entry names its input model, its flags and
the runtime method that implements it (`WorkspaceRuntime.op_<method>`).
"""

from __future__ import annotations

import dataclasses
import enum

from pydantic import BaseModel

from . import models as m

NO_SOURCE_EDITS = "Beam never applies source edits to `.lean` files on disk; the client applies source edits."
SPECULATIVE = (
    "The text is run speculatively against the selected document snapshot and is not persisted as source. "
    "To keep a result, first edit and save the Lean file with your normal file-editing tool, and only then "
    "call lean_sync (or lean_update) so Beam reads it from disk. Lean elaboration is not an OS sandbox: "
    "project code and tactics may perform IO."
)
PROGRESS = (
    "Pass tools/call params._meta.progressToken for live progress; without one, a slow call emits at most "
    "one status log."
)


class Progress(enum.Flag):
    """Which progress a call reports (the MCP display matrix)."""

    NONE = 0
    PREPARATION = enum.auto()
    SETUP = enum.auto()
    FILE = enum.auto()


@dataclasses.dataclass(frozen=True)
class OperationSpec:
    """One broker operation and everything derived from it.

    Attributes:
        name: Operation key; the MCP tool is `lean_<name>` (`drop_workspace` -> `lean_drop_workspace`).
        method: Runtime method suffix implementing it (`op_<method>`).
        input_model: Closed pydantic model of its arguments.
        description: Tool description (contract sentences included).
        read_only: Advertises `readOnlyHint: true`.
        destructive: `False` advertises `destructiveHint: false`; None keeps the protocol default.
        idempotent: Advertises `idempotentHint: true`.
        version_bound: Answers only for the caller's document version.
        cancellable: A cancel request aborts it (drop is not: partial eviction cannot be rolled back).
        progress: Progress kinds it reports.
        document_progress: Its final result carries `document_progress`.
        metrics_key: Key in per-workspace op metrics (upstream's broker op names).
        options: Fixed arguments of the runtime method (e.g. `store_handle=True`).
    """

    name: str
    method: str
    input_model: type[BaseModel]
    description: str
    read_only: bool = False
    destructive: bool | None = None
    idempotent: bool = False
    version_bound: bool = False
    cancellable: bool = True
    progress: Progress = Progress.PREPARATION | Progress.FILE
    document_progress: bool = False
    metrics_key: str = ""
    options: tuple[tuple[str, object], ...] = ()

    @property
    def tool(self) -> str:
        """The MCP tool name."""
        return f"lean_{self.name}"

    @property
    def key(self) -> str:
        """The metrics key."""
        return self.metrics_key or self.name


def _d(*parts: str) -> str:
    return " ".join([*parts, PROGRESS, NO_SOURCE_EDITS])


OPERATIONS: tuple[OperationSpec, ...] = (
    OperationSpec(
        "drop_workspace",
        "drop_workspace",
        m.WorkspaceInput,
        "Evict the cached Lean runtime for this workspace descriptor (shut its Lean server down, forget its "
        "document mirror, invalidate its proof handles). Idempotent: returns dropped: false with reason "
        "'notFound' when nothing is cached. Cache management only; it selects no context for later calls. "
        f"{PROGRESS}",
        idempotent=True,
        cancellable=False,
        progress=Progress.PREPARATION,
    ),
    OperationSpec(
        "run_at",
        "run_at",
        m.RunAtInput,
        _d(
            "Run Lean text at a position of a document version: inside a tactic proof the text runs as tactics "
            "on the goals there, elsewhere as a command after the enclosing command.",
            SPECULATIVE,
            "No follow-up handle is retained.",
        ),
        read_only=True,
        version_bound=True,
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
    ),
    OperationSpec(
        "run_at_handle",
        "run_at",
        m.RunAtInput,
        _d(
            "Like lean_run_at, but a successful result may include next_handle: an opaque handle for "
            "lean_run_with / lean_run_with_linear / lean_release.",
            SPECULATIVE,
        ),
        destructive=False,
        version_bound=True,
        metrics_key="run_at",
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
        options=(("store_handle", True),),
    ),
    OperationSpec(
        "hover",
        "hover",
        m.PositionInput,
        _d("Hover information (type and docs) at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "signature_help",
        "signature_help",
        m.PositionInput,
        _d("Signature help at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "definition",
        "definition",
        m.PositionInput,
        _d("Definition locations of the symbol at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "references",
        "references",
        m.ReferencesInput,
        _d("References to the symbol at a position of a document version, across the project."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "document_symbols",
        "document_symbols",
        m.DocumentInput,
        _d("Declarations and sections of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "workspace_symbols",
        "workspace_symbols",
        m.WorkspaceSymbolsInput,
        _d("Fuzzy search for declarations across the workspace (no document version)."),
        read_only=True,
        progress=Progress.PREPARATION,
    ),
    OperationSpec(
        "goals",
        "goals",
        m.GoalsInput,
        _d(
            "Structured proof goals before or after the tactic at a position of a document version "
            "(mode 'before' or 'after'); no speculative text."
        ),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "todo",
        "todo",
        m.TodoInput,
        _d(
            "Actionable items in a range of a document version: sorry, holes, diagnostics, code "
            "actions and incomplete proofs, with positions where lean_run_at can try a fix."
        ),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "code_action_resolve",
        "code_action_resolve",
        m.CodeActionResolveInput,
        _d(
            "Resolve a code_action returned by lean_todo for the same document version. The result "
            "may contain an LSP WorkspaceEdit; the client must apply it, then call lean_update or "
            "lean_sync."
        ),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "run_with",
        "run_with",
        m.RunWithInput,
        _d(
            "Continue from a handle without consuming it; a successful result may include a fresh next_handle.",
            SPECULATIVE,
        ),
        destructive=False,
    ),
    OperationSpec(
        "run_with_linear",
        "run_with",
        m.RunWithInput,
        _d(
            "Continue from a handle and consume it (on success or failure); a successful result may include a "
            "fresh next_handle.",
            SPECULATIVE,
        ),
        metrics_key="run_with",
        options=(("linear", True),),
    ),
    OperationSpec(
        "release",
        "release",
        m.ReleaseInput,
        _d("Release a proof handle."),
    ),
    OperationSpec(
        "update",
        "update",
        m.FileInput,
        _d(
            "Read the current on-disk Lean source into Beam's mirror and return its document version and "
            "whether it changed; no diagnostics barrier."
        ),
        progress=Progress.PREPARATION,
        metrics_key="update_file",
    ),
    OperationSpec(
        "sync",
        "sync",
        m.SyncInput,
        _d(
            "Read the current on-disk Lean source, wait until Lean has elaborated that version, and return "
            "diagnostic counts and save readiness. Beam never applies or recovers speculative text: edit and "
            "save the file first."
        ),
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
        document_progress=True,
        metrics_key="sync_file",
    ),
    OperationSpec(
        "refresh",
        "refresh",
        m.SyncInput,
        _d(
            "Close and reopen the document from the current on-disk Lean source (version 1), then sync it; use "
            "after upstream modules changed."
        ),
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
        document_progress=True,
        metrics_key="refresh_file",
    ),
    OperationSpec(
        "save",
        "save",
        m.SaveInput,
        _d(
            "Sync the current on-disk source, then write its Lean/Lake build artifacts (a development "
            "checkpoint, not a CI build) when the document is save-ready."
        ),
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
        document_progress=True,
        metrics_key="save_olean",
    ),
    OperationSpec(
        "close_save",
        "close_save",
        m.SaveInput,
        _d("Save the document's Lean/Lake build artifacts (as lean_save), then close it."),
        progress=Progress.PREPARATION | Progress.SETUP | Progress.FILE,
        document_progress=True,
        metrics_key="close",
    ),
    OperationSpec(
        "close",
        "close",
        m.FileInput,
        _d("Close the document in Lean and forget its mirror; succeeds when it is not open."),
        idempotent=True,
        progress=Progress.PREPARATION,
    ),
)

BY_TOOL: dict[str, OperationSpec] = {spec.tool: spec for spec in OPERATIONS}
BY_NAME: dict[str, OperationSpec] = {spec.name: spec for spec in OPERATIONS}


def implemented() -> tuple[OperationSpec, ...]:
    """The operations this version serves, in public tool order (cheap: no Lean stack is imported).

    Every registered operation is implemented; `Broker.operations()` returns the same tuple, and a test checks
    that each one has a runtime handler.
    """
    return OPERATIONS
