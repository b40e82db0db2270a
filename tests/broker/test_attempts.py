"""Batch attempts: alternative texts at one position, each run on its own, concurrently on probe mirrors.

The fake lane checks the answers (one per text, in order, each as `run_at` would give it), the handles, the mirror
bound, input validation and the scheduler (`run_all`: every mirror takes the next waiting alternative, an idle
mirror helps a slow one, the first failure cancels the rest). The real lane checks command and proof mode on
Lean 4.35 (prelude fixtures: without Init no tactic parses, so proof-mode attempts fail with Lean's errors and the
goals at the basis).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_broker._mirrors import Mirror
from beam_broker._ops import goals as goals_module
from beam_broker._probe_text import Basis, Rename, build, declaration_start, proof_basis, shareable, shared
from beam_broker._probes import attempts as attempts_module
from beam_broker._probes import run as probe_run
from beam_broker._probes.attempts import _groups, run_all
from beam_broker._probes.run import Outcome
from beam_lsp import Position, TextDocument

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
SOURCE = "def x := 1\n\ndef y := 2\n"
COMMAND = Basis("command", 0, 0)


def at(path: str, line: int, character: int, texts: list[str], version: int = 1, **more: Any) -> dict[str, Any]:
    return {"path": path, "version": version, "line": line, "character": character, "texts": texts, **more}


# ---- fake lane: answers -------------------------------------------------------------------------------
async def test_every_text_is_answered_in_order_with_its_own_success_and_messages(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker({"elab_ms": 5}) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "attempts", root, **at("A.lean", 0, 0, ["def a := x", "ERROR_HERE", "#check y"]))
        source = await call(broker, "sync", root, path="A.lean")
    assert result["workspace"] == {"root": str(root)} and result["version"] == 1 and result["mode"] == "command"
    assert [a["success"] for a in result["attempts"]] == [True, False, True]
    assert result["attempts"][1]["messages"] == [{"severity": "error", "text": "unknown identifier 'ERROR_HERE'"}]
    assert all(a["messages"] == [] for a in result["attempts"][::2])
    assert all(a["proof_state"] is None and a["next_handle"] is None for a in result["attempts"])
    assert source["version"] == 1 and (root / "A.lean").read_text() == SOURCE, "the source is never touched"


async def test_proof_mode_attempts_report_the_goals_after_each_one(tmp_path: Path) -> None:
    first = "theorem t : True /- GOALS_HERE -/ := by"
    root = fake_project(tmp_path / "proj", {"A.lean": f"{first}\n  skip\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "attempts", root, **at("A.lean", 0, len(first), ["fine", "ERROR_HERE"]))
    assert result["mode"] == "proof"
    fine, bad = result["attempts"]
    assert fine["success"] is True and fine["proof_state"]["goals"], "goals remain after it"
    assert bad["success"] is False and bad["messages"][0]["text"] == "unknown identifier 'ERROR_HERE'"


async def test_the_goals_at_the_basis_of_a_failed_attempt_are_asked_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent tries snippet after snippet at one place: Lean's goals there do not change within a version.
    first = "theorem t : True /- GOALS_HERE -/ := by"
    root = fake_project(tmp_path / "proj", {"A.lean": f"{first}\n  skip\n"})
    asked: list[str] = []
    goals_at = goals_module.goals_at

    async def counting(client: Any, uri: str, pos: Position) -> Any:
        asked.append(uri)
        return await goals_at(client, uri, pos)

    monkeypatch.setattr(goals_module, "goals_at", counting)
    async with open_broker() as broker:
        await call(broker, "sync", root, path="A.lean")
        one = await call(broker, "attempts", root, **at("A.lean", 0, len(first), ["ERROR_HERE"]))
        two = await call(broker, "attempts", root, **at("A.lean", 0, len(first), ["ERROR_HERE", "ERROR_HERE x"]))
        after_one = len(asked)
        (root / "A.lean").write_text(f"{first}\n  skip\n\ntheorem u : True := trivial\n", encoding="utf-8")
        await call(broker, "sync", root, path="A.lean")
        three = await call(broker, "attempts", root, **at("A.lean", 0, len(first), ["ERROR_HERE"], version=2))
    assert after_one == 1 and len(asked) == 2, asked  # once for version 1, once more for version 2
    assert one["attempts"][0]["proof_state"]["goals"], "the goals at the basis"
    assert [a["proof_state"] for a in two["attempts"]] == [one["attempts"][0]["proof_state"]] * 2
    assert three["attempts"][0]["proof_state"] == one["attempts"][0]["proof_state"]


async def test_proof_mode_attempts_sharing_a_version_answer_as_run_at_does(
    tmp_path: Path, shared_groups: list[tuple[str, list[str]]]
) -> None:
    first = "theorem t : True /- GOALS_HERE -/ := by"
    root = fake_project(tmp_path / "proj", {"A.lean": f"{first}\n  skip\n"})
    # Fake Lean answers goals on `by` lines only (`⊢ False`), and a success's goals come from the unsolved goals
    # error (`⊢ True`) otherwise: each alternative's goals must be asked at its own end.
    texts = ["fine", "ERROR_HERE", "also fine\nby the way", "WARN_HERE"]
    async with open_broker({"goal": "⊢ False"}) as broker:
        await call(broker, "update", root, path="A.lean")
        alone = [
            await call(broker, "run_at", root, path="A.lean", version=1, line=0, character=len(first), text=text)
            for text in texts
        ]
        result = await call(broker, "attempts", root, **at("A.lean", 0, len(first), texts))
    keys = ("success", "messages", "traces", "proof_state")
    assert [{k: a[k] for k in keys} for a in result["attempts"]] == [{k: a[k] for k in keys} for a in alone]
    assert [a["success"] for a in alone] == [True, False, True, True]
    assert [a["proof_state"]["goals"][0]["target"] for a in alone] == ["True", "False", "False", "True"]
    assert shared_groups == [("proof", texts)]


async def test_handles_are_kept_for_the_successful_attempts_only_and_continue_with_run_with(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        texts = ["def a1 := x", "ERROR_HERE", "def a3 := y"]
        result = await call(broker, "attempts", root, **at("A.lean", 0, 0, texts, handles=True))
        first, failed, third = result["attempts"]
        assert failed["next_handle"] is None
        assert first["next_handle"] is not None and third["next_handle"] is not None
        assert first["next_handle"] != third["next_handle"]
        continued = await call(broker, "run_with", root, path="A.lean", handle=third["next_handle"], text="#check a3")
        assert continued["success"] is True
        released = await call(broker, "release", root, path="A.lean", handle=first["next_handle"])
    assert released["result"] is None


@pytest.mark.parametrize(("bound", "mirrors"), [(1, 1), (2, 2), (3, 3)])
async def test_a_batch_runs_on_spare_mirrors_within_the_per_document_bound(
    tmp_path: Path, bound: int, mirrors: int
) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    texts = [f"def n{i} := {i}" for i in range(5)] + ["ERROR_HERE"]
    async with open_broker({"elab_ms": 20}, mirrors_per_document=bound) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "attempts", root, **at("A.lean", 2, 0, texts))
        runtime = broker.cached(str(root))
        assert runtime is not None
        pool = runtime.pools[(root / "A.lean").as_uri()]
        assert len(pool.mirrors) == mirrors and all(m.idle for m in pool.mirrors)
        assert broker.open_documents() == [str(root / "A.lean")], "mirrors are never documents"
    assert [a["success"] for a in result["attempts"]] == [True] * 5 + [False]
    assert not [p for p in root.rglob("*") if "_beamProbe" in p.name], "mirrors are never written to disk"


@pytest.mark.parametrize(("count", "mirrors"), [(8, 1), (9, 2), (24, 3)])
async def test_alternatives_sharing_versions_take_a_mirror_per_eight_within_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, mirrors: int
) -> None:
    monkeypatch.setattr(attempts_module, "_cores", lambda: 3)
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    texts = [f"theorem t : T := n{i}" for i in range(count)]  # one name: the copies after the first are renamed
    async with open_broker({"elab_ms": 5}, mirrors_per_document=4) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "attempts", root, **at("A.lean", 2, 0, texts))
        runtime = broker.cached(str(root))
        assert runtime is not None
        assert len(runtime.pools[(root / "A.lean").as_uri()].mirrors) == mirrors
    assert [a["success"] for a in result["attempts"]] == [True] * count


async def test_a_batch_leaves_mirrors_busy_with_other_probes_alone(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker(mirrors_per_document=2) as broker:
        await call(broker, "update", root, path="A.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None
        pool = runtime.pool((root / "A.lean").as_uri())
        async with pool.checkout() as busy:  # another call's probe holds one mirror
            result = await call(broker, "attempts", root, **at("A.lean", 0, 0, ["#check x", "#check y"]))
            assert len(pool.mirrors) == 2 and busy.lock.locked()
    assert [a["success"] for a in result["attempts"]] == [True, True]


# ---- fake lane: input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("texts", "problem"),
    [([], "at least 1 item"), ([f"#check x{i}" for i in range(33)], "at most 32 items"), (["#check x", 1], "string")],
)
async def test_texts_must_be_one_to_32_strings(tmp_path: Path, texts: list[Any], problem: str) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        err = await error_of(broker, "attempts", root, **at("A.lean", 0, 0, texts))
    assert err.code == codes.INVALID_INPUT and problem in err.message


async def test_a_bad_position_a_stale_version_or_a_loose_flag_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        bad = await error_of(broker, "attempts", root, **at("A.lean", 9, 0, ["#check x"]))
        stale = await error_of(broker, "attempts", root, **at("A.lean", 0, 0, ["#check x"], version=3))
        loose = await error_of(broker, "attempts", root, **at("A.lean", 0, 0, ["#check x"], handles="true"))
        extra = await error_of(broker, "attempts", root, **at("A.lean", 0, 0, ["#check x"], text="#check x"))
    assert bad.code == codes.INVALID_PARAMS and stale.code == codes.CONTENT_MODIFIED
    assert loose.code == codes.INVALID_INPUT and extra.code == codes.INVALID_INPUT
    assert extra.data == {"fields": ["text"]}


# ---- fake lane: the scheduler -------------------------------------------------------------------------
def outcome(index: int) -> Outcome:
    return Outcome(True, [], [f"answer {index}"], None)


async def test_run_all_answers_in_order_whichever_mirror_ran_each() -> None:
    mirrors = [Mirror(f"file:///m{k}.lean") for k in range(3)]
    ran: dict[int, str] = {}

    async def run(mirror: Mirror, index: int) -> Outcome:
        await anyio.lowlevel.checkpoint()
        ran[index] = mirror.uri
        return outcome(index)

    with anyio.fail_after(10):
        outcomes = await run_all(mirrors, 7, run)
    assert [o.traces for o in outcomes] == [[f"answer {i}"] for i in range(7)]
    assert set(ran) == set(range(7)) and set(ran.values()) == {m.uri for m in mirrors}


async def test_an_idle_mirror_helps_a_slow_alternative_and_the_first_answer_wins() -> None:
    fast, stuck = Mirror("file:///fast.lean"), Mirror("file:///stuck.lean")
    cancelled: list[int] = []
    runs: list[tuple[str, int]] = []

    async def run(mirror: Mirror, index: int) -> Outcome:
        runs.append((mirror.uri, index))
        if mirror is stuck:  # a cold worker that would take forever: only a cancel ends it
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.append(index)
        await anyio.lowlevel.checkpoint()
        return outcome(index)

    with anyio.fail_after(10):
        outcomes = await run_all([fast, stuck], 3, run)
    assert [o.traces for o in outcomes] == [["answer 0"], ["answer 1"], ["answer 2"]]
    assert (stuck.uri, 1) in runs and (fast.uri, 1) in runs, "the fast mirror helped with alternative 1"
    assert cancelled == [1], "the slow run was cancelled once the helper answered"


async def test_the_first_failure_cancels_the_other_alternatives_and_is_raised_alone() -> None:
    mirrors = [Mirror("file:///a.lean"), Mirror("file:///b.lean")]
    started = anyio.Event()
    cancelled: list[int] = []

    async def run(mirror: Mirror, index: int) -> Outcome:
        if index == 0:
            await started.wait()
            raise RuntimeError("the Lean server is gone")
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(index)
        raise AssertionError("unreachable")

    with anyio.fail_after(10), pytest.raises(RuntimeError, match="the Lean server is gone"):
        await run_all(mirrors, 4, run)
    assert cancelled == [1]


# ---- which batches share one mirror version -------------------------------------------------------------
@pytest.mark.parametrize(
    "texts",
    [
        ["#check a", "#check b"],
        ["theorem p0 : T := x", "theorem p1 : T := y", "example : T := z"],
        ["/-- doc -/\ntheorem p0 : T := by\n  simp\n  exact h", "private def p1 (n : N) : N := n", "#eval f 1"],
        ["#print axioms foo", "#reduce two", "lemma l.one : T := t"],
        ["theorem p : T := x", "theorem p : T := y", "/-- doc -/\ntheorem p : T := z"],
    ],
)
def test_alternatives_that_cannot_see_each_other_share_a_version(texts: list[str]) -> None:
    assert shareable(texts, COMMAND, "", 0)


@pytest.mark.parametrize(
    ("texts", "why"),
    [
        (["#check a"], "a single alternative is a plain probe"),
        (["theorem p : T := p", "theorem p : T := y"], "a name several declare, mentioned: copies would rename it"),
        (["private theorem p : T := x", "theorem p : T := y"], "copies of one name declare one full name"),
        (["theorem «p q» : T := x", "theorem «p q» : T := y"], "quoted names stay as they are"),
        (["def temp : N := z", "#check temp"], "one uses what another declares"),
        (["def Foo.temp : N := z", "#check Foo.temp"], "also by its full name"),
        (["theorem p0 : T := x\ntheorem p1 : T := y", "#check a"], "two commands in one text"),
        (["example : T := x example : T := y", "#check a"], "two commands on one line"),
        (["@[simp] theorem p0 : T := x", "example : T := by simp"], "an attribute changes what the next one sees"),
        (["instance : C := c", "example : T := t"], "an instance too"),
        (["open Foo", "#check a"], "and scoped state"),
        (["set_option pp.all true in #check a", "#check b"], "options are left to one probe each"),
        (
            ["#eval show Lean.Elab.Command.CommandElabM Unit from pure ()", "#check a"],
            "meta-programs may change the environment",
        ),
        (["namespace N", "#check a"], "namespaces"),
        (["structure S where", "#check a"], "new types come with instances and projections"),
        (["simp", "exact h"], "not a command"),
        (["#check a\n#exit", "#check b"], "`#exit` stops Lean reading the next ones"),
        (["#check a in", "#check b"], "`in` applies a command to the next one"),
        (["theorem p : T := x\nseal f", "#check b"], "a command the lists do not name changes state"),
        (["#check a /-", "#check b -/"], "an unclosed comment swallows the next one"),
        (['#check "a', '#check b"'], "so does an unclosed string"),
        (['#check s!"{a}"', "#check b"], "interpolated strings are not followed"),
        (["theorem p0 : T := x", "theorem p1 : T := by exact?"], "a search finds what earlier ones declared"),
        (["theorem p0 : T := x", "example : T := by first | simp | apply?"], "apply? too"),
    ],
)
def test_alternatives_that_might_see_each_other_run_one_version_each(texts: list[str], why: str) -> None:
    assert not shareable(texts, COMMAND, "", 0), why


def test_a_batch_text_keeps_each_alternative_where_a_probe_alone_would_put_it() -> None:
    source = "def x := 1\n\ndef y := 2\n"
    basis = Basis("command", len("def x := 1\n"), 0)
    built = build(source, basis, ["#check x", "\n#check x\n\n"])
    assert built.text == "def x := 1\n\n#check x\n\n#check x\n"
    assert [(p.line, p.character) for p in built.starts] == [(2, 0), (4, 0)]
    alone = build(source, basis, ["#check x"])
    assert built.text.startswith(alone.text) and alone.span_start == built.starts[0]


def test_copies_of_a_name_several_alternatives_declare_get_fresh_names_mapped_back_in_messages() -> None:
    basis = Basis("command", len("def x := 1\n"), 0)
    texts = ["theorem p : T := x", "#check x", "theorem p : T := y", "/-- doc -/\ntheorem p : T := z"]
    built = shared(SOURCE, basis, texts, 0)
    assert built.text == (
        "def x := 1\n\ntheorem p : T := x\n\n#check x\n\n"
        "theorem p_beam2 : T := y\n\n/-- doc -/\ntheorem p_beam3 : T := z\n"
    )
    assert built.kept == [(0, "p")], "the first keeps the name: what Lean says about it decides"
    assert [a.rename for a in built.alternatives] == [None, None, Rename("p", "p_beam2"), Rename("p", "p_beam3")]
    assert Rename("p", "p_beam2").back("`p_beam2.eq_1` and p_beam22 and 'p_beam2'") == "`p.eq_1` and p_beam22 and 'p'"
    starts = [(a.start.line, a.start.character) for a in built.alternatives]
    assert starts == [(2, 0), (4, 0), (6, 0), (8, 0)]
    assert [a.stop for a in built.alternatives] == [a.start for a in built.alternatives[1:]] + [None]
    mentioned = "-- p_beam1 p_beam2\n"
    taken = shared(mentioned + SOURCE, Basis("command", len(mentioned) + basis.prefix_end, 0), texts[:1] + texts[2:], 0)
    assert "theorem p_beam1001 : T := y" in taken.text, "a fresh name is one nothing else mentions"


PROOF_SOURCE = "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  skip\n  exact hp\n\ntheorem later : p := broken\n"


def test_tactic_alternatives_run_in_copies_of_the_declaration_under_fresh_names() -> None:
    d = TextDocument("file:///x/A.lean", PROOF_SOURCE, 1)
    pos = Position(line=3, character=2)
    basis = proof_basis(d, pos)
    start = declaration_start(d, pos)
    built = shared(PROOF_SOURCE, basis, ["exact hp", "apply hp\n  -- more"], start)
    copy = "theorem t_beam1 (p : Prop) (hp : p) : p := by\n  skip\n"
    assert (
        built.text
        == "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  skip\n  exact hp\n" + copy + "  apply hp\n    -- more\n"
    )
    alone = build(PROOF_SOURCE, basis, ["exact hp"])
    assert built.text.startswith(alone.text), "the first alternative is where it would be alone"
    first, second = built.alternatives
    assert (first.copy, first.start, first.end) == (Position(line=1, character=0), alone.span_start, alone.span_end)
    assert first.stop == Position(line=4, character=0)
    assert (second.copy, second.start, second.end, second.stop) == (
        Position(line=4, character=0),
        Position(line=6, character=2),
        Position(line=7, character=11),
        None,
    )
    assert built.kept == [(0, "t")] and second.rename == Rename("t", "t_beam1") and first.rename is None


@pytest.mark.parametrize(
    ("declaration", "texts", "shares"),
    [
        ("theorem t (p : Prop) (hp : p) : p := by\n  skip\n", ["exact hp", "simp"], True),
        ("example (p : Prop) (hp : p) : p := by\n", ["exact hp", "simp"], True),
        ("private theorem t : p := by", ["exact hp", "simp"], True),
        ("theorem t : p := by\n" + "  skip\n" * 200, ["exact hp", "simp"], False),
        ("theorem t : p := by\n  exact t\n", ["exact hp", "simp"], False),
        ("theorem t : p := by\n", ["exact t", "simp"], False),
        ("@[simp] theorem t : p := by\n", ["exact hp", "simp"], False),
        ("theorem t : p := by\n", ["exact hp", "simp\ntheorem u : q := x"], False),
        ("theorem t : p := by\n", ["exact hp", "open Foo in simp"], False),
        ("theorem t : p := by\n", ["exact hp"], False),
        ("theorem t : p := by\n", ["exact hp", "simp\n#exit"], False),
        ("theorem t : p := by\n", ["exact hp /-", "simp -/"], False),
        ("theorem t : p := by\n", ["exact '\"'", 'exact "-/" -- /-'], True),
        ("theorem t : p := by\n", ["simp", "exact?"], False),  # would find `t_beam1`, the first copy
        ("theorem t : p := by\n", ["hint", "simp"], False),
        ("theorem t : p := by\n", ["simp?", "exact (h?)"], True),  # simp? reads the simp set, not every name
    ],
)
def test_which_tactic_alternatives_share_a_version(declaration: str, texts: list[str], shares: bool) -> None:
    assert shareable(texts, Basis("proof", len(declaration), 2), declaration, 0) is shares


@pytest.mark.parametrize(
    ("before", "shares"),
    [
        ("", True),
        ("/-- doc -/\n", True),
        ("def x := 1\n\n", True),
        ("open Foo in\n", False),
        ("set_option maxHeartbeats 400 in -- slow\n", False),
        ("@[simp]\n", False),
        ("private\n", False),
        ("theorem s : q := by\n  simp [h]\n\n", True),  # the end of the command before
    ],
)
def test_tactic_alternatives_share_no_copy_of_a_declaration_whose_command_starts_above_it(
    before: str, shares: bool
) -> None:
    """A copy starts at the declaration's first line: `open Foo in` above it would not apply to the copy."""
    source = before + "theorem t : p := by\n"
    assert shareable(["exact hp", "simp"], Basis("proof", len(source), 2), source, len(before)) is shares


