"""Axioms: `#print axioms` of a declaration (at a position, or by name) as a command probe on a mirror.

The fake lane scripts what Lean prints for the probe line of the mirror and checks where the probe goes, what is
read from Lean's answer and the input rules. The real lane runs Lean 4.35 on a prelude fixture: there is no Init,
so `sorry` cannot elaborate, and the fixture declares Lean's `sorryAx` itself (the axiom a `sorry` elaborates to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerError
from beam_broker import errors as codes
from beam_broker._probes import models as pm
from beam_broker._probes.axioms import listed_axioms, split_names

from .support import TIMEOUT, call, fake_project, open_broker

pytestmark = pytest.mark.anyio
SOURCE = "theorem t : True := trivial\n\ndef d := 1\n"
AFTER_T = 2
"""The mirror line of `#print axioms` right after `t` (`t`'s line, a blank line, the probe)."""
AFTER_ALL = 4
"""The mirror line of `#print axioms` after the document's last line."""


async def axioms(broker: Broker, root: Path, **args: Any) -> dict[str, Any]:
    """`broker.call("axioms", ...)` (the `call` helper's own `name` parameter would take the declaration's)."""
    with anyio.fail_after(TIMEOUT):
        return await broker.call("axioms", {"workspace": {"root": str(root)}, **args}, None)


async def refused(broker: Broker, root: Path, **args: Any) -> BrokerError:
    with pytest.raises(BrokerError) as info:
        await axioms(broker, root, **args)
    return info.value


def lean_says(line: int, message: str, severity: int = 3) -> dict[str, Any]:
    return {"diagnostics": {"_beamProbe1.lean": [{"line": line, "message": message, "severity": severity}]}}


async def axioms_of(tmp_path: Path, lean: dict[str, Any], **args: Any) -> dict[str, Any]:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await axioms(broker, root, path="A.lean", version=1, **args)
    assert (root / "A.lean").read_text() == SOURCE, "the source is never touched"
    return result


# ---- fake lane ------------------------------------------------------------------------------------------
async def test_the_axioms_lean_lists_are_returned_with_sorry_and_the_nonstandard_ones_flagged(tmp_path: Path) -> None:
    said = "'t' depends on axioms: [propext, sorryAx, Classical.choice, «my, axiom»]"
    result = await axioms_of(tmp_path, lean_says(AFTER_T, said), line=0, character=3)
    assert result == {
        "workspace": result["workspace"],
        "version": 1,
        "name": "t",
        "axioms": ["propext", "sorryAx", "Classical.choice", "«my, axiom»"],
        "uses_sorry": True,
        "nonstandard": ["sorryAx", "«my, axiom»"],
        "messages": [{"severity": "information", "text": said}],
    }


async def test_a_declaration_free_of_axioms_lists_none_and_is_not_flagged(tmp_path: Path) -> None:
    said = "'d' does not depend on any axioms"
    result = await axioms_of(tmp_path, lean_says(AFTER_ALL, said), name="d")
    assert (result["name"], result["axioms"], result["uses_sorry"], result["nonstandard"]) == ("d", [], False, [])


async def test_the_name_lean_prints_is_the_full_name(tmp_path: Path) -> None:
    said = "'Foo.t' does not depend on any axioms"
    result = await axioms_of(tmp_path, lean_says(AFTER_T, said), line=0, character=0, name="t")
    assert result["name"] == "Foo.t" and result["axioms"] == []


async def test_without_a_list_from_lean_axioms_is_null_and_lean_says_why(tmp_path: Path) -> None:
    result = await axioms_of(tmp_path, lean_says(AFTER_ALL, "Unknown constant `nope`", severity=1), name="nope")
    assert result["name"] == "nope" and result["axioms"] is None and result["uses_sorry"] is False
    assert result["messages"] == [{"severity": "error", "text": "Unknown constant `nope`"}]


async def test_a_position_outside_every_declaration_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        blank = await refused(broker, root, path="A.lean", version=1, line=1, character=0)
        outside = await refused(broker, root, path="A.lean", version=1, line=7, character=0)
    assert blank.code == codes.INVALID_PARAMS and "no declaration at 1:0" in blank.message
    assert outside.code == codes.INVALID_PARAMS


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "name, or line and character, is required"),
        ({"line": 0}, "line and character go together"),
        ({"character": 0, "name": "t"}, "line and character go together"),
        ({"name": "t #eval 1"}, "name does not match the pattern"),
        ({"name": "t\n#eval 1"}, "name does not match the pattern"),
        ({"name": ""}, "name must have at least 1 character"),
        ({"line": "0", "character": 0}, 'line must be an integer (got "0")'),
    ],
)
async def test_a_declaration_is_named_or_placed_exactly(tmp_path: Path, args: dict[str, Any], problem: str) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        err = await refused(broker, root, path="A.lean", version=1, **args)
    assert err.code == codes.INVALID_INPUT and problem in err.message, err.message
    assert "Value error" not in err.message and "should" not in err.message  # the user's words, not pydantic's


