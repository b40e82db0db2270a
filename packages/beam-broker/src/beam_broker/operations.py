"""The operation registry: every broker operation declared once, in the public tool order.

Each entry names its handler (the coroutine function that implements it), its input and output models, and its
flags. The MCP tool list (names, input and output schemas, annotations, descriptions) and the `lean-beam` CLI
subcommands are derived from `OPERATIONS`; nothing else lists operations, and nothing dispatches by name.

Importing this module is cheap: the handler modules load the Lean client stack (lsprotocol, `beam_lsp.client`,
the runtime) only when a handler runs, so the MCP server answers `tools/list` from here before any Lean work.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from beam_lsp.strict_json import InvalidText, find_invalid_text

from . import models as m
from ._ops import completions as _completions
from ._ops import goals as _goals
from ._ops import navigation as _navigation
from ._ops import outline as _outline
from ._ops import save as _save
from ._ops import sync as _sync
from ._ops import workspaces as _workspaces
from ._probes import attempts as _attempts
from ._probes import axioms as _axioms
from ._probes import models as pm
from ._probes import profile as _profile
from ._probes import run as _speculation
from ._probes import scratch as _scratch
from .errors import BrokerError, invalid_input
from .workspace import resolve

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
PREPARING = "preparing the Lean workspace"

Handler = Callable[[Any, Any], Awaitable[BaseModel]]
"""`handler(target, inp) -> output`: target is a `_call.Call` (workspace scope) or the broker's `Runtimes`."""


class Progress(enum.Flag):
    """Which progress a call reports (the MCP display matrix)."""

    NONE = 0
    PREPARATION = enum.auto()
    SETUP = enum.auto()
    FILE = enum.auto()


class Scope(enum.Enum):
    """What an operation acts on.

    `WORKSPACE`: one workspace's runtime (created on demand); the root must be an existing Lean/Lake project,
    and the call is counted in that workspace's metrics. `BROKER`: the broker's table of runtimes; no runtime is
    created, and the descriptor may name a root that has since vanished (it is normalized lexically).
    """

    WORKSPACE = "workspace"
    BROKER = "broker"


