"""Typed models for Lean's extensions to LSP: the one module of Beam's own result types.

Standard LSP results are lsprotocol's types; what Lean adds to LSP is modelled here, as frozen pydantic models:
positions and ranges (the arguments of every request), Lean's diagnostics (`fullRange`, `isSilent`, `leanTags`),
`$/lean/fileProgress`, `$/lean/plainGoal` and `$/lean/plainTermGoal`, Lean's module hierarchy, decoded semantic
tokens, and the answers of Lean's RPC methods (interactive goals and diagnostics as `TaggedText`, widgets).

Inbound models accept unknown fields (Lean adds fields over time) and keep them, so a value round-trips with
everything Lean said. Field names keep Lean's JSON casing. This module imports no LSP machinery (lsprotocol,
anyio): `from beam_lsp import Position` stays cheap.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "CodeWithInfos",
    "DiagnosticRelatedInformation",
    "DiagnosticSeverity",
    "InteractiveDiagnostic",
    "InteractiveGoal",
    "InteractiveGoals",
    "InteractiveHypothesisBundle",
    "InteractiveTermGoal",
    "JsonValue",
    "LeanDiagnostic",
    "LeanFileProgressKind",
    "LeanFileProgressParams",
    "LeanImport",
    "LeanImportKind",
    "LeanModule",
    "LeanTag",
    "Location",
    "MsgEmbed",
    "PanelWidgetInstance",
    "PlainGoal",
    "PlainTermGoal",
    "Position",
    "Range",
    "RpcRef",
    "SemanticToken",
    "SubexprInfo",
    "TaggedText",
    "WidgetEmbed",
    "WidgetSource",
    "severity_label",
]


class _Inbound(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    def wire(self) -> dict[str, JsonValue]:
        """The value as LSP JSON (Lean casing, absent fields omitted), e.g. to send it back to Lean."""
        return self.model_dump(mode="json", exclude_none=True)


class Position(_Inbound):
    """An LSP position: 0-based line and UTF-16 code unit offset."""

    line: int = Field(ge=0)
    character: int = Field(ge=0)


class Range(_Inbound):
    """An LSP range, end exclusive."""

    start: Position
    end: Position


class Location(_Inbound):
    """A range in a document (`uri`)."""

    uri: str
    range: Range


class DiagnosticRelatedInformation(_Inbound):
    """A place a diagnostic refers to, with a message."""

    location: Location
    message: str


class DiagnosticSeverity(enum.IntEnum):
    """LSP diagnostic severities."""

    ERROR = 1
    WARNING = 2
    INFORMATION = 3
    HINT = 4

    @property
    def label(self) -> str:
        """The lower-case name Beam uses on the wire (`"error"`, `"warning"`, `"information"`, `"hint"`)."""
        return self.name.lower()


def severity_label(value: int | None) -> str:
    """The label of an LSP severity number, or `"unknown"` for a missing or unknown one."""
    try:
        return DiagnosticSeverity(value).label if value is not None else "unknown"
    except ValueError:
        return "unknown"


class LeanTag(enum.IntEnum):
    """Lean's `leanTags` on diagnostics."""

    UNSOLVED_GOALS = 1
    GOALS_ACCOMPLISHED = 2


class LeanDiagnostic(_Inbound):
    """A diagnostic as Lean publishes it: the LSP fields plus `fullRange`, `isSilent` and `leanTags`."""

    range: Range
    message: str
    severity: int | None = None
    code: int | str | None = None
    source: str | None = None
    fullRange: Range | None = None
    isSilent: bool | None = None
    leanTags: list[int] | None = None
    tags: list[int] | None = None
    relatedInformation: list[DiagnosticRelatedInformation] | None = None
    data: JsonValue = None

    @property
    def is_error(self) -> bool:
        """Whether this is a user-visible error (severity 1 and not silent)."""
        return self.severity == DiagnosticSeverity.ERROR and not self.isSilent


class PublishDiagnosticsParams(_Inbound):
    """`textDocument/publishDiagnostics` params."""

    uri: str
    version: int | None = None
    diagnostics: list[LeanDiagnostic]
    isIncremental: bool | None = None


class LeanFileProgressKind(enum.IntEnum):
    """`$/lean/fileProgress` processing kinds."""

    PROCESSING = 1
    FATAL_ERROR = 2