@pytest.mark.parametrize(
    ("prefix", "shares"),
    [
        ("def x := 1\n", True),
        ("mutual\ndef x := 1\n", False),
        ("def x := 1\nmutual\ndef y := 2\nend\n", True),
        ("namespace N\n  mutual\n  def x := 1\n", False),  # indented: Lean reads it all the same
        ("/- why -/ mutual\ndef x := 1\n", False),
        ("  mutual\n  def x := 1\n  end\n", True),
    ],
)
def test_nothing_is_shared_inside_a_mutual_block(prefix: str, shares: bool) -> None:
    declaration = "theorem t : p := by\n"
    source = prefix + declaration
    tactics = Basis("proof", len(source), 2)
    assert shareable(["exact hp", "simp"], tactics, source, len(prefix)) is shares
    assert shareable(["#check a", "#check b"], Basis("command", len(source), 0), source, len(prefix)) is shares


@pytest.mark.parametrize(
    ("count", "mirrors", "groups"),
    [(8, 2, [[0, 1, 2, 3], [4, 5, 6, 7]]), (5, 2, [[0, 1, 2], [3, 4]]), (2, 4, [[0], [1]]), (3, 1, [[0, 1, 2]])],
)
def test_a_batch_splits_into_one_run_of_consecutive_alternatives_per_mirror(
    count: int, mirrors: int, groups: list[list[int]]
) -> None:
    assert _groups(count, mirrors) == groups


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_command_attempts_each_see_the_source_before_them_and_not_each_other(
    broker: Broker, demo_root: Path
) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    texts = [
        "#check byTerm",
        "theorem z : MyTrue := nope",
        "def temp : MyNat := MyNat.zero",
        "#check temp",
        "#check two",
    ]
    result = await call(broker, "attempts", demo_root, **at("Demo/Proofs.lean", 3, 0, texts, handles=True))
    assert result["mode"] == "command"
    checked, nope, temp, other, later = result["attempts"]
    assert checked["success"] is True and checked["messages"] == [
        {"severity": "information", "text": "byTerm : MyTrue"}
    ]
    assert nope["success"] is False and nope["messages"][0] == {
        "severity": "error",
        "text": "Unknown identifier `nope`",
        "code": "lean.unknownIdentifier",
    }
    assert temp["success"] is True and temp["next_handle"] is not None
    assert other["success"] is False, "an attempt never sees another attempt's declarations"
    assert later["success"] is False, "nor the source after the position (`two` comes later)"
    assert nope["next_handle"] is None and other["next_handle"] is None
    continued = await call(broker, "run_with", demo_root, path="Demo/Proofs.lean", handle=temp["next_handle"],
                           text="#check temp")  # fmt: skip
    assert continued["messages"] == [{"severity": "information", "text": "temp : MyNat"}]
    source = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert source["version"] == 1 and source["diagnostics"]["counts"]["total"] == 0
    assert "temp" not in (demo_root / "Demo/Proofs.lean").read_text()