@dataclasses.dataclass(frozen=True)
class OperationSpec:
    """One broker operation and everything derived from it.

    Attributes:
        name: Operation key; the MCP tool is `lean_<name>` (`drop_workspace` -> `lean_drop_workspace`).
        handler: The coroutine function implementing it (see `Handler` and `scope`).
        input_model: Closed, strict pydantic model of its arguments.
        output_model: Pydantic model of the exact JSON `Broker.call` returns (`workspace` included).
        description: Tool description (contract sentences included).
        scope: What the handler acts on (`Scope`).
        read_only: Advertises `readOnlyHint: true`.
        destructive: `False` advertises `destructiveHint: false`; None keeps the protocol default.
        idempotent: Advertises `idempotentHint: true`.
        version_bound: Answers only for the caller's document version.
        cancellable: A cancel request aborts it (drop is not: partial eviction cannot be rolled back).
        fence: A stream-order fence: calls sent before it finish first, calls sent after it wait for it.
        progress: Progress kinds it reports.
        document_progress: Its final result carries `document_progress`.
        metrics_key: Key in per-workspace op metrics (upstream's broker op names; default: `name`).
        preparing: What its preparation event says it is doing.
        extension: Beyond the seed's tool surface (listed after it); `lean-beam-mcp --tools beam` leaves it out.
        extension_fields: Input and output fields beyond the seed's surface; `--tools beam` leaves them out of
            the tool's schemas (so a call naming one is refused like any undeclared field).
    """

    name: str
    handler: Handler
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    description: str
    scope: Scope = Scope.WORKSPACE
    read_only: bool = False
    destructive: bool | None = None
    idempotent: bool = False
    version_bound: bool = False
    cancellable: bool = True
    fence: bool = False
    progress: Progress = Progress.PREPARATION | Progress.FILE
    document_progress: bool = False
    metrics_key: str = ""
    preparing: str = PREPARING
    extension: bool = False
    extension_fields: frozenset[str] = frozenset()

    @property
    def tool(self) -> str:
        """The MCP tool name."""
        return f"lean_{self.name}"

    @property
    def key(self) -> str:
        """The metrics key."""
        return self.metrics_key or self.name

    def preparation(self, path: str | None) -> str:
        """The one preparation message (`lean_sync on A.lean: preparing the Lean workspace`)."""
        where = f" on {path}" if path else ""
        return f"{self.tool}{where}: {self.preparing}"

    def parse(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Validate arguments exactly as `Broker.call` does, without Lean.

        Text is checked first, before any filesystem work: a string (value or key, at any depth) holding a NUL
        character or a lone UTF-16 surrogate cannot be a path, a Lean text or a JSON answer. Then the workspace
        descriptor is resolved to its canonical root; types are strict (`"3"` is not an int).

        Raises:
            BrokerError: `invalidInput`: not an object, text that cannot go on (`data.field`, `data.reason`),
                undeclared fields (`data.fields`), a bad descriptor, or values the input model rejects
                (`data.errors`).
        """
        if not isinstance(arguments, Mapping):
            raise invalid_input(f"{self.tool} arguments must be an object")
        bad = find_invalid_text(dict(arguments))
        if bad is not None:
            raise invalid_text(self, bad)
        fields = self.input_model.model_fields
        extra = sorted(k for k in arguments if k not in fields)
        if extra:
            raise invalid_input(
                f"{self.tool} accepts no undeclared input fields: {', '.join(extra)}", {"fields": extra}
            )
        descriptor = resolve(arguments.get("workspace"), allow_vanished=self.scope is Scope.BROKER)
        try:
            return self.input_model.model_validate({**arguments, "workspace": descriptor})
        except ValidationError as exc:
            problems = [f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()]
            raise invalid_input(f"{self.tool}: " + "; ".join(problems), {"errors": problems}) from None


def invalid_text(spec: OperationSpec, bad: InvalidText) -> BrokerError:
    """The `invalidInput` error for an argument holding a NUL character or a lone surrogate (naming the field)."""
    return invalid_input(
        f"{spec.tool}: {bad.path or 'arguments'} {bad.reason}", {"field": bad.path, "reason": bad.reason}
    )


_REBUILD = frozenset({"rebuild_imports", "rebuilt_imports"})
"""`sync`/`refresh` saving stale imports first: beyond the seed's surface."""


def _d(*parts: str) -> str:
    return " ".join([*parts, PROGRESS, NO_SOURCE_EDITS])


_FULL_PROGRESS = Progress.PREPARATION | Progress.SETUP | Progress.FILE

OPERATIONS: tuple[OperationSpec, ...] = (
    OperationSpec(
        "drop_workspace",
        _workspaces.drop_workspace,
        m.WorkspaceInput,
        m.DropResult,
        "Evict the cached Lean runtime for this workspace descriptor (shut its Lean server down, forget its "
        "document mirror, invalidate its proof handles). Idempotent: returns dropped: false with reason "
        "'notFound' when nothing is cached. Cache management only; it selects no context for later calls. "
        f"{PROGRESS}",
        scope=Scope.BROKER,
        idempotent=True,
        cancellable=False,
        fence=True,
        progress=Progress.PREPARATION,
        preparing="preparing workspace eviction",
    ),
    OperationSpec(
        "run_at",
        _speculation.run_at,
        pm.RunAtInput,
        pm.RunResult,
        _d(
            "Run Lean text at a position of a document version: inside a tactic proof the text runs as tactics "
            "on the goals there, elsewhere as a command after the enclosing command.",
            SPECULATIVE,
            "No follow-up handle is retained.",
        ),
        read_only=True,
        version_bound=True,
        progress=_FULL_PROGRESS,
    ),
    OperationSpec(
        "run_at_handle",
        _speculation.run_at_handle,
        pm.RunAtInput,
        pm.RunResult,
        _d(
            "Like lean_run_at, but a successful result may include next_handle: an opaque handle for "
            "lean_run_with / lean_run_with_linear / lean_release.",
            SPECULATIVE,
        ),
        destructive=False,
        version_bound=True,
        metrics_key="run_at",
        progress=_FULL_PROGRESS,
    ),
    OperationSpec(
        "hover",
        _navigation.hover,
        m.PositionInput,
        m.HoverResult,
        _d("Hover information (type and docs) at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "signature_help",
        _navigation.signature_help,
        m.PositionInput,
        m.SignatureHelpResult,
        _d("Signature help at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "definition",
        _navigation.definition,
        m.PositionInput,
        m.LspList,
        _d("Definition locations of the symbol at a position of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "references",
        _navigation.references,
        m.ReferencesInput,
        m.LspList,
        _d("References to the symbol at a position of a document version, across the project."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "document_symbols",
        _navigation.document_symbols,
        m.DocumentInput,
        m.LspList,
        _d("Declarations and sections of a document version."),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "workspace_symbols",
        _navigation.workspace_symbols,
        m.WorkspaceSymbolsInput,
        m.LspList,
        _d("Fuzzy search for declarations across the workspace (no document version)."),
        read_only=True,
        progress=Progress.PREPARATION,
    ),
    OperationSpec(
        "goals",
        _goals.goals,
        m.GoalsInput,
        m.GoalsResult,
        _d(
            "Structured proof goals before or after the tactic at a position of a document version "
            "(mode 'before' or 'after'); no speculative text."
        ),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "todo",
        _goals.todo,
        m.TodoInput,
        m.TodoResult,
        _d(
            "Actionable items in a range of a document version: sorry, holes, diagnostics, code "
            "actions and incomplete proofs, with positions where lean_run_at can try a fix."
        ),
        read_only=True,
        version_bound=True,
    ),
    OperationSpec(
        "code_action_resolve",
        _goals.code_action_resolve,
        m.CodeActionResolveInput,
        m.CodeActionResolveResult,
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
        _speculation.run_with,
        pm.RunWithInput,
        pm.RunResult,
        _d(
            "Continue from a handle without consuming it; a successful result may include a fresh next_handle.",
            SPECULATIVE,
        ),
        destructive=False,
    ),
    OperationSpec(
        "run_with_linear",
        _speculation.run_with_linear,
        pm.RunWithInput,
        pm.RunResult,
        _d(
            "Continue from a handle and consume it (on success or failure); a successful result may include a "
            "fresh next_handle.",
            SPECULATIVE,
        ),
        metrics_key="run_with",
    ),
    OperationSpec(
        "release",
        _speculation.release,
        pm.ReleaseInput,
        m.NullResult,
        _d("Release a proof handle."),
    ),
    OperationSpec(
        "update",
        _sync.update,
        m.FileInput,
        m.UpdateResult,
        _d(
            "Read the current on-disk Lean source into Beam's mirror and return its document version and "
            "whether it changed; no diagnostics barrier."
        ),
        progress=Progress.PREPARATION,
        metrics_key="update_file",
    ),
    OperationSpec(
        "sync",
        _sync.sync,
        m.SyncInput,
        m.SyncReply,
        _d(
            "Read the current on-disk Lean source, wait until Lean has elaborated that version, and return "
            "diagnostic counts and save readiness. Beam never applies or recovers speculative text: edit and "
            "save the file first."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="sync_file",
        extension_fields=_REBUILD,
    ),
    OperationSpec(
        "refresh",
        _sync.refresh,
        m.SyncInput,
        m.SyncReply,
        _d(
            "Close and reopen the document from the current on-disk Lean source (version 1), then sync it; use "
            "after upstream modules changed."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="refresh_file",
        extension_fields=_REBUILD,
    ),
    OperationSpec(
        "save",
        _save.save,
        m.SaveInput,
        m.SaveReply,
        _d(
            "Sync the current on-disk source, then write its Lean/Lake build artifacts (a development "
            "checkpoint, not a CI build) when the document is save-ready."
        ),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="save_olean",
    ),
    OperationSpec(
        "close_save",
        _save.close_save,
        m.SaveInput,
        m.CloseSaveResult,
        _d("Save the document's Lean/Lake build artifacts (as lean_save), then close it."),
        progress=_FULL_PROGRESS,
        document_progress=True,
        metrics_key="close",
    ),
    OperationSpec(
        "close",
        _sync.close,
        m.FileInput,
        m.CloseResult,
        _d("Close the document in Lean and forget its mirror; succeeds when it is not open."),
        idempotent=True,
        progress=Progress.PREPARATION,
    ),
    # ---- beyond the seed's surface (issue 12): `--tools beam` leaves these out -----------------------------
    OperationSpec(
        "completions",
        _completions.completions,
        m.CompletionsInput,
        m.CompletionsResult,
        _d(
            "Lean's completions at a position of a document version (identifiers, fields after a dot, module "
            "names in imports), in Lean's order, each with its kind and the detail (type) and documentation Lean "
            "resolves for it. At most limit items are returned; dropped counts the rest."
        ),
        read_only=True,
        version_bound=True,
        extension=True,
    ),
    OperationSpec(
        "outline",
        _outline.outline,
        m.OutlineInput,
        m.OutlineResult,
        _d(
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
    OperationSpec(
        "attempts",
        _attempts.attempts,
        pm.AttemptsInput,
        pm.AttemptsResult,
        _d(
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
    OperationSpec(
        "axioms",
        _axioms.axioms,
        pm.AxiomsInput,
        pm.AxiomsResult,
        _d(
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
    OperationSpec(
        "profile",
        _profile.profile,
        pm.ProfileInput,
        pm.ProfileResult,
        _d(
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
    OperationSpec(
        "run_code",
        _scratch.run_code,
        pm.RunCodeInput,
        pm.RunCodeResult,
        _d(
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
)

BY_TOOL: dict[str, OperationSpec] = {spec.tool: spec for spec in OPERATIONS}
BY_NAME: dict[str, OperationSpec] = {spec.name: spec for spec in OPERATIONS}


def implemented() -> tuple[OperationSpec, ...]:
    """The operations this version serves, in public tool order (cheap: no Lean stack is imported)."""
    return OPERATIONS
