"""The `completions` operation: Lean's completions at a position of a document version, bounded in count.

Owns: asking Lean (`textDocument/completion`) right after the ordered change for the caller's version (Lean
answers once the snapshot at the position is elaborated, never behind a whole-file barrier), keeping the first
`limit` items in Lean's order (its array's, as Lean 4.35 ranks; by `sortText` when Lean sends one, else by label,
as LSP says), resolving the first `resolve` of
those (all by default) one at a time with `completionItem/resolve` (where Lean puts an item's `detail`, its type)
and shaping them (`_item`). The position is validated against Beam's own copy of
the text before anything is sent. It must not rank, filter or invent completions: what Lean offers is the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, get_args

from beam_broker._call import Call
from beam_broker._ops import models as om
from beam_broker._ops.navigation import lsp_json
from beam_lsp import Position

KINDS: Final[tuple[str, ...]] = get_args(om.CompletionKind)
"""LSP `CompletionItemKind` names; kind `n` is `KINDS[n - 1]`."""


async def completions(call: Call, inp: om.CompletionsInput) -> om.CompletionsResult:
    """Lean's completions at a position: the first `limit` items, resolved, and how many were dropped."""
    client, doc = await call.checked(inp)
    pos = Position(line=inp.line, character=inp.character)
    client.document(doc.uri).validate(pos)
    listed = await client.completion(doc.uri, pos)
    ordered = listed.items  # Lean 4.35 sends no `sortText`: its order is its ranking
    if any(item.sort_text is not None for item in ordered):  # LSP's rule: by `sortText`, else by the label
        ordered = sorted(ordered, key=lambda item: item.label if item.sort_text is None else item.sort_text)
    kept = ordered[: inp.limit]
    count = len(kept) if inp.resolve is None else min(inp.resolve, len(kept))
    resolved = [lsp_json(await client.resolve_completion(item)) for item in kept[:count]]
    resolved += [{}] * (len(kept) - count)
    return om.CompletionsResult(
        workspace=call.workspace,
        version=doc.version,
        is_incomplete=listed.is_incomplete,
        total=len(listed.items),
        dropped=len(listed.items) - len(kept),
        items=[_item({**lsp_json(first), **later}) for first, later in zip(kept, resolved, strict=True)],
    )


def _text(value: Any) -> str | None:
    """A `string | MarkupContent` field as text (None when absent or empty)."""
    if isinstance(value, Mapping):
        value = value.get("value")
    return value if isinstance(value, str) and value else None


def _item(raw: Mapping[str, Any]) -> om.CompletionItem:
    """One Lean completion item: its label, kind name, detail, documentation and the text it would insert.

    `insert_text` is given only when Lean inserts something other than the label (`textEdit.newText`, else
    `insertText`).
    """
    kind = raw.get("kind")
    edit = raw.get("textEdit")
    insert = edit.get("newText") if isinstance(edit, Mapping) else raw.get("insertText")
    label = str(raw.get("label", ""))
    return om.CompletionItem(
        label=label,
        kind=KINDS[kind - 1] if isinstance(kind, int) and 1 <= kind <= len(KINDS) else None,  # type: ignore[arg-type]
        detail=_text(raw.get("detail")),
        documentation=_text(raw.get("documentation")),
        insert_text=insert if isinstance(insert, str) and insert != label else None,
        sort_text=raw.get("sortText") if isinstance(raw.get("sortText"), str) else None,
    )
