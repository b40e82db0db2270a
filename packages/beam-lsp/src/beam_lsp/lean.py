"""Typed models for Lean's extensions to LSP: the one module of Beam's own result types.

Standard LSP results are lsprotocol's types; what Lean adds to LSP is modelled here, as frozen attrs classes like
lsprotocol's (`_model.Model`: `from_json` reads Lean's JSON, `wire` writes it back):
positions and ranges (the arguments of every request), Lean's diagnostics (`fullRange`, `isSilent`, `leanTags`),
`$/lean/fileProgress`, `$/lean/plainGoal` and `$/lean/plainTermGoal`, Lean's module hierarchy, decoded semantic
tokens, and the answers of Lean's RPC methods (interactive goals and diagnostics as Lean's `TaggedText`, widgets).

Models accept unknown fields (Lean adds fields over time) and keep them (`extra`), so a value round-trips with
everything Lean said. Field names keep Lean's JSON casing; every field is a keyword argument. This module imports
no LSP machinery (lsprotocol, anyio): `from beam_lsp import Position` stays cheap.
"""

from __future__ import annotations

import enum
from typing import Any, Final, NamedTuple

import attrs

from ._model import JsonValue, Model, ModelError

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
    "LeanFileProgressProcessingInfo",
    "LeanImport",
    "LeanImportKind",
    "LeanModule",
    "LeanTag",
    "Location",
    "Model",
    "ModelError",
    "MsgEmbed",
    "PanelWidgetInstance",
    "PlainGoal",
    "PlainTermGoal",
    "Position",
    "Range",
    "RpcRef",
    "SemanticToken",
    "SubexprInfo",
    "VersionedTextDocumentIdentifier",
    "InteractiveMessage",
    "WidgetEmbed",
    "WidgetSource",
    "severity_label",
]


def _natural(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"{attribute.name} must be a natural number, not {value!r}")


@attrs.frozen(kw_only=True)
class Position(Model):
    """An LSP position: 0-based line and UTF-16 code unit offset (`Position(line=3, character=9)`)."""

    line: int = attrs.field(validator=_natural)
    character: int = attrs.field(validator=_natural)


_SET_EXTRA: Final = Model.__dict__["extra"].__set__
_SET_LINE: Final = Position.__dict__["line"].__set__
_SET_CHARACTER: Final = Position.__dict__["character"].__set__
assert [field.name for field in attrs.fields(Position)] == ["extra", "line", "character"]  # all set below


def _checked_position(line: int, character: int) -> Position:
    """A `Position` of two natural numbers the caller has checked already (no validator runs: a hover's cost)."""
    made = object.__new__(Position)
    _SET_EXTRA(made, {})
    _SET_LINE(made, line)
    _SET_CHARACTER(made, character)
    return made


@attrs.frozen(kw_only=True)
class Range(Model):
    """An LSP range, end exclusive."""

    start: Position
    end: Position


@attrs.frozen(kw_only=True)
class Location(Model):
    """A range in a document (`uri`)."""

    uri: str
    range: Range


@attrs.frozen(kw_only=True)
class DiagnosticRelatedInformation(Model):
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


@attrs.frozen(kw_only=True)
class LeanDiagnostic(Model):
    """A diagnostic as Lean publishes it: the LSP fields plus `fullRange`, `isSilent` and `leanTags`."""

    range: Range
    message: str
    severity: int | None = None
    code: int | str | None = None
    source: str | None = None
    fullRange: Range | None = None
    isSilent: bool | None = None
    leanTags: tuple[int, ...] | None = None
    tags: tuple[int, ...] | None = None
    relatedInformation: tuple[DiagnosticRelatedInformation, ...] | None = None
    data: JsonValue = None

    @property
    def is_error(self) -> bool:
        """Whether this is a user-visible error (severity 1 and not silent)."""
        return self.severity == DiagnosticSeverity.ERROR and not self.isSilent