@pytest.mark.lean
async def test_proof_attempts_report_lean_errors_and_the_goals_at_the_position(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Probe.lean").write_text(
        "prelude\nimport Demo.Basic\n\ntheorem open2 (p : Prop) (hp : p) : p := by\n  {}\n"
    )
    await call(broker, "sync", demo_root, path="Demo/Probe.lean")
    result = await call(broker, "attempts", demo_root, **at("Demo/Probe.lean", 4, 2, ["bogus_tactic", "nope"]))
    goal = {
        "goalPrefix": "⊢ ",
        "target": "p",
        "hyps": [{"names": ["p"], "type": "Prop"}, {"names": ["hp"], "type": "p"}],
    }
    assert result["mode"] == "proof" and len(result["attempts"]) == 2
    for attempt in result["attempts"]:
        assert attempt["success"] is False and [m["severity"] for m in attempt["messages"]] == ["error"]
        assert attempt["proof_state"] == {"goals": [goal]}


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `run_batch` call could answer its group from one version (True) or fell back (False)."""
    seen: list[bool] = []
    real = probe_run.run_batch

    async def spy(*args: Any) -> list[Outcome] | None:
        out = await real(*args)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(attempts_module, "run_batch", spy)
    return seen


DIFFERENTIAL = [
    "#check byTerm",
    "theorem alt0 : MyTrue := nope",
    "example : MyTrue := myTrue",
    "def alt1 (n : MyNat) : MyNat := MyNat.zero",
    "#print idProof",
    "theorem alt2 (p : Prop) (hp : p) : p := hp",
    "theorem alt3 : MyNat := MyTrue.intro",
    "#check two",
]


@pytest.mark.lean
@pytest.mark.parametrize(
    ("texts", "shared"),
    [
        (DIFFERENTIAL, True),
        (["theorem alt0 : MyTrue := (", "#check byTerm", "example : MyTrue := myTrue"], False),
        (["#check byTerm", "theorem alt0 : MyTrue := myTrue -/", "#check idProof"], False),
    ],
    ids=["isolated", "unclosed-parenthesis", "stray-comment-end"],
)
async def test_a_shared_version_answers_every_alternative_exactly_as_run_at_does(
    broker: Broker, demo_root: Path, batches: list[bool], texts: list[str], shared: bool
) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    alone = []
    for text in texts:
        one = await call(
            broker, "run_at", demo_root, path="Demo/Proofs.lean", version=1, line=3, character=0, text=text
        )
        alone.append({k: one[k] for k in ("success", "messages", "traces", "proof_state")})
    result = await call(broker, "attempts", demo_root, **at("Demo/Proofs.lean", 3, 0, texts))
    together = [{k: a[k] for k in ("success", "messages", "traces", "proof_state")} for a in result["attempts"]]
    assert together == alone
    assert batches and all(batches) is shared, "a parse error sends the group back to one version per text"
    assert [a["success"] for a in alone].count(False) >= 1 and [a["success"] for a in alone].count(True) >= 1


@pytest.fixture
def shared_groups(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """(mode, texts) of each group `run_batch` answered from one version."""
    seen: list[tuple[str, list[str]]] = []
    real = probe_run.run_batch

    async def spy(*args: Any) -> list[Outcome] | None:
        out = await real(*args)
        if out is not None:
            seen.append((args[5].mode, list(args[6])))
        return out

    monkeypatch.setattr(attempts_module, "run_batch", spy)
    return seen


PROBE = (
    "prelude\nimport Demo.Basic\n\n"
    "theorem open2 (p : Prop) (hp : p) : p := by\n  {}\n\n"
    "example (p : Prop) (hp : p) : p := by {}\n\n"
    "theorem more (p : Prop) (hp : p) : p := by\n  {}\n  {}\n"
)
PROOF_POSITIONS = [(3, 43), (4, 2), (4, 4), (6, 36), (6, 38), (9, 2), (10, 2)]
"""Proof-mode positions in `PROBE`: on a `by` line, at a tactic's first character, after a tactic, inline."""