class LeanFileProgressProcessingInfo(_Inbound):
    """One range Lean is still elaborating (or failed on, kind 2)."""

    range: Range
    kind: int = LeanFileProgressKind.PROCESSING


class VersionedTextDocumentIdentifier(_Inbound):
    """A document URI and version."""

    uri: str
    version: int | None = None


class LeanFileProgressParams(_Inbound):
    """`$/lean/fileProgress` params: an empty `processing` list means elaboration finished."""

    textDocument: VersionedTextDocumentIdentifier
    processing: list[LeanFileProgressProcessingInfo]

    @property
    def fatal(self) -> bool:
        """Whether Lean reports a fatal error (worker crash or header failure)."""
        return any(p.kind == LeanFileProgressKind.FATAL_ERROR for p in self.processing)


class PlainGoal(_Inbound):
    """`$/lean/plainGoal` result: one rendered string per goal; empty when the goals are solved."""

    rendered: str
    goals: list[str]


class PlainTermGoal(_Inbound):
    """`$/lean/plainTermGoal` result: the expected type at a term, with its range."""

    goal: str
    range: Range


class RpcConnectResult(_Inbound):
    """`$/lean/rpc/connect` result."""

    sessionId: int | str


# ---- the module hierarchy ---------------------------------------------------------------------------------------
class LeanModule(_Inbound):
    """A module of Lean's module hierarchy (`$/lean/prepareModuleHierarchy`), e.g. `Demo.Basic` and its file.

    Example: `LeanModule(name="Demo.Basic", uri="file:///p/Demo/Basic.lean")`.
    """

    name: str
    uri: str
    data: JsonValue = None


class LeanImportKind(_Inbound):
    """How a module is imported: `private import`, `import all`, `meta import`."""

    isPrivate: bool = False
    isAll: bool = False
    metaKind: str = "nonMeta"


class LeanImport(_Inbound):
    """One edge of the module hierarchy: the module imported (or importing), and how."""

    module: LeanModule
    kind: LeanImportKind = Field(default_factory=LeanImportKind)


# ---- semantic tokens --------------------------------------------------------------------------------------------
class SemanticToken(NamedTuple):
    """One decoded semantic token: where it starts (0-based line, UTF-16 column), its length, type and modifiers.

    Example: `SemanticToken(line=3, character=0, length=3, type="keyword", modifiers=())`.
    """

    line: int
    character: int
    length: int
    type: str
    modifiers: tuple[str, ...]


# ---- Lean RPC: interactive goals, diagnostics and widgets ---------------------------------------------------------
T = TypeVar("T")


class RpcRef(_Inbound):
    """A reference to a value held by Lean's RPC session (`{"p": "3"}`); valid until released or the session ends."""

    p: int | str


class SubexprInfo(_Inbound):
    """What a part of an interactive expression is: its RPC reference and position in the expression."""

    info: RpcRef
    subexprPos: str
    diffStatus: str | None = None


class TaggedText(_Inbound, Generic[T]):
    """Lean's rich text: plain `text`, a sequence (`append`), or a `tag` (a payload and the text it annotates).

    Exactly one field is set. `plain` renders the text without the tags.
    """

    text: str | None = None
    append: tuple[TaggedText[T], ...] | None = None
    tag: tuple[T, TaggedText[T]] | None = None

    @property
    def plain(self) -> str:
        """The text with every tag dropped."""
        return "".join(self._pieces())

    def _pieces(self) -> Iterator[str]:
        stack: list[TaggedText[T]] = [self]
        while stack:
            node = stack.pop()
            if node.text is not None:
                yield node.text
            elif node.append is not None:
                stack.extend(reversed(node.append))
            elif node.tag is not None:
                stack.append(node.tag[1])


CodeWithInfos = TaggedText[SubexprInfo]
"""An expression as Lean's infoview shows it: text tagged with the subexpressions' RPC references."""


class InteractiveHypothesisBundle(_Inbound):
    """Hypotheses sharing one type (`a b : Nat`), with their free variable ids, type and value (for `let`)."""

    names: tuple[str, ...]
    fvarIds: tuple[str, ...] = ()
    type: CodeWithInfos
    val: CodeWithInfos | None = None
    isInstance: bool | None = None
    isType: bool | None = None
    isInserted: bool | None = None
    isRemoved: bool | None = None


