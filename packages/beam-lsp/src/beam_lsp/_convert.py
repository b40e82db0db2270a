"""Lean's JSON answers as typed values, and typed values back as JSON: the one place results change shape.

Owns turning a decoded result into its lsprotocol type (standard LSP) or its `lean` model (Lean's extensions),
and arguments back into JSON. lsprotocol's converter (cattrs) does the general work; the answers a client asks
for thousands of times (hover, locations, ranges, plain goals) take a direct path that builds the same values
without the converter's dispatch, and falls back to it for any shape it does not know. A result that fits no
shape raises `InvalidResult` naming the method: never a cattrs or model error.

It sends nothing and knows nothing about documents (`_requests.py` does).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from .documents import PositionLike, RangeLike
from .errors import InvalidResult
from .lazy import lazy_module
from .lean import JsonValue, Model, SemanticToken

if TYPE_CHECKING:
    from cattrs import Converter
    from lsprotocol import types
else:
    types = lazy_module("lsprotocol.types")  # loaded by the first typed conversion (see `lazy_module`)

__all__ = [
    "PositionLike",
    "RangeLike",
    "decode_semantic_tokens",
    "edit_versions",
    "hover",
    "load_lsp_types",
    "locations",
    "converter",
    "model",
    "position_json",
    "range_json",
    "structure",
    "structure_list",
    "unstructure",
]

T = TypeVar("T")
M = TypeVar("M", bound=Model)


_MAKING: Final = threading.Lock()
"""Held while the converter is made: lsprotocol's first `get_converter()` resolves its types' forward references
in place, and two threads doing it at once break each other (`dictionary changed size during iteration`)."""

_LOADED: Final = threading.Event()
"""Set once the converter is made: what `is_loaded` reads (a `functools.cache` lookup would cost a hover more)."""


@functools.cache
def _make_converter() -> Converter:
    from lsprotocol import converters

    return converters.get_converter()


def converter() -> Converter:
    """The converter of lsprotocol (cattrs), made on first use: one per process, made by one thread.

    lsprotocol builds a new one, registering hundreds of hooks, on every `get_converter()` call; importing it
    costs lsprotocol's and cattrs' import, which a client that never converts a standard LSP answer never pays.
    """
    with _MAKING:
        made = _make_converter()
        _LOADED.set()
        return made


def load_lsp_types() -> None:
    """Load lsprotocol and its converter now, rather than with the first standard LSP answer.

    beam-lsp loads them when it first reads an answer into lsprotocol's types (a hover, locations, symbols),
    which costs about 1 s of CPU and 16 MiB; a long-running program can call this on a worker thread
    (`anyio.to_thread.run_sync(load_lsp_types)`) while Lean starts, so that no answer waits for it. Safe to call
    from several threads at once (one makes the converter, the others wait for it).
    """
    converter()


def is_loaded() -> bool:
    """Whether lsprotocol and its converter are loaded (then `loaded()` has nothing to wait for)."""
    return _LOADED.is_set()


async def loaded() -> None:
    """Load lsprotocol and its converter on a worker thread unless they are loaded (the event loop never blocks).

    Every request whose answer is read into lsprotocol's types awaits this first (or checks `is_loaded`): the
    import would otherwise run on the event loop (a second or more, every other task stopped) or wait there for a
    loading thread.
    """
    if not _LOADED.is_set():
        await anyio.to_thread.run_sync(load_lsp_types)


def position_json(position: PositionLike) -> dict[str, int]:
    """A position as LSP JSON."""
    return {"line": position.line, "character": position.character}


def range_json(rng: RangeLike) -> dict[str, dict[str, int]]:
    """A range as LSP JSON."""
    return {"start": position_json(rng.start), "end": position_json(rng.end)}


def _fail(method: str, kind: object, value: object) -> InvalidResult:
    # Only the JSON kind of the answer is named: its text came from Lean and is not redacted here.
    name = getattr(kind, "__name__", str(kind))
    found = "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) else type(value).__name__
    return InvalidResult(method, f"the answer to {method} is not a valid {name} (got {found})")


def structure(method: str, value: object, kind: type[T]) -> T:
    """`value` as lsprotocol type `kind`.

    Raises:
        InvalidResult: The value does not have that shape.
    """
    try:
        return converter().structure(value, kind)
    except Exception as exc:  # cattrs raises several unrelated types (and attrs validators ValueError)
        raise _fail(method, kind, value) from exc


def structure_list(method: str, value: object, kind: type[T]) -> list[T]:
    """A JSON array (or null, read as empty) as a list of `kind`.

    Raises:
        InvalidResult: The value is not an array of that shape.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(method, f"list of {kind.__name__}", value)
    return [structure(method, item, kind) for item in value]


