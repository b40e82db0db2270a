"""Input and output models of broker operations (snake_case, the MCP spelling).

Inputs are closed (`extra="forbid"`) and strict: `"3"` is not an int and `"true"` is not a bool. Field order is
the order of the generated JSON schema, with the workspace descriptor last among the required fields.

Outputs are frozen values and each operation's output model *is* its reply: `workspace` first, and its JSON
schema (serialization mode) describes exactly what `Broker.call` returns. Serialized, an optional field that is
None is omitted; a required field that may be null (`proof_state`, `next_handle`, `result`) is always present.
LSP passthrough answers keep Lean's JSON (hover's `{contents, range}`), and a null answer is `{"result": null}`.
`parse_input` turns an operation's JSON arguments into its input model (every refusal is `invalidInput`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from beam_lsp.strict_json import find_invalid_text

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

from .errors import invalid_input, invalid_text
from .workspace import WorkspaceDescriptor, resolve

PATH_DESC = "Lean file (workspace-relative or absolute)."
VERSION_DESC = "Document version from lean_sync or lean_update."
SNAPSHOT_DESC = "Snapshot token from lean_sync or lean_update, passed back as is (or pass version)."
SNAPSHOT_MAX = 256
"""Longest snapshot token accepted (Beam's are far shorter; a longer one cannot be current)."""
LINE_DESC = "Zero-based line."
CHAR_DESC = "Zero-based UTF-16 character in the line."

Severity = Literal["error", "warning", "information", "hint", "unknown"]
DiagnosticScope = Literal["errors", "all"]
TodoKind = Literal["sorry", "hole", "diagnostic", "code_action", "incomplete_proof"]


class HasWorkspace(Protocol):
    """Every operation input: it names its workspace."""

    workspace: WorkspaceDescriptor


# Every model defers building its validator and serializer to its first use: the MCP server imports the registry
# (and so every model) before it answers discovery, and building them all at import costs about as much as
# creating the classes.
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # No return annotation on purpose: pydantic then derives the serialization schema from the fields.
    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if isinstance(data, dict):
            for name, field in type(self).model_fields.items():
                if not field.is_required() and name in data and data[name] is None:
                    del data[name]
        return data

    def dump(self) -> dict[str, Any]:
        """JSON form (optional fields that are None omitted)."""
        out: dict[str, Any] = self.model_dump(mode="json")
        return out


class _Reply(_Out):
    """The part every reply shares: the canonical descriptor of the workspace that answered."""

    workspace: WorkspaceDescriptor


InputT = TypeVar("InputT", bound=BaseModel)


def parse_input(
    model: type[InputT], arguments: Mapping[str, Any], tool: str, *, allow_vanished: bool = False
) -> InputT:
    """An operation's JSON arguments as its input model (`tool` names it in errors).

    Text is checked first, before any filesystem work: a string (value or key, at any depth) holding a NUL
    character or a lone UTF-16 surrogate cannot be a path, a Lean text or a JSON answer. Then the workspace
    descriptor is resolved to its canonical root (`allow_vanished`: a root that no longer exists is normalized
    lexically); types are strict (`"3"` is not an int).

    Raises:
        BrokerError: `invalidInput`: not an object, text that cannot go on (`data.field`, `data.reason`),
            undeclared fields (`data.fields`), a bad descriptor, or values the model rejects (`data.errors`).
    """
    if not isinstance(arguments, Mapping):
        raise invalid_input(f"{tool} arguments must be an object")
    bad = find_invalid_text(dict(arguments))
    if bad is not None:
        raise invalid_text(tool, bad)
    extra = sorted(k for k in arguments if k not in model.model_fields)
    if extra:
        raise invalid_input(f"{tool} accepts no undeclared input fields: {', '.join(extra)}", {"fields": extra})
    descriptor = resolve(arguments.get("workspace"), allow_vanished=allow_vanished)
    try:
        return model.model_validate({**arguments, "workspace": descriptor})
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors()]
        raise invalid_input(f"{tool}: " + "; ".join(problems), {"errors": problems}) from None