def random_command(rng: random.Random) -> str:
    """A command alternative at `Demo/Proofs.lean` line 3: fresh, shared, already declared or mentioned names."""
    name = rng.choice(["alt0", "alt0", "alt1", "alt2", "byTerm", "two"])
    body = rng.choice(["myTrue", "MyTrue.intro", "nope", "MyNat.zero", "two", "byTerm", "(", "alt1"])
    return rng.choice(
        [
            f"theorem {name} : MyTrue := {body}",
            f"theorem {name} : MyNat := {body}",  # not a proposition: Lean names the theorem
            f"theorem {name} (p : Prop) (hp : p) : p := {rng.choice(['hp', 'p', body])}",
            f"def {name} : MyNat := {body}",
            f"private def {name} : MyNat := MyNat.succ {body}",
            f"/-- doc -/\ntheorem {name} : MyTrue :=\n  {body}",
            f"example : MyTrue := {body}",
            f"#check {body}",
            f"#print {rng.choice(['byTerm', 'idProof', 'alt0'])}",
            # Texts that would run on into the next alternative of a shared version, or stop Lean reading it.
            f"#check {body} {rng.choice(['in', '/-', '-/', '#exit'])}",
            f'#check "{body}',
        ]
    )


def random_tactic(rng: random.Random) -> str:
    """A tactic alternative (prelude fixtures parse only `{}`: the rest are Lean's errors, parse errors among them)."""
    return rng.choice(
        ["{}", "{ }", "bogus", "nope hp", "{}\n{}", "skip", "(", "exact more", "{}  -- fine", "{} /-", "{}\n#exit"]
    )