def model(method: str, value: object, kind: type[M]) -> M:
    """`value` as Lean model `kind`.

    Raises:
        InvalidResult: The value does not validate.
    """
    try:
        return kind.from_json(value)
    except ValueError as exc:  # ModelError
        raise _fail(method, kind, value) from exc


def unstructure(value: object) -> JsonValue:
    """An lsprotocol value (or a Lean model) as LSP JSON, e.g. to send it back to Lean."""
    if isinstance(value, Model):
        return value.wire()
    result: JsonValue = converter().unstructure(value)
    return result


# ---- the direct paths -------------------------------------------------------------------------------------------
def _range(value: object) -> types.Range:
    """A plain `{start, end}` of plain `{line, character}` (TypeError or KeyError for anything else)."""
    if type(value) is not dict or len(value) != 2:
        raise TypeError
    start, end = value["start"], value["end"]
    if type(start) is not dict or type(end) is not dict or len(start) != 2 or len(end) != 2:
        raise TypeError
    line0, char0, line1, char1 = start["line"], start["character"], end["line"], end["character"]
    # One check of the four numbers' type, no call per number (this runs for every hover and location);
    # lsprotocol's `Position` refuses a negative or too large one (ValueError), and so does the direct builder.
    if not (type(line0) is type(char0) is type(line1) is type(char1) is int):
        raise TypeError
    direct = _direct()
    if direct is not None:
        return direct.range(line0, char0, line1, char1)
    return types.Range(
        start=types.Position(line=line0, character=char0), end=types.Position(line=line1, character=char1)
    )


class _Direct:
    """lsprotocol's `Range` and `Hover` built by setting their slots, with the checks their validators make.

    lsprotocol's classes are attrs classes with `__slots__`, whose constructors call a Python validator for every
    number (`uinteger_validator`): half of a hover's conversion. These builders make equal values (same classes,
    same fields, every field set) for about half the cost; `_direct()` uses them only while the classes have
    exactly the fields set here, and the constructors otherwise.
    """

    __slots__ = ("hover", "range")

    def __init__(self) -> None:
        """Raises `KeyError` or `ValueError` when a class is not the one these builders know."""
        new = object.__new__
        position, rng, markup, hover = types.Position, types.Range, types.MarkupContent, types.Hover
        line, char = _slot_setters(position, "line", "character")
        start, end = _slot_setters(rng, "start", "end")
        kind_of, value_of = _slot_setters(markup, "kind", "value")
        contents_of, range_of = _slot_setters(hover, "contents", "range")
        most: Final = _UINTEGER_MAX

        def make_range(line0: int, char0: int, line1: int, char1: int) -> types.Range:
            if not (0 <= line0 <= most and 0 <= char0 <= most and 0 <= line1 <= most and 0 <= char1 <= most):
                raise ValueError("a position's line or character is outside LSP's unsigned integers")
            first, last, made = new(position), new(position), new(rng)
            line(first, line0)
            char(first, char0)
            line(last, line1)
            char(last, char1)
            start(made, first)
            end(made, last)
            return made

        def make_hover(kind: types.MarkupKind, text: str, where: types.Range | None) -> types.Hover:
            content, made = new(markup), new(hover)
            kind_of(content, kind)
            value_of(content, text)
            contents_of(made, content)
            range_of(made, where)
            return made

        self.range: Final = make_range
        self.hover: Final = make_hover


_UINTEGER_MAX: Final = 2**31 - 1
"""lsprotocol's bound on an LSP `uinteger` (`validators.UINTEGER_MAX_VALUE`)."""


def _slot_setters(cls: type, *names: str) -> list[Callable[[object, Any], None]]:
    """The setters of `cls`'s slots `names`, which must be all of its attrs fields, in order."""
    import attrs  # lsprotocol's own dependency, loaded with it

    if tuple(field.name for field in attrs.fields(cls)) != names:
        raise ValueError(f"{cls.__name__} has other fields")
    return [cls.__dict__[name].__set__ for name in names]


@functools.cache
def _direct() -> _Direct | None:
    """The direct builders, or None when lsprotocol's classes are not the ones they know (made once)."""
    try:
        return _Direct()
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def _markup(kind: object) -> types.MarkupKind | None:
    """The `MarkupKind` named `kind` (None for any other value)."""
    if kind == "markdown":
        return types.MarkupKind.Markdown
    if kind == "plaintext":
        return types.MarkupKind.PlainText
    return None


