"""The `axioms` operation: the axioms a declaration depends on, from Lean's `#print axioms` in a command probe.

Owns: where the probe goes and what it names: right after the declaration Lean lists at a position (in its
namespace and section, `declaration`), or after the document's last line without a position; the caller's
`name`, else that declaration's name as Lean lists it. Running `#print axioms <name>` there as a command probe on
a mirror, and reading Lean's answer: the axioms it
lists, whether `sorryAx` is among them, and which are not Lean's standard three. What Lean said is returned as
it is. The source document is never touched.
"""

from __future__ import annotations

import re
from typing import Final, cast

from beam_broker import _probe_text as probe
from beam_broker._call import Call
from beam_lsp import Position

from . import models as pm
from .declaration import declaration_at
from .run import run_probe

_DEPENDS: Final = re.compile(r"\A'(?P<name>.*)' depends on axioms: \[(?P<axioms>.*)\]\s*\Z", re.DOTALL)
_NONE: Final = re.compile(r"\A'(?P<name>.*)' does not depend on any axioms\s*\Z", re.DOTALL)


async def axioms(call: Call, inp: pm.AxiomsInput) -> pm.AxiomsResult:
    """`#print axioms` of a declaration, by name or at a position, on a mirror."""
    client, doc = await call.checked(inp)
    text_doc = client.document(doc.uri)
    source = text_doc.text
    pool = call.runtime.pool(doc.uri)
    if inp.line is None or inp.character is None:  # the model insists on a name then
        name = cast(str, inp.name)
        async with pool.checkout(source) as mirror:
            basis = probe.Basis("command", len(source), 0)
            outcome = await run_probe(call, client, doc, mirror, source, basis, [print_axioms(name)])
    else:
        pos = Position(line=inp.line, character=inp.character)
        text_doc.validate(pos)
        async with pool.checkout(probe.declaration_text(text_doc, pos)) as mirror:
            declaration = await declaration_at(call, client, doc, pos, mirror)
            name = inp.name or declaration.name
            basis = probe.Basis("command", declaration.end, 0)
            outcome = await run_probe(call, client, doc, mirror, source, basis, [print_axioms(name)])
    printed, found = listed_axioms(outcome.messages)
    return pm.AxiomsResult(
        workspace=call.workspace,
        version=doc.version,
        name=printed or name,
        axioms=found,
        uses_sorry=pm.SORRY_AXIOM in (found or []),
        nonstandard=[a for a in found or [] if a not in pm.STANDARD_AXIOMS],
        messages=outcome.messages,
    )


def print_axioms(name: str) -> str:
    """The probe command."""
    return f"#print axioms {name}"


def listed_axioms(messages: list[pm.RunMessage]) -> tuple[str | None, list[str] | None]:
    """The full name Lean printed and the axioms it lists, in its order; (None, None) when Lean gave no such answer."""
    for message in messages:
        if message.severity != "information":
            continue
        empty = _NONE.match(message.text)
        if empty is not None:
            return empty.group("name"), []
        found = _DEPENDS.match(message.text)
        if found is not None:
            return found.group("name"), split_names(found.group("axioms"))
    return None, None


def split_names(text: str) -> list[str]:
    """Split Lean's `a, b.c, «d, e»` list of names at the commas outside `«»` quotes."""
    names: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "«":
            quoted = True
        elif char == "»":
            quoted = False
        if char == "," and not quoted:
            names.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    names.append("".join(current).strip())
    return [name for name in names if name]
