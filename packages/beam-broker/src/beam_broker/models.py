"""Input and output models of broker operations (snake_case, the MCP spelling).

Inputs are closed (`extra="forbid"`); field order is the order of the generated JSON schema, with the
workspace descriptor last among the required fields. Outputs are frozen values; `dump()` gives their JSON.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .workspace import WorkspaceDescriptor

PATH_DESC = "Lean source path, relative to the workspace root unless absolute."
VERSION_DESC = "Document version returned by lean_update or lean_sync for this path."
LINE_DESC = "Zero-based line (LSP coordinates)."
CHAR_DESC = "Zero-based UTF-16 character offset in the line (LSP coordinates)."
WORKSPACE_DESC = 'Workspace descriptor: {"root": absolute Lean/Lake project root path}.'


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def dump(self) -> dict[str, Any]:
        """JSON form; optional fields that are None are omitted."""
        return self.model_dump(mode="json", exclude_none=True)


# ---- inputs -------------------------------------------------------------------------------------------
class WorkspaceInput(_In):
    """`lean_drop_workspace`."""

    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class FileInput(_In):
    """`lean_update`, `lean_close`."""

    path: str = Field(description=PATH_DESC)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


DiagnosticScope = Literal["errors", "all"]


class SyncInput(_In):
    """`lean_sync`, `lean_refresh`."""

    path: str = Field(description=PATH_DESC)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)
    diagnostic_scope: DiagnosticScope = Field(
        "errors", description="Which diagnostics stream live and appear in items: 'errors' or 'all'."
    )
    diagnostics_in_result: bool = Field(
        False, description="Also return the final diagnostics as diagnostics.items (for clients without logs)."
    )


class SaveInput(_In):
    """`lean_save`, `lean_close_save`."""

    path: str = Field(description=PATH_DESC)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)
    diagnostic_scope: DiagnosticScope = Field("errors", description="Which diagnostics stream live: 'errors' or 'all'.")


class DocumentInput(_In):
    """`lean_document_symbols`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class PositionInput(_In):
    """`lean_hover`, `lean_signature_help`, `lean_definition`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class ReferencesInput(PositionInput):
    """`lean_references`."""

    include_declaration: bool = Field(True, description="Include the declaration itself (default true).")


class GoalsInput(_In):
    """`lean_goals`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    mode: Literal["before", "after"] = Field(
        description="'before': goals before the tactic at the position; 'after': goals after it."
    )
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


TodoKind = Literal["sorry", "hole", "diagnostic", "code_action", "incomplete_proof"]


class TodoInput(_In):
    """`lean_todo`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    start_line: int = Field(description="Range start line (zero-based).", ge=0)
    start_character: int = Field(description="Range start character (UTF-16).", ge=0)
    end_line: int = Field(description="Range end line (zero-based).", ge=0)
    end_character: int = Field(description="Range end character (UTF-16).", ge=0)
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)
    kinds: list[TodoKind] | None = Field(None, description="Item kinds to report; omit or [] for all.")
    suggest: Literal["none", "basic"] = Field("basic", description="'basic' adds run_at_text suggestions.")


class CodeActionResolveInput(_In):
    """`lean_code_action_resolve`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    code_action: dict[str, Any] = Field(description="A code_action object previously returned by lean_todo.")
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class RunAtInput(_In):
    """`lean_run_at`, `lean_run_at_handle`."""

    path: str = Field(description=PATH_DESC)
    version: int = Field(description=VERSION_DESC, ge=0)
    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    text: str = Field(description="Lean text to run speculatively at the position (tactics or a command).")
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class RunWithInput(_In):
    """`lean_run_with`, `lean_run_with_linear`."""

    path: str = Field(description=PATH_DESC)
    handle: dict[str, Any] = Field(description="Opaque handle from a previous next_handle, passed back unchanged.")
    text: str = Field(description="Lean text to run from the handle's state.")
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class ReleaseInput(_In):
    """`lean_release`."""

    path: str = Field(description=PATH_DESC)
    handle: dict[str, Any] = Field(description="Opaque handle to release.")
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


class WorkspaceSymbolsInput(_In):
    """`lean_workspace_symbols`."""

    query: str = Field(description="Fuzzy symbol query.")
    workspace: WorkspaceDescriptor = Field(description=WORKSPACE_DESC)