@attrs.frozen(kw_only=True)
class PublishDiagnosticsParams(Model):
    """`textDocument/publishDiagnostics` params."""

    uri: str
    diagnostics: tuple[LeanDiagnostic, ...]
    version: int | None = None
    isIncremental: bool | None = None


class LeanFileProgressKind(enum.IntEnum):
    """`$/lean/fileProgress` processing kinds."""

    PROCESSING = 1
    FATAL_ERROR = 2


@attrs.frozen(kw_only=True)
class LeanFileProgressProcessingInfo(Model):
    """One range Lean is still elaborating (or failed on, kind 2)."""

    range: Range
    kind: int = LeanFileProgressKind.PROCESSING


@attrs.frozen(kw_only=True)
class VersionedTextDocumentIdentifier(Model):
    """A document URI and version."""

    uri: str
    version: int | None = None


@attrs.frozen(kw_only=True)
class LeanFileProgressParams(Model):
    """`$/lean/fileProgress` params: an empty `processing` list means elaboration finished."""

    textDocument: VersionedTextDocumentIdentifier
    processing: tuple[LeanFileProgressProcessingInfo, ...]

    @property
    def fatal(self) -> bool:
        """Whether Lean reports a fatal error (worker crash or header failure)."""
        return any(p.kind == LeanFileProgressKind.FATAL_ERROR for p in self.processing)


@attrs.frozen(kw_only=True)
class PlainGoal(Model):
    """`$/lean/plainGoal` result: one rendered string per goal; empty when the goals are solved."""

    rendered: str
    goals: tuple[str, ...]


@attrs.frozen(kw_only=True)
class PlainTermGoal(Model):
    """`$/lean/plainTermGoal` result: the expected type at a term, with its range."""

    goal: str
    range: Range


@attrs.frozen(kw_only=True)
class RpcConnectResult(Model):
    """`$/lean/rpc/connect` result."""

    sessionId: int | str


# ---- the module hierarchy ---------------------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class LeanModule(Model):
    """A module of Lean's module hierarchy (`$/lean/prepareModuleHierarchy`), e.g. `Demo.Basic` and its file.

    Example: `LeanModule(name="Demo.Basic", uri="file:///p/Demo/Basic.lean")`.
    """

    name: str
    uri: str
    data: JsonValue = None


@attrs.frozen(kw_only=True)
class LeanImportKind(Model):
    """How a module is imported: `private import`, `import all`, `meta import`."""

    isPrivate: bool = False
    isAll: bool = False
    metaKind: str = "nonMeta"


@attrs.frozen(kw_only=True)
class LeanImport(Model):
    """One edge of the module hierarchy: the module imported (or importing), and how."""

    module: LeanModule
    kind: LeanImportKind = attrs.field(factory=LeanImportKind)


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
@attrs.frozen(kw_only=True)
class RpcRef(Model):
    """A reference to a value held by Lean's RPC session (`{"p": "3"}`); valid until released or the session ends."""

    p: int | str


@attrs.frozen(kw_only=True)
class SubexprInfo(Model):
    """What a part of an interactive expression is: its RPC reference and position in the expression."""

    info: RpcRef
    subexprPos: str
    diffStatus: str | None = None


def _render(node: CodeWithInfos | InteractiveMessage) -> str:
    """The text of a `TaggedText` with every tag dropped (no recursion: Lean's texts nest deeply)."""
    pieces: list[str] = []
    stack: list[CodeWithInfos | InteractiveMessage] = [node]
    while stack:
        top = stack.pop()
        if top.text is not None:
            pieces.append(top.text)
        elif top.append is not None:
            stack.extend(reversed(top.append))
        elif top.tag is not None:
            stack.append(top.tag[1])
    return "".join(pieces)