_PLAIN: Final = (
    ("Value error, ", ""),
    ("Assertion failed, ", ""),
    ("Field required", "is required"),
    ("Input should be a valid string", "must be a string"),
    ("Input should be a valid integer", "must be an integer"),
    ("Input should be a valid boolean", "must be true or false"),
    ("Input should be a valid list", "must be a list"),
    ("Input should be a valid dictionary", "must be an object"),
    ("Input should be ", "must be "),
    ("String should match pattern", "does not match the pattern"),
    ("String should have ", "must have "),
    ("List should have ", "must have "),
)
"""The validation library's phrasings and the plain words an error says instead (a prefix each)."""


def _problem(err: ErrorDetails) -> str:
    """One validation problem in plain words: `kinds[0] must be 'a' or 'b' (got 'x')`, never the library's."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    message = err["msg"]
    for library, plain in _PLAIN:
        if message.startswith(library):
            message = plain + message[len(library) :]
            break
    value = err.get("input")
    if message.startswith("must be") and isinstance(value, str | int | float | bool) and value is not None:
        message += f" (got {json.dumps(value, ensure_ascii=False)})"
    if not where:
        return message
    return f"{where} {message}" if message.startswith(("must ", "is ", "does ")) else f"{where}: {message}"


# ---- inputs -------------------------------------------------------------------------------------------
class WorkspaceInput(_In):
    """`lean_drop_workspace`."""

    workspace: WorkspaceDescriptor


class PathInput(_In):
    """Every input that names a Lean source file (`path` first)."""

    path: str = Field(description=PATH_DESC)


class PinnedInput(PathInput):
    """Every input bound to one document state: exactly one of `version` (numeric) and `snapshot` (opaque token).

    Upstream Beam's current contract names the state with `snapshot` only, its original one with `version` only; Beam
    takes either (`OperationSpec.extension_fields` lists `snapshot`, so `--tools beam` keeps the original schema).
    """

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["version"]}, {"required": ["snapshot"]}]})

    version: int | None = Field(None, description=VERSION_DESC, ge=0)
    snapshot: str | None = Field(None, description=SNAPSHOT_DESC, min_length=1, max_length=SNAPSHOT_MAX)

    @model_validator(mode="after")
    def _one_pin(self) -> PinnedInput:
        if (self.version is None) == (self.snapshot is None):
            raise ValueError("pass exactly one of version and snapshot")
        return self


class FileInput(PathInput):
    """`lean_update`, `lean_close`."""

    workspace: WorkspaceDescriptor


class SyncInput(PathInput):
    """`lean_sync`, `lean_refresh`."""

    workspace: WorkspaceDescriptor
    diagnostic_scope: DiagnosticScope = Field(
        "errors", description="Which diagnostics stream live and appear in items."
    )
    diagnostics_in_result: bool = Field(False, description="Return the final diagnostics in diagnostics.items.")
    rebuild_imports: bool = Field(
        False,
        description="Save stale imports first, in dependency order (an import's errors fail the call).",
    )


class SaveInput(PathInput):
    """`lean_save`, `lean_close_save`."""

    workspace: WorkspaceDescriptor
    diagnostic_scope: DiagnosticScope = Field("errors", description="Which diagnostics stream live.")


class DocumentInput(PinnedInput):
    """`lean_document_symbols`."""

    workspace: WorkspaceDescriptor


class PositionInput(PinnedInput):
    """`lean_hover`, `lean_signature_help`, `lean_definition`."""

    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    workspace: WorkspaceDescriptor


class ReferencesInput(PositionInput):
    """`lean_references`."""

    include_declaration: bool = Field(True, description="Include the declaration itself.")


class GoalsInput(PinnedInput):
    """`lean_goals`."""

    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    mode: Literal["before", "after"] = Field(description="Goals before or after the tactic at the position.")
    exact: bool = Field(
        default=False,
        description="Goals Lean shows at exactly this position (mode then ignored), not before/after its tactic.",
    )
    workspace: WorkspaceDescriptor


class TodoInput(PinnedInput):
    """`lean_todo`."""

    start_line: int = Field(description="Range start line (zero-based).", ge=0)
    start_character: int = Field(description="Range start character (UTF-16).", ge=0)
    end_line: int = Field(description="Range end line (zero-based).", ge=0)
    end_character: int = Field(description="Range end character (UTF-16).", ge=0)
    workspace: WorkspaceDescriptor
    kinds: list[TodoKind] | None = Field(None, description="Kinds to report; omit or [] for all.")
    suggest: Literal["none", "basic"] = Field("basic", description="'basic' adds run_at_text suggestions.")


class CodeActionResolveInput(PinnedInput):
    """`lean_code_action_resolve`."""

    code_action: dict[str, Any] = Field(description="A code_action from lean_todo.")
    workspace: WorkspaceDescriptor


class WorkspaceSymbolsInput(_In):
    """`lean_workspace_symbols`."""

    query: str = Field(description="Fuzzy symbol query.")
    workspace: WorkspaceDescriptor


# ---- values inside replies ----------------------------------------------------------------------------
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
    severity: Severity
    range: dict[str, Any]
    message: str
    completion_blocking: bool
    save_blocking: bool | None = None
    version: int | None = None
    code: str | None = None
    """The name Lean gives the message (`lean.unknownIdentifier`), as `lean` prints it in `error(...)`."""


class Diagnostics(_Out):
    """Counts (always) and items (only when asked)."""

    counts: DiagnosticCounts
    items: list[DiagItem] | None = None


class BlockingDiagnostic(_Out):
    """Save-blocking evidence that has a range."""

    range: dict[str, Any]
    severity: Severity
    message: str
    save_blocking: bool
    completion_blocking: bool
    code: str | None = None
    """The name Lean gives the message (`lean.unknownIdentifier`), as `lean` prints it in `error(...)`."""


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
    snapshot: str
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
    snapshot: str
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

    userName: str | None = None
    goalPrefix: str = "⊢ "
    target: str
    hyps: list[Hyp] = Field(default_factory=list)


class ProofState(_Out):
    """Goals at a point; an empty list means solved."""

    goals: list[Goal]


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


# ---- replies (one output model per operation) ---------------------------------------------------------
class DropResult(_Reply):
    """`lean_drop_workspace`."""

    dropped: bool
    invalidated_handles: bool
    reason: Literal["notFound"] | None = None


class NullResult(_Reply):
    """An answer without content: Lean's null (hover, signature help) or a done `lean_release`."""

    result: None