# ---- outputs ------------------------------------------------------------------------------------------
class UpdateResult(_Out):
    """`lean_update`: the document version and whether this call sent didOpen/didChange."""

    version: int
    changed: bool


class DiagnosticCounts(_Out):
    """Counts by effective severity; `total` is their sum."""

    error: int = 0
    warning: int = 0
    information: int = 0
    hint: int = 0
    unknown: int = 0
    total: int = 0


class DiagItem(_Out):
    """One diagnostic as streamed in `lean.diagnostic` logs and returned in `diagnostics.items`."""

    path: str
    uri: str
    severity: Literal["error", "warning", "information", "hint", "unknown"]
    range: dict[str, Any]
    message: str
    completion_blocking: bool
    save_blocking: bool | None = None
    version: int | None = None


class Diagnostics(_Out):
    """Counts (always) and items (only when asked)."""

    counts: DiagnosticCounts
    items: list[DiagItem] | None = None


class BlockingDiagnostic(_Out):
    """Save-blocking evidence that has a range."""

    range: dict[str, Any]
    severity: Literal["error", "warning", "information", "hint", "unknown"]
    message: str
    save_blocking: bool
    completion_blocking: bool


class BlockingMessage(_Out):
    """Save-blocking evidence without a range."""

    message: str
    save_blocking: bool
    completion_blocking: bool


class Readiness(_Out):
    """Whether the synced version can be checkpointed, and why not."""

    save_ready: bool
    reason: Literal["ok", "documentErrors", "documentDidNotElaborateSuccessfully"]
    blocking_error_count: int
    blocking_diagnostics: list[BlockingDiagnostic]
    blocking_messages: list[BlockingMessage]


class SyncResult(_Out):
    """The verdict of a complete diagnostics barrier for one document version."""

    path: str
    version: int
    diagnostics: Diagnostics
    readiness: Readiness


class DocumentProgress(_Out):
    """Lean file progress as seen for the document (1-based line bounds)."""

    updates: int
    done: bool
    range_start_line: int | None = None
    range_end_line: int | None = None


class SaveResult(_Out):
    """A development checkpoint: the module's build artifacts and the sync verdict they came from."""

    path: str
    module: str
    version: int
    source_hash: str
    olean: str
    ilean: str
    c: str
    trace: str
    olean_server: str | None = None
    olean_private: str | None = None
    ir: str | None = None
    bc: str | None = None
    sync: SyncResult


class Hyp(_Out):
    """Hypotheses sharing one type."""

    names: list[str]
    type: str
    value: str | None = None


class Goal(_Out):
    """One goal (inner keys keep Lean's camelCase, as upstream does)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    userName: str | None = None
    goalPrefix: str = "⊢ "
    target: str
    hyps: list[Hyp] = Field(default_factory=list)


class ProofState(_Out):
    """Goals at a point; an empty list means solved."""

    goals: list[Goal]


class RunMessage(_Out):
    """A message produced by a speculative run."""

    severity: Literal["information", "warning", "error"]
    text: str


class RunResult(_Out):
    """`lean_run_at` family result."""

    success: bool
    messages: list[RunMessage] = Field(default_factory=list)
    traces: list[str] = Field(default_factory=list)
    proof_state: ProofState | None = None
    next_handle: dict[str, Any] | None = None

    def dump(self) -> dict[str, Any]:
        """JSON form: `proof_state` and `next_handle` are always present (null when absent)."""
        out = self.model_dump(mode="json", exclude_none=True)
        out.setdefault("proof_state", None)
        out.setdefault("next_handle", None)
        return out


class TodoItem(_Out):
    """An actionable item in a range."""

    kind: TodoKind
    range: dict[str, Any]
    run_at_position: dict[str, Any] | None = None
    run_at_text: str | None = None
    message: str | None = None
    severity: int | None = None
    diagnostic: dict[str, Any] | None = None
    code_action: dict[str, Any] | None = None
    proof_state: ProofState | None = None


class TodoResult(_Out):
    """`lean_todo` result."""

    version: int
    range: dict[str, Any]
    items: list[TodoItem]


class CodeActionResolveResult(_Out):
    """`lean_code_action_resolve` result: the resolved action; the client applies its edit."""

    version: int
    code_action: dict[str, Any]


class DropResult(_Out):
    """`lean_drop_workspace` result."""

    dropped: bool
    invalidated_handles: bool
    reason: Literal["notFound"] | None = None
