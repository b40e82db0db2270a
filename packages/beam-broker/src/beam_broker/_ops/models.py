"""Input and output models of the document operations beyond upstream Beam's 24 tools.

Completions, the outline, Lean's term goal and its widget RPC (`_ops/completions.py`, `_ops/outline.py`,
`_ops/widgets.py`). The conventions are `models`' own (closed strict inputs, frozen replies whose JSON schema is
the tool's outputSchema, `workspace` first); this module only adds these operations' shapes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from beam_broker.models import (
    CHAR_DESC,
    LINE_DESC,
    PinnedInput,
    _Out,
    _Reply,
)
from beam_broker.workspace import WorkspaceDescriptor

# ---- operations beyond upstream Beam's 24 tools ---------------------------------------------------------
COMPLETIONS_LIMIT = 50
"""Default `limit` of `lean_completions`."""
COMPLETIONS_MAX = 500
"""Largest `limit` of `lean_completions`."""

CompletionKind = Literal[
    "text", "method", "function", "constructor", "field", "variable", "class", "interface", "module", "property",
    "unit", "value", "enum", "keyword", "snippet", "color", "file", "reference", "folder", "enumMember", "constant",
    "struct", "event", "operator", "typeParameter",
]  # fmt: skip
"""LSP `CompletionItemKind` names, in the order of their numbers (1 = text ... 25 = typeParameter)."""


class CompletionsInput(PinnedInput):
    """`lean_completions`."""

    line: int = Field(description=LINE_DESC, ge=0)
    character: int = Field(description=CHAR_DESC, ge=0)
    workspace: WorkspaceDescriptor
    limit: int = Field(
        COMPLETIONS_LIMIT,
        ge=1,
        le=COMPLETIONS_MAX,
        description="Most items to return; 'dropped' counts the rest.",
    )
    resolve: int | None = Field(
        None, ge=0, le=COMPLETIONS_MAX, description="Resolve only the first N items returned (default: all)."
    )


class OutlineInput(PinnedInput):
    """`lean_outline`."""

    workspace: WorkspaceDescriptor


class CompletionItem(_Out):
    """One completion Lean offers; `detail` and `documentation` are what Lean's `completionItem/resolve` adds."""

    label: str
    kind: CompletionKind | None = None
    detail: str | None = None
    documentation: str | None = None
    insert_text: str | None = None
    sort_text: str | None = None


class CompletionsResult(_Reply):
    """`lean_completions`: Lean's items in its order (by `sortText` when it sends one), the first `limit` of them."""

    version: int
    is_incomplete: bool
    total: int
    dropped: int
    items: list[CompletionItem]


class OutlineImport(_Out):
    """An import of the document, from Lean's module hierarchy (`kind` is Lean's import kind, as Lean gives it)."""

    module: str
    uri: str | None = None
    kind: dict[str, Any] | None = None


class OutlineEntry(_Out):
    """A declaration, namespace or section of the document, in document order.

    `kind` is the keyword Lean tokenized last before the name (`theorem`, `def`, `instance`, `namespace`, ...) and
    `modifiers` the keywords before it (`private`, `noncomputable`, ...); `signature` is the signature Lean shows
    when hovering the name (null when Lean shows none, e.g. for a declaration that did not elaborate); `container`
    names the enclosing namespaces and sections, outermost first.
    """

    name: str
    kind: str | None
    signature: str | None
    range: dict[str, Any]
    selection_range: dict[str, Any]
    modifiers: list[str] = Field(default_factory=list)
    container: list[str] = Field(default_factory=list)
    docstring: str | None = None


class OutlineResult(_Reply):
    """`lean_outline`: `imports` is null when the Lean server has no module hierarchy (older toolchains)."""

    version: int
    imports: list[OutlineImport] | None
    declarations: list[OutlineEntry]


# ---- Lean's term goal and widget RPC (beyond upstream Beam's 24 tools) ---------------------------------
class TermGoalResult(_Reply):
    """`lean_term_goal`: the expected type of the term at the position (Lean's `$/lean/plainTermGoal`).

    `goal` and `range` are null when Lean has no term there.
    """

    version: int
    goal: str | None
    range: dict[str, Any] | None


class WidgetsResult(_Reply):
    """`lean_widgets`: the panel widgets at a position (Lean's `Lean.Widget.getWidgets`), as Lean sends them."""

    version: int
    widgets: list[dict[str, Any]]


class WidgetSourceInput(PinnedInput):
    """`lean_widget_source`."""

    javascript_hash: str = Field(description="A javascriptHash from lean_widgets.", min_length=1, max_length=64)
    workspace: WorkspaceDescriptor


class WidgetSourceResult(_Reply):
    """`lean_widget_source`: Lean's `Lean.Widget.getWidgetSource` answer (the JavaScript module as `sourcetext`)."""

    version: int
    source: dict[str, Any]


class InteractiveDiagnosticsInput(PinnedInput):
    """`lean_interactive_diagnostics`."""

    start_line: int | None = Field(None, description="First zero-based line.", ge=0)
    end_line: int | None = Field(None, description="Zero-based line to stop before (default: the end).", ge=0)
    workspace: WorkspaceDescriptor


class InteractiveDiagnosticsResult(_Reply):
    """`lean_interactive_diagnostics`: Lean's `Lean.Widget.getInteractiveDiagnostics` for a complete version."""

    version: int
    diagnostics: list[dict[str, Any]]