def essentials(answer: dict[str, Any]) -> dict[str, Any]:
    """What must agree; messages as a sorted list (Lean may report a parse error of the next command and an
    elaboration error of this one in either order, depending on which snapshot finishes first)."""
    out = {k: answer[k] for k in ("success", "traces", "proof_state")}
    out["messages"] = sorted(answer["messages"], key=lambda m: json.dumps(m, sort_keys=True))
    return out


@pytest.mark.lean
async def test_random_alternatives_get_exactly_run_ats_answers(
    broker: Broker, demo_root: Path, shared_groups: list[tuple[str, list[str]]]
) -> None:
    """Differential: random batches (command and proof mode) against one `run_at` per text, on real Lean."""
    (demo_root / "Demo/Probe.lean").write_text(PROBE)
    for path in ("Demo/Proofs.lean", "Demo/Probe.lean"):
        await call(broker, "sync", demo_root, path=path)
    rng = random.Random(23)
    fixed = [
        (True, ["theorem alt0 : MyTrue := myTrue", "theorem alt0 : MyNat := MyNat.zero", "theorem alt0 : MyTrue := x"]),
        (True, ["theorem byTerm : MyTrue := nope"] * 4),  # already declared: not a word about `nope`
        (False, ["{}", "bogus", "{ }"]),
    ]
    for round_ in range(30):
        command = fixed[round_][0] if round_ < len(fixed) else rng.random() < 0.5
        path, (line, character) = (
            ("Demo/Proofs.lean", (3, 0)) if command else ("Demo/Probe.lean", rng.choice(PROOF_POSITIONS))
        )
        if round_ < len(fixed):
            texts = fixed[round_][1]
        else:
            texts = [random_command(rng) if command else random_tactic(rng) for _ in range(rng.randint(2, 5))]
        alone = []
        for text in texts:
            one = await call(
                broker, "run_at", demo_root, path=path, version=1, line=line, character=character, text=text
            )
            alone.append(essentials(one))
        result = await call(broker, "attempts", demo_root, **at(path, line, character, texts))
        assert [essentials(a) for a in result["attempts"]] == alone, texts
    assert [texts for mode, texts in shared_groups if mode == "proof"], "tactic alternatives shared versions"
    assert any(len(group) > len({t.split()[1] for t in group}) for mode, group in shared_groups if mode == "command"), (
        "so did alternatives declaring one name"
    )
    assert fixed[1][1] not in [group for _, group in shared_groups], "copies of a name Lean already has fall back"