def hover(method: str, value: object) -> types.Hover | None:
    """`textDocument/hover`'s answer: null, or `Hover` (Lean's is Markdown `MarkupContent` with a range).

    Raises:
        InvalidResult: Not a hover.
    """
    if value is None:
        return None
    if type(value) is dict and 1 <= len(value) <= 2:
        contents, rng = value.get("contents"), value.get("range")
        if type(contents) is dict and len(contents) == 2:
            kind, text = _markup(contents.get("kind")), contents.get("value")
            if kind is not None and type(text) is str and (rng is not None or len(value) == 1):
                try:
                    where = None if rng is None else _range(rng)
                    direct = _direct()
                    if direct is not None:
                        return direct.hover(kind, text, where)
                    return types.Hover(types.MarkupContent(kind=kind, value=text), where)
                except (TypeError, KeyError, ValueError):  # ValueError: lsprotocol's bound on a position
                    pass
    result = structure(method, value, types.Hover)
    if not isinstance(result.contents, (types.MarkupContent, str, types.MarkedStringWithLanguage, list, tuple)):
        raise _fail(method, types.Hover, value)  # lsprotocol's union hook lets any value through
    return result


def _location(item: object) -> types.Location | types.LocationLink:
    if type(item) is dict:
        if len(item) == 2 and type(item.get("uri")) is str:
            return types.Location(uri=item["uri"], range=_range(item["range"]))
        if "targetUri" in item:
            return converter().structure(item, types.LocationLink)
        return converter().structure(item, types.Location)
    raise TypeError


def locations(method: str, value: object) -> list[types.Location | types.LocationLink]:
    """`Location | Location[] | LocationLink[] | null` as a list (definition, declaration, typeDefinition).

    Lean answers `Location[]` from its ilean index and `LocationLink[]` from the file worker.

    Raises:
        InvalidResult: Not locations.
    """
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    try:
        return [_location(item) for item in items]
    except Exception as exc:
        raise _fail(method, "list of Location | LocationLink", value) from exc


def plain_locations(method: str, value: object) -> list[types.Location]:
    """`Location[] | null` as a list (references).

    Raises:
        InvalidResult: Not locations.
    """
    found = locations(method, value)
    if not all(isinstance(item, types.Location) for item in found):
        raise _fail(method, "list of Location", value)
    return [item for item in found if isinstance(item, types.Location)]


def decode_semantic_tokens(data: Sequence[int], legend: types.SemanticTokensLegend | None) -> list[SemanticToken]:
    """Decode LSP semantic tokens (relative 5-tuples) into absolute `SemanticToken`s named by `legend`.

    A type or modifier bit outside the legend is named by its number (`"17"`), never dropped.
    """
    types_ = list(legend.token_types) if legend is not None else []
    modifiers = list(legend.token_modifiers) if legend is not None else []
    out: list[SemanticToken] = []
    line = character = 0
    it = iter(data)
    name: Callable[[list[str], int], str] = lambda names, i: names[i] if 0 <= i < len(names) else str(i)  # noqa: E731
    for delta_line, delta_start, length, kind, bits in zip(it, it, it, it, it, strict=False):  # a cut tail: ignored
        if delta_line:
            line, character = line + delta_line, delta_start
        else:
            character += delta_start
        mods = tuple(name(modifiers, i) for i in range(bits.bit_length()) if bits >> i & 1) if bits else ()
        out.append(SemanticToken(line, character, length, name(types_, kind), mods))
    return out


def json_list(method: str, value: object) -> list[Any]:
    """A JSON array (null read as empty).

    Raises:
        InvalidResult: Not an array.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(method, "list", value)
    return value


def text_edits(edit: types.WorkspaceEdit) -> dict[str, list[types.TextEdit]]:
    """The text edits of a workspace edit, by document URI, in the edit's order.

    `documentChanges` when the edit has them, else `changes`: LSP lets a server send both forms of one edit
    (`documentChanges` preferred by a client that reads them, as this one does), so they are never added up.

    Raises:
        ValueError: The edit creates, renames or deletes files.
    """
    out: dict[str, list[types.TextEdit]] = {}
    if edit.document_changes is None:
        for uri, edits in (edit.changes or {}).items():
            out.setdefault(uri, []).extend(edits)
    for change in edit.document_changes or ():
        if not isinstance(change, types.TextDocumentEdit):
            raise ValueError(f"a workspace edit with file operations is not supported ({type(change).__name__})")
        out.setdefault(change.text_document.uri, []).extend(
            e if isinstance(e, types.TextEdit) else types.TextEdit(range=e.range, new_text=_new_text(e))
            for e in change.edits
        )
    return out


def edit_versions(edit: types.WorkspaceEdit) -> dict[str, int]:
    """The versions of the documents a workspace edit's `documentChanges` were computed for (unversioned: left out)."""
    return {
        change.text_document.uri: change.text_document.version
        for change in edit.document_changes or ()
        if isinstance(change, types.TextDocumentEdit) and change.text_document.version is not None
    }


def _new_text(edit: types.AnnotatedTextEdit | types.SnippetTextEdit) -> str:
    return edit.new_text if isinstance(edit, types.AnnotatedTextEdit) else edit.snippet.value