@attrs.frozen(kw_only=True)
class CodeWithInfos(Model):
    """An expression as Lean's infoview shows it (`TaggedText SubexprInfo`): `.plain` renders it.

    Exactly one field is set: `text`, `append` (a sequence) or `tag` (a `SubexprInfo` and the text it annotates).
    """

    text: str | None = None
    append: tuple[CodeWithInfos, ...] | None = None
    tag: tuple[SubexprInfo, CodeWithInfos] | None = None

    @property
    def plain(self) -> str:
        """The text with every tag dropped."""
        return _render(self)


@attrs.frozen(kw_only=True)
class InteractiveHypothesisBundle(Model):
    """Hypotheses sharing one type (`a b : Nat`), with their free variable ids, type and value (for `let`)."""

    names: tuple[str, ...]
    fvarIds: tuple[str, ...] = ()
    type: CodeWithInfos
    val: CodeWithInfos | None = None
    isInstance: bool | None = None
    isType: bool | None = None
    isInserted: bool | None = None
    isRemoved: bool | None = None


@attrs.frozen(kw_only=True)
class InteractiveGoal(Model):
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


@attrs.frozen(kw_only=True)
class InteractiveGoals(Model):
    """`Lean.Widget.getInteractiveGoals`: the goals at a tactic position (empty when the proof is done there)."""

    goals: tuple[InteractiveGoal, ...] = ()


@attrs.frozen(kw_only=True)
class InteractiveTermGoal(Model):
    """`Lean.Widget.getInteractiveTermGoal`: the expected type at a term, with its hypotheses and range."""

    hyps: tuple[InteractiveHypothesisBundle, ...] = ()
    type: CodeWithInfos
    ctx: RpcRef | None = None
    range: Range | None = None
    term: RpcRef | None = None


@attrs.frozen(kw_only=True)
class WidgetEmbed(Model):
    """A widget inside a message: the instance and the text shown where it cannot be rendered."""

    wi: PanelWidgetInstance
    alt: InteractiveMessage


@attrs.frozen(kw_only=True)
class MsgEmbed(Model):
    """What an interactive message embeds: an expression, a goal, a widget or a trace node (one field is set)."""

    expr: CodeWithInfos | None = None
    goal: InteractiveGoal | None = None
    widget: WidgetEmbed | None = None
    trace: JsonValue = None


@attrs.frozen(kw_only=True)
class InteractiveMessage(Model):
    """A message as Lean's infoview shows it (`TaggedText MsgEmbed`): `.plain` renders it.

    Exactly one field is set: `text`, `append` (a sequence) or `tag` (an embedded expression, goal, widget or trace,
    and the text shown for it).
    """

    text: str | None = None
    append: tuple[InteractiveMessage, ...] | None = None
    tag: tuple[MsgEmbed, InteractiveMessage] | None = None

    @property
    def plain(self) -> str:
        """The text with every tag dropped."""
        return _render(self)


@attrs.frozen(kw_only=True)
class InteractiveDiagnostic(Model):
    """A diagnostic of `Lean.Widget.getInteractiveDiagnostics`: `LeanDiagnostic`'s fields, the message as rich text."""

    range: Range
    message: InteractiveMessage
    severity: int | None = None
    code: int | str | None = None
    source: str | None = None
    fullRange: Range | None = None
    isSilent: bool | None = None
    leanTags: tuple[int, ...] | None = None
    tags: tuple[int, ...] | None = None
    relatedInformation: tuple[DiagnosticRelatedInformation, ...] | None = None


@attrs.frozen(kw_only=True)
class PanelWidgetInstance(Model):
    """A user widget (`Lean.Widget.getWidgets`): its id, the hash of its JavaScript module, its props and range."""

    id: str
    javascriptHash: str
    props: JsonValue = None
    range: Range | None = None
    name: str | None = None


@attrs.frozen(kw_only=True)
class WidgetSource(Model):
    """`Lean.Widget.getWidgetSource`: the JavaScript module of a widget."""

    sourcetext: str


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