class InteractiveGoal(_Inbound):
    r"""One goal of `Lean.Widget.getInteractiveGoals`: hypotheses, the target type, the case name.

    `plain` renders it as `$/lean/plainGoal` does: `p : Prop\nhp : p\n⊢ p`.
    """

    hyps: tuple[InteractiveHypothesisBundle, ...] = ()
    type: CodeWithInfos
    ctx: RpcRef | None = None
    userName: str | None = None
    goalPrefix: str = "⊢ "
    mvarId: str | None = None
    isInserted: bool | None = None
    isRemoved: bool | None = None

    @property
    def plain(self) -> str:
        """The goal as text: the case name, one line per hypothesis bundle, then the target."""
        lines = [f"case {self.userName}"] if self.userName else []
        for hyp in self.hyps:
            value = f" := {hyp.val.plain}" if hyp.val is not None else ""
            lines.append(f"{' '.join(hyp.names)} : {hyp.type.plain}{value}")
        lines.append(f"{self.goalPrefix}{self.type.plain}")
        return "\n".join(lines)


class InteractiveGoals(_Inbound):
    """`Lean.Widget.getInteractiveGoals`: the goals at a tactic position (empty when the proof is done there)."""

    goals: tuple[InteractiveGoal, ...] = ()


class InteractiveTermGoal(_Inbound):
    """`Lean.Widget.getInteractiveTermGoal`: the expected type at a term, with its hypotheses and range."""

    hyps: tuple[InteractiveHypothesisBundle, ...] = ()
    type: CodeWithInfos
    ctx: RpcRef | None = None
    range: Range | None = None
    term: RpcRef | None = None


class WidgetEmbed(_Inbound):
    """A widget inside a message: the instance and the text shown where it cannot be rendered."""

    wi: PanelWidgetInstance
    alt: TaggedText[MsgEmbed]


class MsgEmbed(_Inbound):
    """What an interactive message embeds: an expression, a goal, a widget or a trace node (one field is set)."""

    expr: CodeWithInfos | None = None
    goal: InteractiveGoal | None = None
    widget: WidgetEmbed | None = None
    trace: JsonValue = None


class InteractiveDiagnostic(_Inbound):
    """A diagnostic of `Lean.Widget.getInteractiveDiagnostics`: `LeanDiagnostic`'s fields, the message as rich text."""

    range: Range
    message: TaggedText[MsgEmbed]
    severity: int | None = None
    code: int | str | None = None
    source: str | None = None
    fullRange: Range | None = None
    isSilent: bool | None = None
    leanTags: list[int] | None = None
    tags: list[int] | None = None
    relatedInformation: list[DiagnosticRelatedInformation] | None = None


class PanelWidgetInstance(_Inbound):
    """A user widget (`Lean.Widget.getWidgets`): its id, the hash of its JavaScript module, its props and range."""

    id: str
    javascriptHash: str
    props: JsonValue = None
    range: Range | None = None
    name: str | None = None


class WidgetSource(_Inbound):
    """`Lean.Widget.getWidgetSource`: the JavaScript module of a widget."""

    sourcetext: str


WidgetEmbed.model_rebuild()
MsgEmbed.model_rebuild()


def publish_params(params: Any) -> tuple[str, int | None, list[Any], bool]:
    """The uri, version, raw diagnostics and `isIncremental` of `publishDiagnostics` params.

    Only the shape is checked: the cache validates the diagnostics it keeps as `LeanDiagnostic`s.

    Raises:
        ValueError: No uri string, a version that is not an integer, or diagnostics that are not objects.
    """
    if not isinstance(params, dict) or not isinstance(params.get("uri"), str):
        raise ValueError("publishDiagnostics has no uri")
    version, diagnostics = params.get("version"), params.get("diagnostics")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ValueError("publishDiagnostics version is not an integer")
    if not isinstance(diagnostics, list) or not all(isinstance(d, dict) for d in diagnostics):
        raise ValueError("publishDiagnostics diagnostics is not a list of objects")
    return params["uri"], version, diagnostics, params.get("isIncremental") is True
