"""The declaration around a position of a document version, as Lean's document symbols describe it.

Owns: asking `textDocument/documentSymbol` of a probe mirror that holds the source up to the end of the command
around the position (Lean answers once that prefix is elaborated, not after the whole file, and the mirror is then
warm for the probe that follows), and picking the innermost declaration (not a namespace or section) whose range
holds the position's line. Its name is Lean's, as written (`«t 5»`, `Bar.baz`), and its range Lean's (docstring
and attributes included). It never runs a probe and never reads a name off the source by pattern.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from beam_broker import _mirrors as mirrors
from beam_broker import _probe_text as probe
from beam_broker._call import Call, Watch
from beam_broker._ops.navigation import lsp_json
from beam_broker.errors import invalid_params
from beam_lsp import Position
from beam_lsp.errors import unwrap_group

if TYPE_CHECKING:
    from beam_broker._documents import DocState
    from beam_broker._mirrors import Mirror
    from beam_lsp import LeanClient

NAMESPACE_KIND: Final = 3
"""LSP `SymbolKind.Namespace`: what Lean calls its namespaces and sections."""


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A declaration Lean lists: its name as written, its LSP range, and that range as offsets in the source."""

    name: str
    range: dict[str, Any]
    start: int
    end: int


async def declaration_at(call: Call, client: LeanClient, doc: DocState, pos: Position, mirror: Mirror) -> Declaration:
    """The innermost declaration whose range holds `pos`'s line, from Lean's symbols on `mirror`.

    The mirror is left holding the source up to the end of the command around `pos` (`probe.declaration_text`).
    The position must have been validated against the document's text.

    Raises:
        BrokerError: `invalidParams` when Lean lists no declaration there (a blank line between declarations, a
            `namespace` line, a command that is not a declaration).
    """
    source = client.document(doc.uri)
    text = probe.declaration_text(source, pos)
    watch = Watch(mirror.uri, call.runtime.display(doc.path))
    try:
        with unwrap_group():
            async with call.watch(client, watch, None):
                await mirrors.show(client, mirror, text)
                symbols = lsp_json(await client.document_symbols(mirror.uri))
    except Exception:
        mirror.text = None  # a request that failed (a crashed worker?): the next one sends the text again
        raise
    found = innermost(symbols or [], pos.line)
    if found is None:
        raise invalid_params(
            f"no declaration at {pos.line}:{pos.character}: Lean lists none whose range holds that line",
            {"line": pos.line, "character": pos.character},
        )
    rng = found["range"]
    start = source.offset_at(Position(line=rng["start"]["line"], character=rng["start"]["character"]))
    end = source.offset_at(Position(line=rng["end"]["line"], character=rng["end"]["character"]))
    return Declaration(str(found.get("name", "")), dict(rng), start, end)


def innermost(symbols: Sequence[Mapping[str, Any]], line: int) -> Mapping[str, Any] | None:
    """The declaration symbol (not a namespace or section) holding `line` that starts last, or None."""
    best: Mapping[str, Any] | None = None
    for symbol in _walk(symbols):
        rng = symbol.get("range") or {}
        if symbol.get("kind") == NAMESPACE_KIND or not rng:
            continue
        first, last = rng["start"]["line"], rng["end"]["line"]
        if first <= line <= last and (best is None or _start(symbol) >= _start(best)):
            best = symbol
    return best


def _start(symbol: Mapping[str, Any]) -> tuple[int, int]:
    start = symbol["range"]["start"]
    return int(start["line"]), int(start["character"])


def _walk(symbols: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for symbol in symbols:
        yield symbol
        yield from _walk(symbol.get("children") or [])
