"""The `outline` operation: a document version's imports and declarations, each as Lean describes it.

Owns: combining four Lean answers for the caller's version into one outline. Lean's document symbols give every
declaration, namespace and section with its name and ranges (Lean waits for the whole file, so the call streams
the file's progress meanwhile); Lean's module hierarchy (`$/lean/prepareModuleHierarchy`, then
`$/lean/moduleHierarchy/imports`) gives the imports; Lean's semantic tokens give each declaration's keywords (the
last one before its name is its kind, the others its modifiers); and Lean's hover on each declaration's name
gives its signature and docstring. Nothing is read off the source by pattern: Beam's copy of the text is only
used to read the keyword tokens Lean located. It must not guess what Lean did not say (a declaration Lean cannot
hover has no signature; a server without a module hierarchy has unknown imports).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from beam_broker._call import Call, Watch
from beam_broker._ops import models as om
from beam_broker.workspace import resolve_path
from beam_lsp import LeanImport, Position, Range, ResponseError, SemanticToken, path_to_uri
from beam_lsp import errors as lsp
from beam_lsp.errors import unwrap_group

from .navigation import lsp_json

if TYPE_CHECKING:
    from beam_lsp import LeanClient, TextDocument

HOVER_CONCURRENCY: Final = 8
"""Hover requests in flight at once (measured on the real lane: 1500 hovers took 2.4 s one by one, 1.0 s so)."""
NAMESPACE_KIND: Final = 3
"""LSP `SymbolKind.Namespace`: what Lean calls its namespaces and sections (they have no signature to hover)."""
_CODE_BLOCK: Final = re.compile(r"\A```[^\n]*\n(.*?)\n```", re.DOTALL)
_IMPORT_NOTE: Final = re.compile(r"\A\*import [^*\n]+\*\Z")


@dataclasses.dataclass(frozen=True)
class Token:
    """A keyword token Lean reported: where it starts (line, UTF-16 character) and its text."""

    line: int
    character: int
    text: str


async def outline(call: Call, inp: om.OutlineInput) -> om.OutlineResult:
    """The imports and every declaration of a document version, from Lean."""
    runtime = call.runtime
    path = resolve_path(runtime.root, inp.path)
    client = await call.client()
    watch = Watch(path_to_uri(path), runtime.display(path))
    with unwrap_group():
        async with call.watch(client, watch, None):
            client, doc = await call.checked(inp)
            version = doc.version
            cached = doc.outline
            if isinstance(cached, om.OutlineResult) and cached.version == version:  # asked again, unchanged
                return cached.model_copy(update={"workspace": call.workspace})
            watch.bind(doc, False)
            symbols = lsp_json(await client.document_symbols(doc.uri))  # Lean answers once the file is done
    text = client.document(doc.uri)
    imports = await _imports(client, doc.uri)
    keywords = await _keywords(client, text)
    flat = list(_flatten(symbols))
    hovers = await gather(
        [_hover_job(client, doc.uri, symbol) for symbol, _ in flat],
        HOVER_CONCURRENCY,
    )
    entries = [
        _entry(symbol, container, keywords, hover) for (symbol, container), hover in zip(flat, hovers, strict=True)
    ]
    result = om.OutlineResult(workspace=call.workspace, version=doc.version, imports=imports, declarations=entries)
    if doc.version == version:  # the document did not change while Lean answered (a newer version is not this one)
        doc.outline = result
    return result


async def gather(jobs: Sequence[Callable[[], Awaitable[Any]]], limit: int) -> list[Any]:
    """Run `jobs` with at most `limit` in flight; their results in order.

    The first failure cancels the others and is raised alone, so a dead server (which fails every job) reaches the
    broker's boundary as one error, not as a group of them.
    """
    results: list[Any] = [None] * len(jobs)
    failures: list[Exception] = []
    limiter = anyio.CapacityLimiter(limit)
    async with anyio.create_task_group() as tg:

        async def run(index: int, job: Callable[[], Awaitable[Any]]) -> None:
            try:
                async with limiter:
                    results[index] = await job()
            except Exception as exc:
                failures.append(exc)
                tg.cancel_scope.cancel()

        for index, job in enumerate(jobs):
            tg.start_soon(run, index, job)
    if failures:
        raise failures[0]
    return results


def _hover_job(client: LeanClient, uri: str, symbol: Mapping[str, Any]) -> Callable[[], Awaitable[Any]]:
    """The hover on a declaration's name (namespaces and sections have none: a job that answers None)."""

    async def job() -> Any:
        if symbol.get("kind") == NAMESPACE_KIND:
            return None
        start = symbol["selectionRange"]["start"]
        return lsp_json(await client.hover(uri, Position(line=start["line"], character=start["character"])))

    return job