LEAKS = (  # `open Hid in` above the declaration: a copy of it from its first line would not see `hidden`
    "prelude\nimport Demo.Basic\n\n"
    "namespace Hid\ntheorem hidden : MyTrue := myTrue\nend Hid\n\n"
    "open Hid in\ntheorem opened (p : Prop) (hp : p) : MyTrue := by\n  {}\n"
)


@pytest.mark.lean
@pytest.mark.parametrize(
    ("path", "line", "character", "texts"),
    [
        ("Demo/Proofs.lean", 3, 0, ["#check byTerm\n#exit", "theorem alt0 : MyTrue := nope"]),
        ("Demo/Proofs.lean", 3, 0, ["#check byTerm /-", "#check two -/"]),
        ("Demo/Proofs.lean", 3, 0, ["theorem alt0 : MyTrue := nope /-", "theorem alt1 : MyTrue := myTrue -/"]),
        ("Demo/Leaks.lean", 9, 2, ["{}\n#exit", "match hidden with | _ => {}"]),
        ("Demo/Leaks.lean", 9, 2, ["match hidden with | _ => {}", "match hidden with | _ => {}"]),
        ("Demo/Leaks.lean", 9, 2, ["{} /-", "{} -/"]),
        ("Demo/Proofs.lean", 3, 0, ["#check byTerm in", "#check two"]),
        ("Demo/Proofs.lean", 3, 0, ['#check "a', '#check b"']),
    ],
    ids=[
        "exit",
        "unclosed-comment",
        "unclosed-comment-decl",
        "exit-tactic",
        "open-in-above",
        "comment-tactic",
        "in-combinator",
        "unclosed-string",
    ],
)
async def test_alternatives_that_could_reach_into_the_next_one_get_run_ats_answers(
    broker: Broker, demo_root: Path, path: str, line: int, character: int, texts: list[str]
) -> None:
    """Each of these batches shared one version before the review, and some answer differed from `run_at`'s."""
    (demo_root / "Demo/Leaks.lean").write_text(LEAKS)
    await call(broker, "sync", demo_root, path=path)
    alone = []
    for text in texts:
        one = await call(broker, "run_at", demo_root, path=path, version=1, line=line, character=character, text=text)
        alone.append(essentials(one))
    result = await call(broker, "attempts", demo_root, **at(path, line, character, texts))
    assert [essentials(a) for a in result["attempts"]] == alone


