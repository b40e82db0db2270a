"""`LeanFile`: one document of a `LeanClient`, named by its path, with positions in code points.

Owns the conversion at the boundary between what people write and what LSP speaks: a path relative to the
project root (or absolute) becomes a `file:` URI, and a position in code points (`Point0`: 0-based line and
column, as Python indexes strings; `Point1`: 1-based, as editors print them; Lean's messages count the column
from 0) becomes an LSP
`Position` in UTF-16 code units of the client's copy of the text, checked against it. Results are the client's
own (lsprotocol types and `lean` models, UTF-16 ranges); `point0`/`point1` turn their positions back. It holds no
state of its own besides the path: the document lives in the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ._barrier import SyncResult
from .documents import PositionLike, TextDocument, path_to_uri
from .errors import InvalidPosition
from .lean import (
    InteractiveDiagnostic,
    InteractiveGoals,
    InteractiveTermGoal,
    LeanDiagnostic,
    LeanModule,
    PanelWidgetInstance,
    PlainGoal,
    PlainTermGoal,
    Position,
    Range,
    SemanticToken,
)

if TYPE_CHECKING:
    from lsprotocol import types

    from .client import LeanClient

__all__ = ["LeanFile", "Point", "Point0", "Point1"]


class Point0(NamedTuple):
    """A position in code points, 0-based: `Point0(line, column)` is `lines.split_lines(text)[line][column]`.

    Lines end at line feeds only (a CR before one is no column), as Lean counts them; `str.splitlines` also splits
    at a lone CR, a form feed, U+2028 and others.
    """

    line: int
    column: int


class Point1(NamedTuple):
    """A position in code points, 1-based line and column, as editors count (Lean's messages count columns from 0)."""

    line: int
    column: int


Point = Point0 | Point1 | PositionLike
"""A position argument of `LeanFile`: code points (`Point0`, `Point1`) or an LSP position (UTF-16, 0-based)."""


class LeanFile:
    """One document of a `LeanClient` by its path; positions in code points (`Point0`, `Point1`) or LSP positions.

    Make one with `client.file("Demo/Basic.lean")` (relative to the project root, or absolute). Every method is the
    client's method of the same name for this document; a `Point0`/`Point1` is converted to an LSP `Position` of
    the client's current text first (`InvalidPosition` when it is outside the text).
    """

    def __init__(self, client: LeanClient, path: Path) -> None:
        """Internal: use `LeanClient.file`."""
        self.client: LeanClient = client
        """The client the document belongs to."""
        self.path: Path = path
        """The absolute path."""
        self.uri: str = path_to_uri(path)
        """The document's `file:` URI."""

    def __repr__(self) -> str:
        return f"LeanFile({str(self.path)!r})"

    # ---- the document --------------------------------------------------------------------------------------------
    @property
    def document(self) -> TextDocument:
        """The client's copy of the document (text and version).

        Raises:
            DocumentNotOpen: The document is not open.
        """
        return self.client.document(self.uri)

    @property
    def is_open(self) -> bool:
        """Whether the document is open in the client."""
        return self.client.is_open(self.uri)

    async def open(self, text: str | None = None) -> int:
        """Open the document with `text`, or with the file's contents (UTF-8, line endings kept) when None.

        Returns the version (1).

        Raises:
            OSError: `text` is None and the file cannot be read.
            ValueError: The document is already open.
            ServerExited: The server is gone.
        """
        if text is None:
            text = self.path.read_bytes().decode("utf-8")  # as Lean reads it: no newline translation
        return await self.client.open(self.uri, text)

    async def change(self, text: str, *, save: bool = True, defer: float = 0) -> int:
        """Replace the document's text (see `LeanClient.change`); returns the new version.

        Raises:
            DocumentNotOpen: The document is not open.
            ServerExited: The server is gone.
        """
        return await self.client.change(self.uri, text, save=save, defer=defer)

    async def close(self) -> None:
        """Close the document (never raises; see `LeanClient.close`)."""
        await self.client.close(self.uri)

    async def sync(self, *, timeout: float | None = None) -> SyncResult:
        """Wait until Lean has finished the current version; its diagnostics (see `LeanClient.sync`).

        Raises:
            DocumentNotOpen: The document is not open.
            ServerExited: The server died.
        """
        return await self.client.sync(self.uri, timeout=timeout)

    # ---- positions -----------------------------------------------------------------------------------------------
    def position(self, point: Point) -> Position:
        """The LSP position (UTF-16) of a point of the current text.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The point is outside the text.
        """
        doc = self.document
        if isinstance(point, (Point0, Point1)):
            base = 1 if isinstance(point, Point1) else 0
            try:
                return doc.position_of(point.line - base, point.column - base)
            except InvalidPosition:
                raise InvalidPosition(f"{point!r} is outside the text") from None
        doc.validate(point)
        return Position(line=point.line, character=point.character)

    def range(self, start: Point, end: Point) -> Range:
        """The LSP range between two points of the current text.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: A point is outside the text, or `start` is after `end`.
        """
        rng = Range(start=self.position(start), end=self.position(end))
        self.document.validate_range(rng)
        return rng

    def point0(self, position: PositionLike) -> Point0:
        """The 0-based code-point position of an LSP position of the current text (e.g. a result's range start).

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text or splits a surrogate pair.
        """
        doc = self.document
        offset = doc.offset_at(position)
        return Point0(position.line, offset - doc.offset_at(Position(line=position.line, character=0)))

    def point1(self, position: PositionLike) -> Point1:
        """The 1-based code-point position of an LSP position of the current text.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text or splits a surrogate pair.
        """
        line, column = self.point0(position)
        return Point1(line + 1, column + 1)

    # ---- requests at a point -------------------------------------------------------------------------------------
    async def hover(self, point: Point) -> types.Hover | None:
        """`textDocument/hover` at `point` (see `LeanClient.hover`)."""
        return await self.client.hover(self.uri, self.position(point))

    async def signature_help(self, point: Point) -> types.SignatureHelp | None:
        """`textDocument/signatureHelp` at `point` (see `LeanClient.signature_help`)."""
        return await self.client.signature_help(self.uri, self.position(point))

    async def definition(self, point: Point) -> list[types.Location | types.LocationLink]:
        """`textDocument/definition` at `point` (see `LeanClient.definition`)."""
        return await self.client.definition(self.uri, self.position(point))

    async def declaration(self, point: Point) -> list[types.Location | types.LocationLink]:
        """`textDocument/declaration` at `point` (see `LeanClient.declaration`)."""
        return await self.client.declaration(self.uri, self.position(point))

    async def type_definition(self, point: Point) -> list[types.Location | types.LocationLink]:
        """`textDocument/typeDefinition` at `point` (see `LeanClient.type_definition`)."""
        return await self.client.type_definition(self.uri, self.position(point))

    async def references(self, point: Point, *, include_declaration: bool = True) -> list[types.Location]:
        """`textDocument/references` at `point` (see `LeanClient.references`)."""
        return await self.client.references(self.uri, self.position(point), include_declaration=include_declaration)

    async def document_highlights(self, point: Point) -> list[types.DocumentHighlight]:
        """`textDocument/documentHighlight` at `point` (see `LeanClient.document_highlights`)."""
        return await self.client.document_highlights(self.uri, self.position(point))

    async def completion(self, point: Point) -> types.CompletionList:
        """`textDocument/completion` at `point` (see `LeanClient.completion`)."""
        return await self.client.completion(self.uri, self.position(point))

    async def prepare_call_hierarchy(self, point: Point) -> list[types.CallHierarchyItem]:
        """`textDocument/prepareCallHierarchy` at `point` (see `LeanClient.prepare_call_hierarchy`)."""
        return await self.client.prepare_call_hierarchy(self.uri, self.position(point))

    async def prepare_rename(
        self, point: Point
    ) -> types.Range | types.PrepareRenamePlaceholder | types.PrepareRenameDefaultBehavior | None:
        """`textDocument/prepareRename` at `point` (see `LeanClient.prepare_rename`)."""
        return await self.client.prepare_rename(self.uri, self.position(point))

    async def rename(self, point: Point, new_name: str) -> types.WorkspaceEdit | None:
        """`textDocument/rename` at `point` (see `LeanClient.rename`)."""
        return await self.client.rename(self.uri, self.position(point), new_name)

    async def plain_goal(self, point: Point) -> PlainGoal | None:
        """`$/lean/plainGoal` at `point` (see `LeanClient.plain_goal`)."""
        return await self.client.plain_goal(self.uri, self.position(point))

    async def plain_term_goal(self, point: Point) -> PlainTermGoal | None:
        """`$/lean/plainTermGoal` at `point` (see `LeanClient.plain_term_goal`)."""
        return await self.client.plain_term_goal(self.uri, self.position(point))

    async def interactive_goals(self, point: Point) -> InteractiveGoals | None:
        """`Lean.Widget.getInteractiveGoals` at `point` (see `LeanClient.interactive_goals`)."""
        return await self.client.interactive_goals(self.uri, self.position(point))

    async def interactive_term_goal(self, point: Point) -> InteractiveTermGoal | None:
        """`Lean.Widget.getInteractiveTermGoal` at `point` (see `LeanClient.interactive_term_goal`)."""
        return await self.client.interactive_term_goal(self.uri, self.position(point))

    async def widgets(self, point: Point) -> list[PanelWidgetInstance]:
        """`Lean.Widget.getWidgets` at `point` (see `LeanClient.widgets`)."""
        return await self.client.widgets(self.uri, self.position(point))

    # ---- requests about the whole document or a range ------------------------------------------------------------
    async def document_symbols(self) -> list[types.DocumentSymbol | types.SymbolInformation]:
        """`textDocument/documentSymbol` (see `LeanClient.document_symbols`)."""
        return await self.client.document_symbols(self.uri)

    async def folding_ranges(self) -> list[types.FoldingRange]:
        """`textDocument/foldingRange` (see `LeanClient.folding_ranges`)."""
        return await self.client.folding_ranges(self.uri)

    async def semantic_tokens(self) -> list[SemanticToken]:
        """`textDocument/semanticTokens/full`, decoded (see `LeanClient.semantic_tokens`)."""
        return self.client.decode_semantic_tokens(await self.client.semantic_tokens(self.uri))

    async def semantic_tokens_range(self, start: Point, end: Point) -> list[SemanticToken]:
        """`textDocument/semanticTokens/range`, decoded (see `LeanClient.semantic_tokens_range`)."""
        tokens = await self.client.semantic_tokens_range(self.uri, self.range(start, end))
        return self.client.decode_semantic_tokens(tokens)

    async def inlay_hints(self, start: Point, end: Point) -> list[types.InlayHint]:
        """`textDocument/inlayHint` between two points (see `LeanClient.inlay_hints`)."""
        return await self.client.inlay_hints(self.uri, self.range(start, end))

    async def code_actions(
        self, start: Point, end: Point, *, diagnostics: Sequence[LeanDiagnostic] = ()
    ) -> list[types.CodeAction | types.Command]:
        """`textDocument/codeAction` between two points (see `LeanClient.code_actions`)."""
        return await self.client.code_actions(self.uri, self.range(start, end), diagnostics=diagnostics)

    async def interactive_diagnostics(self, *, lines: tuple[int, int] | None = None) -> list[InteractiveDiagnostic]:
        """`Lean.Widget.getInteractiveDiagnostics` (see `LeanClient.interactive_diagnostics`; `lines` 0-based)."""
        return await self.client.interactive_diagnostics(self.uri, lines=lines)

    async def module(self) -> LeanModule | None:
        """`$/lean/prepareModuleHierarchy` (see `LeanClient.prepare_module_hierarchy`)."""
        return await self.client.prepare_module_hierarchy(self.uri)