async def _imports(client: LeanClient, uri: str) -> list[om.OutlineImport] | None:
    """The document's imports from Lean's module hierarchy; None when the server has none (an older Lean)."""
    try:
        module = await client.prepare_module_hierarchy(uri)
        if module is None:
            return []
        found = await client.module_imports(module)
    except ResponseError as exc:
        if exc.code == lsp.METHOD_NOT_FOUND:
            return None
        raise
    return imports_of(found)


def imports_of(found: Sequence[LeanImport]) -> list[om.OutlineImport]:
    """Lean's imports (`{module: {name, uri}, kind}`) as outline imports, in Lean's order."""
    return [om.OutlineImport(module=i.module.name, uri=i.module.uri, kind=i.kind.wire()) for i in found]


async def _keywords(client: LeanClient, text: TextDocument) -> list[Token]:
    """Every keyword token Lean reports in the document (`textDocument/semanticTokens/range`, whole text)."""
    legend = client.semantic_tokens_legend
    if legend is None or "keyword" not in legend.token_types:
        return []
    whole = Range(start=Position(line=0, character=0), end=text.end)
    tokens = client.decode_semantic_tokens(await client.semantic_tokens_range(text.uri, whole))
    return keyword_tokens(tokens, text)


def keyword_tokens(tokens: Sequence[SemanticToken], text: TextDocument) -> list[Token]:
    """The keyword tokens, with their text from `text`.

    A token that does not lie inside the text (Lean answered for another version) is skipped.
    """
    out: list[Token] = []
    for token in tokens:
        if token.type != "keyword":
            continue
        try:
            start = text.offset_at(Position(line=token.line, character=token.character))
            end = text.offset_at(Position(line=token.line, character=token.character + token.length))
        except lsp.InvalidPosition:
            continue
        out.append(Token(token.line, token.character, text.text[start:end]))
    return out


def _flatten(
    symbols: Sequence[Mapping[str, Any]], container: tuple[str, ...] = ()
) -> Iterator[tuple[Mapping[str, Any], tuple[str, ...]]]:
    """Document symbols in document order (pre-order), each with the names of the symbols enclosing it."""
    for symbol in symbols:
        yield symbol, container
        yield from _flatten(symbol.get("children") or [], (*container, str(symbol.get("name", ""))))


def _at(point: Mapping[str, Any]) -> tuple[int, int]:
    return int(point["line"]), int(point["character"])


def _entry(
    symbol: Mapping[str, Any], container: tuple[str, ...], keywords: Sequence[Token], hover: Any
) -> om.OutlineEntry:
    """One outline entry: Lean's symbol, its keywords (up to its name) and its hover."""
    start, name_at = _at(symbol["range"]["start"]), _at(symbol["selectionRange"]["start"])
    head = [token.text for token in keywords if start <= (token.line, token.character) <= name_at]
    signature, docstring = hover_parts(hover)
    return om.OutlineEntry(
        name=str(symbol.get("name", "")),
        kind=head[-1] if head else None,
        signature=signature,
        range=dict(symbol["range"]),
        selection_range=dict(symbol["selectionRange"]),
        modifiers=head[:-1],
        container=list(container),
        docstring=docstring,
    )


def hover_parts(hover: Any) -> tuple[str | None, str | None]:
    """Lean's hover on a declaration name as (signature, docstring).

    Lean's hover is Markdown: a `lean` code block with the signature, then sections separated by `***`: the
    docstring, and `*import M*` when the name comes from another module (not a docstring).
    """
    contents = hover.get("contents") if isinstance(hover, Mapping) else None
    if isinstance(contents, Mapping):
        contents = contents.get("value")
    if not isinstance(contents, str):
        return None, None
    found = _CODE_BLOCK.match(contents)
    if found is None:
        return None, None
    sections = [part.strip() for part in contents[found.end() :].split("***")]
    notes = [part for part in sections if part and not _IMPORT_NOTE.match(part)]
    return found.group(1).strip() or None, "\n\n".join(notes) or None
