"""The differential truth test: Beam never reports what a fresh check of the same disk state does not say.

A seeded random run over the `truth` fixture (five modules, an import chain with a diamond: see
`tests/support/truth.py`) edits files on disk behind Beam's back (plain file writes) and calls Beam (`update`,
`sync`, `save`, `refresh`, `close`, `run_at` probes declaring probe-only names, `workspace_symbols`,
`references`). After each of Beam's answers the SAME disk state is checked from scratch with the toolchain's
`lean` in batch mode (`tests/support/fresh_check.py`), and:
- a file Beam reports clean and complete (a `sync`, `refresh` or `save` that succeeded with 0 errors) has no
  error in the fresh check;
- every error and warning Beam reports (the items of a successful sync, the blocking diagnostics of a sync or
  of a save refused for document errors) is one the fresh check reports for that file, at the same position
  (LSP's 0-based line and UTF-16 column, in Lean's printed form);
- otherwise Beam said the file is stale or incomplete (`syncBarrierIncomplete`; for a save also
  `saveTraceStale`, which says an import needs rebuilding), which is always acceptable;
- no answer names a probe-only name, except the `run_at` that declared it, and no answer names a probe mirror.

`BEAM_TRUTH_SEED` (default: a fresh random seed) and `BEAM_TRUTH_STEPS` (default `DEFAULT_STEPS`) choose the
run; `BEAM_TRUTH_SEEDS=N` runs N fresh seeds; `BEAM_TRUTH_KEEP_GOING=1` reports every disagreement of a run at
its end instead of stopping at the first. A failure prints the command that reproduces it.

`SEQUENCES` are short scripted runs through the same checks: one per kind of disagreement the random run found
on the broker of issue 19 (each fails there), and controls that agree and must keep agreeing.

The fake-lane tests at the end pin the pieces that need no Lean: the fixture's slots render exactly the files
in tests/fixtures/truth, plans depend on the seed alone, and the position conversion.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig, BrokerError, CallContext
from beam_broker import errors as codes
from beam_broker.events import BrokerEvent
from tests.support import fresh_check, truth
from tests.support.toolchain import Toolchain

from .support import TIMEOUT

pytestmark = pytest.mark.anyio

DEFAULT_STEPS = 100
"""Steps of a default run: about 15 s on the 2-core machine (it is part of the real-Lean lane, `pytest -m lean`)."""


def _seeds() -> list[int]:
    given = os.environ.get("BEAM_TRUTH_SEED")
    if given:
        return [int(given)]
    count = int(os.environ.get("BEAM_TRUTH_SEEDS") or 1)
    return [random.SystemRandom().randrange(1, 10**9) for _ in range(count)]


SEEDS = _seeds()
STEPS = int(os.environ.get("BEAM_TRUTH_STEPS") or DEFAULT_STEPS)
KEEP_GOING = os.environ.get("BEAM_TRUTH_KEEP_GOING") == "1"
_PROBE_NAME = re.compile(re.escape(truth.PROBE_PREFIX) + r"\d+")
_VERDICT_SEVERITIES = ("error", "warning")
"""Severities Beam's items are held to (information items carry no verdict; Lake's setup lines are some)."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """What Beam answered one call: its result or its error, and the events it streamed."""

    op: str
    args: dict[str, Any]
    result: dict[str, Any] | None
    error: BrokerError | None
    events: tuple[dict[str, Any], ...]

    def text(self) -> str:
        """Everything an agent sees of this answer, as JSON text."""
        body: Any = self.result if self.error is None else self.error.wire()
        return json.dumps({"answer": body, "events": list(self.events)}, ensure_ascii=False)

    def show(self) -> str:
        """The call and its answer (events left out), for failure messages."""
        body = self.result if self.error is None else {"error": self.error.wire()}
        return f"{self.op} {json.dumps(self.args)} ->\n  {json.dumps(body, ensure_ascii=False, indent=None)}"


@dataclasses.dataclass(frozen=True)
class Reported:
    """One diagnostic Beam reported about a file: where (LSP) and what (Lean's whole message)."""

    severity: str
    line: int
    character: int
    message: str

    def show(self) -> str:
        return f"{self.severity} at LSP {self.line}:{self.character}: {self.message!r}"


def reported(sync: dict[str, Any]) -> list[Reported]:
    """The errors and warnings a sync result (or the `sync` of a save) reports, from its items and readiness.

    Items and blocking diagnostics both carry Lean's whole message.
    """
    out = []
    for item in sync["diagnostics"].get("items") or []:
        if item["severity"] in _VERDICT_SEVERITIES:
            start = item["range"]["start"]
            out.append(Reported(item["severity"], start["line"], start["character"], item["message"]))
    for b in sync["readiness"]["blocking_diagnostics"]:
        start = b["range"]["start"]
        out.append(Reported(b["severity"], start["line"], start["character"], b["message"]))
    return out


def verdict_problem(path: str, sync: dict[str, Any], fresh: fresh_check.FreshCheck, text: str, lib: Path) -> str | None:
    """Why a complete verdict about `path` contradicts the fresh check (None when it does not).

    `text` is the file's text on disk (Beam read it for this answer), for the position conversion; `lib` the
    project's olean directory (named in import failures, as the oracle's is in its own).
    """
    if sync["diagnostics"]["counts"]["error"] == 0 and fresh.errors(path):
        return f"Beam reports {path} complete with no errors; the fresh check reports errors in it"
    expected = fresh.messages.get(path, ())
    for r in reported(sync):
        line, column = fresh_check.lean_position(text, r.line, r.character)
        message = fresh_check.normalize(r.message, [lib])
        found = any(
            m.severity == r.severity and (m.line, m.column) == (line, column) and m.text == message for m in expected
        )
        if not found:
            return (
                f"Beam reports {r.show()} (Lean's {line}:{column}) in {path}; the fresh check reports no such "
                "message there"
            )
    return None


def leak_problem(answer: Answer, declared: str | None) -> str | None:
    """Why an answer shows what only probes made (a probe-only name other than `declared`, a mirror file)."""
    text = answer.text()
    names = sorted(set(_PROBE_NAME.findall(text)) - {declared})
    if names:
        return f"the answer names probe-only declarations {names}"
    if truth.MIRROR_MARK in text:
        return f"the answer names a probe mirror ({truth.MIRROR_MARK})"
    return None


class Disagreement(Exception):
    """Beam and the fresh check disagree (the message says how to reproduce it)."""


@dataclasses.dataclass
class Run:
    """One run: the broker, the project, the oracle, the steps, and what happened so far."""

    broker: Broker
    root: Path
    oracle: fresh_check.Oracle
    origin: str
    """Where the steps come from (`seed N`, or a scripted sequence's name), for failure messages."""
    reproduce: str
    """The command that runs the same steps again."""
    steps: list[truth.Step]
    state: dict[str, truth.Choice] = dataclasses.field(default_factory=truth.fixture_state)
    index: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def lib(self) -> Path:
        return self.root / truth.BUILD_LIB

    async def call(self, op: str, **args: Any) -> Answer:
        """`op` on the project, bounded; a `BrokerError` is an answer too."""
        events: list[dict[str, Any]] = []

        def emit(event: BrokerEvent) -> None:
            events.append({"event": type(event).__name__, **dataclasses.asdict(event)})

        result, error = None, None
        with anyio.fail_after(TIMEOUT):
            try:
                result = await self.broker.call(op, {"workspace": {"root": str(self.root)}, **args}, CallContext(emit))
            except BrokerError as exc:
                error = exc
        return Answer(op, args, result, error, tuple(events))

    def problem(self, what: str, answer: Answer, *, fresh: fresh_check.FreshCheck | None = None) -> None:
        """Record a disagreement; raise it at once unless the run keeps going."""
        step = self.steps[self.index]
        n = self.index + 1
        lines = [
            f"Beam and a fresh check of the same disk state disagree: {what}",
            f"reproduce: {self.reproduce.format(steps=n)}",
            f"{self.origin}, step {n} of {len(self.steps)}: {step.describe()}",
            "steps so far:",
            *(f"  {i:3}. {s.describe()}" for i, s in enumerate(self.steps[:n], 1)),
            f"Beam's answer: {answer.show()}",
        ]
        if fresh is not None:
            lines += ["the fresh check:", fresh.show()]
        message = "\n".join(lines)
        self.problems.append(message)
        if not KEEP_GOING:
            raise Disagreement(message)

    def leaks(self, answer: Answer, declared: str | None = None) -> None:
        problem = leak_problem(answer, declared)
        if problem is not None:
            self.problem(problem, answer)

    def expect_success(self, answer: Answer) -> bool:
        if answer.error is not None:
            self.problem(f"{answer.op} failed unexpectedly ({answer.error.code})", answer)
            return False
        return True

    def judge(self, path: str, answer: Answer) -> None:
        """Hold a sync, refresh or save answer about `path` against the fresh check of the disk."""
        fresh = self.oracle.check(self.root)
        text = (self.root / path).read_text(encoding="utf-8")
        err = answer.error
        problem = None
        if err is None:
            assert answer.result is not None
            sync = answer.result["sync"] if answer.op == "save" else answer.result
            problem = verdict_problem(path, sync, fresh, text, self.lib)
        elif err.code == codes.SYNC_BARRIER_INCOMPLETE:
            pass  # stale or incomplete: always an acceptable answer
        elif answer.op == "save" and err.code == codes.SAVE_TRACE_STALE:
            pass  # an import needs rebuilding: Beam says the file's verdict is not to be trusted yet
        elif answer.op == "save" and err.code == codes.INVALID_PARAMS and err.data and "sync" in err.data:
            problem = verdict_problem(path, err.data["sync"], fresh, text, self.lib)  # refused: document errors
        else:
            problem = f"{answer.op} failed unexpectedly ({err.code})"
        if problem is not None:
            self.problem(problem, answer, fresh=fresh)

    async def step(self, step: truth.Step) -> None:
        """Carry out one step and check what Beam answered."""
        kind, path = step.kind, step.path
        if kind in (truth.EDIT, truth.REVERT):
            self.state[path] = step.choice
            truth.write_state(self.root, self.state)
            return
        if kind in (truth.SYNC, truth.REFRESH):
            answer = await self.call(kind, path=path, diagnostic_scope=step.scope, diagnostics_in_result=True)
            self.leaks(answer)
            self.judge(path, answer)
        elif kind == truth.SAVE:
            answer = await self.call("save", path=path, diagnostic_scope=step.scope)
            self.leaks(answer)
            self.judge(path, answer)
        elif kind in (truth.UPDATE, truth.CLOSE):
            answer = await self.call(kind, path=path)
            self.leaks(answer)
            self.expect_success(answer)
        elif kind == truth.SYMBOLS:
            answer = await self.call("workspace_symbols", query=step.query)
            self.leaks(answer)
            self.expect_success(answer)
        else:
            assert kind in (truth.PROBE, truth.REFERENCES), kind
            opened = await self.call("update", path=path)
            self.leaks(opened)
            if not self.expect_success(opened):
                return
            assert opened.result is not None
            at = {"path": path, "version": opened.result["version"], "line": step.line}
            if kind == truth.PROBE:
                answer = await self.call("run_at", **at, character=0, text=step.text)
                self.leaks(answer, declared=step.name)
                if answer.error is not None and answer.error.code != codes.SYNC_BARRIER_INCOMPLETE:
                    self.problem(f"run_at failed unexpectedly ({answer.error.code})", answer)
            else:
                answer = await self.call("references", **at, character=step.character, include_declaration=True)
                self.leaks(answer)
                self.expect_success(answer)

    async def run(self) -> None:
        for index, step in enumerate(self.steps):
            self.index = index
            await self.step(step)
        if self.problems:
            raise Disagreement(f"{len(self.problems)} disagreements:\n\n" + "\n\n".join(self.problems))


async def run_steps(
    toolchain: Toolchain, built: Path, tmp_path: Path, steps: list[truth.Step], origin: str, reproduce: str
) -> fresh_check.Oracle:
    """Run `steps` on a fresh copy of the built fixture; fail the test on a disagreement."""
    root = tmp_path / "truth"
    shutil.copytree(built, root, symlinks=True)
    oracle = fresh_check.Oracle(toolchain.lean, tmp_path / "oracle")
    # No timer decides anything during a run: edits reach Lean at once and no mirror is reaped for being idle.
    config = BrokerConfig(
        lean_cmd=toolchain.server_cmd(), env=toolchain.env(), change_delay=0, mirror_idle_seconds=3600
    )
    async with Broker.open(config) as broker:
        try:
            await Run(broker, root.resolve(), oracle, origin, reproduce, steps).run()
        except Disagreement as exc:
            pytest.fail(str(exc), pytrace=False)
    return oracle


@pytest.mark.lean
@pytest.mark.parametrize("run", range(len(SEEDS)), ids=[f"run{i}" for i in range(len(SEEDS))])
async def test_beam_never_reports_what_a_fresh_check_of_the_disk_does_not_say(
    run: int, lean_toolchain: Toolchain, built_truth: Path, tmp_path: Path
) -> None:
    seed = SEEDS[run]
    print(f"\ntruth run: BEAM_TRUTH_SEED={seed} BEAM_TRUTH_STEPS={STEPS}")
    reproduce = f"BEAM_TRUTH_SEED={seed} BEAM_TRUTH_STEPS={{steps}} pytest -m lean tests/broker/test_truth.py"
    steps = truth.plan(seed, STEPS)
    oracle = await run_steps(lean_toolchain, built_truth, tmp_path, steps, f"seed {seed}", reproduce)
    print(f"truth run: {STEPS} steps agree; the oracle compiled {oracle.runs} distinct disk states")


BASE, LEFT, RIGHT, TOP, TIP = (m.path for m in truth.MODULES)


def sync_step(path: str) -> truth.Step:
    return truth.Step(truth.SYNC, path, scope="all")


def save_step(path: str) -> truth.Step:
    return truth.Step(truth.SAVE, path)


SEQUENCES: dict[str, list[truth.Step]] = {
    # Each of these is a kind of disagreement the random run found on the broker of issue 19 (the lead's
    # reproduction is `stale-import-synced-again`). Why, briefly: Beam never compares an import's source with
    # what its build artifacts (the `.lake` oleans Lean loads) were made from, and it learns of a change only
    # from its own syncs and saves, or Lean's watchdog only from a didSave of a document it already had open.
    "stale-import-first-sync": [truth.edited(BASE, one="renamed"), sync_step(LEFT)],
    "stale-import-synced-again": [sync_step(TOP), truth.edited(BASE, one="renamed"), sync_step(TOP)],
    "stale-import-refresh": [truth.edited(BASE, one="renamed"), truth.Step(truth.REFRESH, LEFT)],
    "changed-import-first-seen-by-beam": [
        sync_step(TIP),
        truth.edited(LEFT, two="retyped"),
        sync_step(LEFT),  # Beam's first look at Left: its new text is the baseline, not a change
        sync_step(TIP),
    ],
    "saved-import-stale-middle-artifact": [truth.edited(LEFT, two="retyped"), save_step(LEFT), sync_step(TIP)],
    "errors-against-stale-imports": [
        truth.edited(TIP, five="broken"),
        truth.edited(TOP, extra="added"),
        sync_step(TIP),  # Tip's own error is reported; a fresh check cannot get past Tip's import of Top
    ],
    "probe-name-in-workspace-symbols": [
        truth.probe_step(TOP, "probeOnly1"),
        truth.Step(truth.SYMBOLS, query=truth.PROBE_PREFIX),
    ],
    "probe-mirror-in-references": [truth.probe_step(TOP, "probeOnly1"), truth.references_step(BASE, "baseTrue")],
    # Controls: Beam and the fresh check agree on these today, and must keep agreeing.
    "control-diamond-clash-after-saves": [
        truth.edited(LEFT, clash="added"),
        truth.edited(RIGHT, clash="added"),
        save_step(LEFT),
        save_step(RIGHT),
        sync_step(TOP),
    ],
    "control-open-import-changed-through-beam": [
        sync_step(LEFT),
        sync_step(TOP),
        truth.edited(LEFT, two="retyped"),
        sync_step(LEFT),
        sync_step(TOP),  # staleDirectDeps
    ],
    "control-transitive-import-changed-through-beam": [
        sync_step(LEFT),
        sync_step(TIP),
        truth.edited(LEFT, two="retyped"),
        sync_step(LEFT),
        sync_step(TIP),  # Lean's watchdog: "Imports are out of date"
    ],
    "control-saved-import-then-refresh": [
        sync_step(LEFT),
        sync_step(TOP),
        truth.edited(LEFT, two="retyped"),
        save_step(LEFT),
        truth.Step(truth.REFRESH, TOP),
    ],
    "control-leaf-error-after-wide-characters": [truth.edited(TIP, five="broken"), sync_step(TIP)],
}


@pytest.mark.lean
@pytest.mark.parametrize("name", list(SEQUENCES))
async def test_beam_agrees_with_the_fresh_check_on_each_known_sequence(
    name: str, lean_toolchain: Toolchain, built_truth: Path, tmp_path: Path
) -> None:
    reproduce = f"pytest -m lean tests/broker/test_truth.py -k {name}"
    await run_steps(lean_toolchain, built_truth, tmp_path, SEQUENCES[name], name, reproduce)


# ---- the oracle itself ----------------------------------------------------------------------------------
@pytest.mark.lean
def test_the_fresh_check_reports_an_error_where_lean_prints_it_and_fails_importers(
    lean_toolchain: Toolchain, tmp_path: Path
) -> None:
    # The importer sorts first: only compiling in import order gives it its import.
    base = "prelude\ninductive T where\n  | t\n\n/- \U0001d538\u00e9 -/ def broken : T := nope\n"
    files = {"P/Zeta.lean": base, "P/Alpha.lean": "prelude\nimport P.Zeta\n\ndef again : T := T.t\n"}
    oracle = fresh_check.Oracle(lean_toolchain.lean, tmp_path / "oracle")
    fresh = oracle.check_sources(files)
    assert fresh.order == ("P/Zeta.lean", "P/Alpha.lean")
    [error] = fresh.errors("P/Zeta.lean")
    # Line 5 (1-based); `nope` starts after 27 code points (28 UTF-16 units: the first character is outside the BMP).
    assert (error.line, error.column, error.text) == (5, 27, "Unknown identifier `nope`")
    assert fresh_check.lean_position(base, 4, 28) == (5, 27)
    [failed] = fresh.errors("P/Alpha.lean")
    assert (failed.line, failed.column) == (1, 0)
    assert failed.text == f"object file '{fresh_check.LIB_MARK}/P/Zeta.olean' of module P.Zeta does not exist"
    # The position is the one Lean prints without --json (there the text follows the error's name).
    src = tmp_path / "printed"
    (src / "P").mkdir(parents=True)
    (src / "P/Zeta.lean").write_text(base, encoding="utf-8")
    printed = subprocess.run(
        [str(lean_toolchain.lean), "P/Zeta.lean"], cwd=src, capture_output=True, text=True, encoding="utf-8"
    )
    assert printed.stdout.startswith("P/Zeta.lean:5:27: error(lean.unknownIdentifier): Unknown identifier `nope`")
    # The same sources again are answered from the cache; fixing the base fixes the importer.
    assert oracle.check_sources(dict(files)) is fresh and oracle.runs == 1
    fixed = oracle.check_sources({**files, "P/Zeta.lean": base.replace("nope", "T.t")})
    assert fixed.messages == {"P/Zeta.lean": (), "P/Alpha.lean": ()} and oracle.runs == 2


@pytest.mark.lean
def test_the_truth_fixture_builds_clean_and_each_edit_gives_what_it_is_meant_to(
    lean_toolchain: Toolchain, tmp_path: Path
) -> None:
    oracle = fresh_check.Oracle(lean_toolchain.lean, tmp_path / "oracle")
    fixture = truth.fixture_texts()
    assert all(not oracle.check_sources(fixture).messages[p] for p in fixture)
    state = truth.fixture_state()
    # A rename upstream: an unknown identifier in Left, and every importer of Left fails in a fresh check.
    state["Truth/Base.lean"] = (0, 0, 1, 0, 0)
    renamed = oracle.check_sources({p: truth.render(truth.BY_PATH[p], c) for p, c in state.items()})
    assert [m.text for m in renamed.errors("Truth/Left.lean")] == ["Unknown identifier `one`"]
    assert renamed.errors("Truth/Right.lean") == ()
    assert all(len(renamed.errors(p)) == 1 for p in ("Truth/Top.lean", "Truth/Tip.lean"))
    # The same theorem added on both sides of the diamond: the top fails to import both.
    state = truth.fixture_state()
    state["Truth/Left.lean"] = (0, 0, 0, 1)
    state["Truth/Right.lean"] = (0, 0, 0, 1)
    clash = oracle.check_sources({p: truth.render(truth.BY_PATH[p], c) for p, c in state.items()})
    assert clash.errors("Truth/Left.lean") == clash.errors("Truth/Right.lean") == ()
    [failed] = clash.errors("Truth/Top.lean")
    assert failed.text == "import Truth.Right failed, environment already contains 'clash' from Truth.Left"


# ---- fake lane: the pieces that need no Lean ----------------------------------------------------------------
def test_the_fixture_files_are_the_slots_first_variants() -> None:
    fixture = truth.fixture_texts()
    assert {p: truth.render(truth.BY_PATH[p], c) for p, c in truth.fixture_state().items()} == fixture


def test_a_plan_depends_on_the_seed_alone_and_a_shorter_plan_is_its_beginning() -> None:
    long = truth.plan(7, 60)
    assert truth.plan(7, 60) == long and truth.plan(7, 25) == long[:25]
    assert truth.plan(8, 60) != long
    kinds = {s.kind for seed in range(20) for s in truth.plan(seed, 60)}
    assert kinds == set(truth.WEIGHTS)
    names = [s.name for s in long if s.kind == truth.PROBE]
    assert len(set(names)) == len(names) and all(n.startswith(truth.PROBE_PREFIX) for n in names)


def test_positions_convert_from_utf16_to_code_points() -> None:
    text = "prelude\n/- \U0001d538\U0001d539 -/ def five := four\n"
    at = truth.name_position(text, "four")
    assert at == (1, 23)  # two surrogate pairs before it: 21 code points
    assert fresh_check.lean_position(text, *at) == (2, 21)
    assert fresh_check.lean_position(text, 1, 200) == (2, len(text.split("\n")[1]))
    assert truth.name_position(text, "fiv") is None


def _sync(items: list[tuple[int, int, str]], *, errors: int | None = None) -> dict[str, Any]:
    """A sync result with error items at LSP positions (their blocking diagnostics too, whole)."""
    diags: list[dict[str, Any]] = [
        {"severity": "error", "range": {"start": {"line": ln, "character": ch}}, "message": msg}
        for ln, ch, msg in items
    ]
    blocking = [{**d, "message": msg} for d, (_, _, msg) in zip(diags, items, strict=True)]
    count = len(diags) if errors is None else errors
    readiness = {"blocking_diagnostics": blocking}
    return {"diagnostics": {"counts": {"error": count}, "items": diags}, "readiness": readiness}


def test_a_verdict_agrees_only_with_the_same_messages_at_the_same_places(tmp_path: Path) -> None:
    text = "prelude\nimport Truth.Top\n\n/- \U0001d538\U0001d539 -/ def five : TNat := TNat.succ tipTrue\n"
    lib = tmp_path / truth.BUILD_LIB
    fresh = fresh_check.FreshCheck(
        "d",
        {
            "Tip.lean": (fresh_check.Message("error", 4, 38, "Unknown identifier `tipTrue`\nmore"),),
            "Top.lean": (
                fresh_check.Message("error", 1, 0, f"object file '{fresh_check.LIB_MARK}/Truth/Left.olean' missing"),
            ),
            "Left.lean": (),
        },
        ("Left.lean", "Top.lean", "Tip.lean"),
    )
    same = _sync([(3, 40, "Unknown identifier `tipTrue`\nmore")])
    assert verdict_problem("Tip.lean", same, fresh, text, lib) is None
    assert verdict_problem("Left.lean", _sync([]), fresh, "", lib) is None
    # Beam names its own olean directory where the oracle names its private one.
    missing = _sync([(0, 0, f"object file '{lib}/Truth/Left.olean' missing")])
    assert verdict_problem("Top.lean", missing, fresh, "", lib) is None
    # Clean where the fresh check has an error; the column in code points instead of UTF-16; another text.
    for path, sync in [
        ("Tip.lean", _sync([])),
        ("Tip.lean", _sync([(3, 38, "Unknown identifier `tipTrue`\nmore")])),
        ("Tip.lean", _sync([(3, 40, "Unknown identifier `four`")], errors=1)),
        ("Left.lean", _sync([(3, 40, "Unknown identifier `tipTrue`\nmore")])),
    ]:
        assert verdict_problem(path, sync, fresh, text, lib) is not None, sync


def test_only_the_probe_that_declared_a_name_may_show_it_and_no_answer_a_mirror() -> None:
    def answer(result: dict[str, Any]) -> Answer:
        return Answer("op", {}, result, None, ())

    assert leak_problem(answer({"messages": ["probeOnly1 ok"]}), "probeOnly1") is None
    assert leak_problem(answer({"messages": ["probeOnly12"]}), "probeOnly1") is not None
    assert leak_problem(answer({"result": [{"name": "probeOnly3"}]}), None) is not None
    assert leak_problem(answer({"result": [{"uri": "file:///p/Truth/Top_beamProbe1.lean"}]}), None) is not None
    failed = Answer("op", {}, None, BrokerError("x", "barrier", {"uri": "file:///p/A_beamProbe2.lean"}), ())
    assert leak_problem(failed, None) is not None
    streamed = Answer("op", {}, {}, None, ({"event": "DiagnosticEvent", "item": {"message": "probeOnly4"}},))
    assert leak_problem(streamed, None) is not None