@pytest.mark.lean
@pytest.mark.parametrize(
    ("clash", "path", "line", "character", "texts"),
    [
        (
            "theorem alt0_beam1 : MyTrue := myTrue\n",
            "Demo/UsesClash.lean",
            2,
            0,
            ["theorem alt0 : MyTrue := myTrue", "theorem alt0 : MyTrue := myTrue"],
        ),
        (
            "theorem goal_beam1 : MyTrue := myTrue\n",
            "Demo/UsesClash.lean",
            5,
            2,
            ["{}", "{}"],
        ),
    ],
    ids=["command-copy", "proof-copy"],
)
async def test_a_copys_fresh_name_that_an_import_declares_falls_back_to_run_ats_answers(
    broker: Broker, demo_root: Path, clash: str, path: str, line: int, character: int, texts: list[str]
) -> None:
    """A copy's fresh name (`alt0_beam1`) declared by an imported module: the copy's `already been declared`
    error was mapped back to the original name and the alternative failed, where `run_at` succeeds."""
    (demo_root / "Demo/Clash.lean").write_text("prelude\nimport Demo.Basic\n\n" + clash)
    await call(broker, "save", demo_root, path="Demo/Clash.lean")
    (demo_root / path).write_text(
        "prelude\nimport Demo.Clash\n\n\ntheorem goal (p : Prop) (hp : p) : MyTrue := by\n  {}\n"
    )
    await call(broker, "sync", demo_root, path=path)
    alone = []
    for text in texts:
        one = await call(broker, "run_at", demo_root, path=path, version=1, line=line, character=character, text=text)
        alone.append(essentials(one))
    result = await call(broker, "attempts", demo_root, **at(path, line, character, texts))
    assert [essentials(a) for a in result["attempts"]] == alone
