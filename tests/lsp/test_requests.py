"""The typed requests mixed into `LeanClient` (`_requests`): how Lean's JSON becomes lsprotocol values."""

from __future__ import annotations

from lsprotocol import types

from beam_lsp import _requests


def test_locations_and_symbols_keep_the_shape_lean_chose() -> None:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}
    link = {"targetUri": "file:///a.lean", "targetRange": rng, "targetSelectionRange": rng}
    location = {"uri": "file:///a.lean", "range": rng}
    assert [type(x) for x in _requests._locations([link, location])] == [types.LocationLink, types.Location]
    information = {"name": "n", "kind": 12, "location": location}
    document = {"name": "n", "kind": 12, "range": rng, "selectionRange": rng}
    assert type(_requests._symbol(information)) is types.SymbolInformation
    assert type(_requests._symbol(document)) is types.DocumentSymbol