class Hover(_Reply):
    """`lean_hover` when Lean has something to show (LSP `Hover` JSON)."""

    contents: dict[str, Any] | str | list[Any]
    range: dict[str, Any] | None = None


class HoverResult(RootModel[Hover | NullResult]):
    """`lean_hover`: Lean's hover, or `{"result": null}`."""

    model_config = ConfigDict(frozen=True, json_schema_extra={"type": "object"}, defer_build=True)


class SignatureHelp(_Reply):
    """`lean_signature_help` when Lean has signatures (LSP `SignatureHelp` JSON)."""

    signatures: list[dict[str, Any]]
    activeSignature: int | None = None
    activeParameter: int | None = None


class SignatureHelpResult(RootModel[SignatureHelp | NullResult]):
    """`lean_signature_help`: Lean's signature help, or `{"result": null}`."""

    model_config = ConfigDict(frozen=True, json_schema_extra={"type": "object"}, defer_build=True)


class LspList(_Reply):
    """`lean_definition`, `lean_references`, `lean_document_symbols`, `lean_workspace_symbols`: Lean's array."""

    result: list[dict[str, Any]]


class GoalsResult(ProofState, _Reply):
    """`lean_goals`."""


class TodoResult(_Reply):
    """`lean_todo`."""

    version: int
    snapshot: str
    range: dict[str, Any]
    items: list[TodoItem]


class CodeActionResolveResult(_Reply):
    """`lean_code_action_resolve`: the resolved action; the client applies its edit."""

    version: int
    snapshot: str
    code_action: dict[str, Any]


class UpdateResult(_Reply):
    """`lean_update`: the document version and snapshot, and whether this call sent didOpen/didChange."""

    version: int
    snapshot: str
    changed: bool


class SyncReply(SyncResult, _Reply):
    """`lean_sync`, `lean_refresh`: the verdict and the document's progress."""

    document_progress: DocumentProgress
    rebuilt_imports: list[str] | None = Field(
        default=None, description="With rebuild_imports: the imports saved first, in order."
    )


class SaveReply(SaveResult, _Reply):
    """`lean_save`: the checkpoint and the document's progress."""

    document_progress: DocumentProgress


class CloseSaveResult(_Reply):
    """`lean_close_save`: the checkpoint, then the document closed."""

    closed: bool
    saved: SaveResult
    document_progress: DocumentProgress


class CloseResult(_Reply):
    """`lean_close` (also when the document was not open)."""

    closed: bool