def test_lean_s_lists_split_at_commas_outside_guillemets() -> None:
    assert split_names("propext, «a, b».c, Quot.sound") == ["propext", "«a, b».c", "Quot.sound"]
    assert split_names("") == []


def test_only_an_information_message_in_lean_s_words_is_a_list() -> None:
    def msg(severity: Any, text: str) -> pm.RunMessage:
        return pm.RunMessage(severity=severity, text=text)

    assert listed_axioms([msg("error", "'t' depends on axioms: [sorryAx]")]) == (None, None)
    assert listed_axioms([msg("information", "t : True")]) == (None, None)
    found = [msg("information", "t : True"), msg("information", "'x.y' depends on axioms: [propext]")]
    assert listed_axioms(found) == ("x.y", ["propext"])


# ---- real Lean lane -----------------------------------------------------------------------------------
AXIOMS = """\
prelude
import Demo.Basic

theorem clean : MyTrue := myTrue

universe u
axiom sorryAx (α : Sort u) : α
theorem usesSorry : MyTrue := sorryAx MyTrue

namespace Foo

theorem inner : MyTrue := clean

end Foo

axiom myAx : MyTrue

theorem viaAx : MyTrue := myAx
"""


@pytest.mark.lean
async def test_real_lean_lists_each_declaration_s_axioms_and_flags_sorry(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Ax.lean").write_text(AXIOMS, encoding="utf-8")
    await call(broker, "sync", demo_root, path="Demo/Ax.lean")
    ax = {"path": "Demo/Ax.lean", "version": 1}
    clean = await axioms(broker, demo_root, **ax, line=3, character=10)
    assert (clean["name"], clean["axioms"], clean["uses_sorry"]) == ("clean", [], False)
    assert clean["messages"] == [{"severity": "information", "text": "'clean' does not depend on any axioms"}]
    sorry = await axioms(broker, demo_root, **ax, line=7, character=0)
    assert (sorry["name"], sorry["axioms"], sorry["uses_sorry"], sorry["nonstandard"]) == (
        "usesSorry", ["sorryAx"], True, ["sorryAx"]
    )  # fmt: skip
    inner = await axioms(broker, demo_root, **ax, line=11, character=30)
    assert (inner["name"], inner["axioms"]) == ("Foo.inner", []), "the probe runs inside the namespace"
    via = await axioms(broker, demo_root, **ax, name="viaAx")
    assert (via["axioms"], via["uses_sorry"], via["nonstandard"]) == (["myAx"], False, ["myAx"])
    unknown = await axioms(broker, demo_root, **ax, name="Foo.nope")
    assert unknown["axioms"] is None and unknown["messages"][0]["severity"] == "error"
    source = await call(broker, "sync", demo_root, path="Demo/Ax.lean")
    assert source["version"] == 1 and (demo_root / "Demo/Ax.lean").read_text() == AXIOMS
