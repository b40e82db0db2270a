"""Mirrors are invisible on real Lean: after probes, no answer, event or CLI output names a probe mirror.

Lean's watchdog indexes every open document, mirrors included: without the broker's filter, workspace symbols
found `probeOnly` (a theorem run only in a probe) in `Demo/Proofs_beamProbe1.lean`, a file that does not exist,
references listed hits there, and a probe's private names carried the mirror's URI. Every registry operation is
called here (`tests/support/every_operation.py`), its answer and every event it streams checked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig, BrokerError, CallContext
from beam_lsp import path_to_uri
from tests.support.every_operation import (
    CALLS,
    END,
    PRIVATE,
    PROBE_ONLY,
    PROBES,
    PROOFS,
    REFUSED,
    Demo,
    write_files,
)
from tests.support.toolchain import Toolchain

from .support import TIMEOUT, Cli

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

MARK = "_beamProbe"


@pytest.fixture
async def broker(lean_toolchain: Toolchain) -> AsyncIterator[Broker]:
    """A broker on real Lean whose mirrors stay open for the whole test (they close after 120 s idle)."""
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), mirror_idle_seconds=3600)
    async with Broker.open(config) as b:
        yield b


def dump(value: Any) -> str:
    return json.dumps(value, default=repr, ensure_ascii=False)


async def test_a_theorem_that_exists_only_in_a_probe_is_found_nowhere(broker: Broker, demo_root: Path) -> None:
    ws = {"root": str(demo_root)}
    with anyio.fail_after(TIMEOUT):
        version = (await broker.call("sync", {"workspace": ws, "path": PROOFS}))["version"]
        at = {"workspace": ws, "path": PROOFS, "version": version}
        probed = await broker.call("run_at", {**at, "line": END, "character": 0, "text": PROBE_ONLY})
        only = await broker.call("workspace_symbols", {"workspace": ws, "query": "probeOnly"})
        copied = await broker.call("workspace_symbols", {"workspace": ws, "query": "byTerm"})
        refs = await broker.call("references", {**at, "line": 3, "character": 29})
    assert probed["success"] is True
    assert only["result"] == [], "probeOnly exists only in a probe"
    assert [s["location"]["uri"] for s in copied["result"] if s["name"] == "byTerm"] == [
        path_to_uri(demo_root / PROOFS)
    ]
    uris = {ref["uri"] for ref in refs["result"]}
    assert uris == {path_to_uri(demo_root / PROOFS), path_to_uri(demo_root / "Demo/Basic.lean")}


async def test_after_probes_no_answer_or_event_of_any_operation_names_a_mirror(broker: Broker, demo_root: Path) -> None:
    write_files(demo_root)
    ws = {"root": str(demo_root)}
    demo = Demo()
    leaks: list[str] = []
    answers: dict[str, list[dict[str, Any]]] = {}

    async def call(name: str, arguments: dict[str, Any]) -> None:
        events: list[Any] = []
        with anyio.fail_after(TIMEOUT):
            try:
                answer = await broker.call(name, {"workspace": ws, **arguments}, CallContext(emit=events.append))
            except BrokerError as exc:
                if name not in REFUSED:
                    raise
                answer = {"code": exc.code, "message": exc.message, "data": exc.data}
        demo.note(name, arguments, answer)
        answers.setdefault(name, []).append(answer)
        leaks.extend(f"{name}: {what}" for what in (dump(answer), dump(events)) if MARK in what)

    for name, arguments in PROBES:
        await call(name, arguments(demo))
    for name, arguments in CALLS.items():
        if name == "drop_workspace":  # what the broker reports about an open workspace, before it goes
            snapshot = await broker.runtime_snapshot(str(demo_root))
            resources = [broker.diagnostics(path) for path in broker.open_documents()]
            leaks.extend(what for what in (dump(broker.stats()), dump(snapshot), dump(resources)) if MARK in what)
        await call(name, arguments(demo))
    assert leaks == []
    # The calls reached what used to leak: Lean's private names (module-qualified), references, probes' handles.
    assert "_private.Demo.Proofs.0.q" in dump(answers["run_at"]) and "_private._beamScratch.0.q" in dump(
        answers["run_code"]
    )
    assert answers["references"][0]["result"] and answers["run_with_linear"][0]["success"] is True
    assert [a["success"] for a in answers["attempts"][-1]["attempts"]] == [True, True]
    symbols = answers["workspace_symbols"][0]["result"]
    assert [s["location"]["uri"] for s in symbols if s["name"] == "byTerm"] == [path_to_uri(demo_root / PROOFS)]


def test_the_cli_references_and_workspace_symbols_name_no_mirror_after_a_probe(lean_cli: Cli) -> None:
    started = lean_cli("daemon", "start")  # one Lean session for every command, as an agent's shell has
    assert started.code == 0, started.stderr
    try:
        probed = lean_cli("run-at", f"{PROOFS}:{END + 1}:0", "--text", PROBE_ONLY)
        assert probed.code == 0 and probed.json["success"] is True, probed.stderr
        outputs = [
            lean_cli("references", f"{PROOFS}:4:29"),
            lean_cli("--human", "references", f"{PROOFS}:4:29"),
            lean_cli("workspace-symbols", "--query", "probeOnly"),
            lean_cli("workspace-symbols", "--query", "byTerm"),
            lean_cli("--human", "workspace-symbols", "--query", "byTerm"),
            lean_cli("run-at", f"{PROOFS}:{END + 1}:0", "--text", PRIVATE),
        ]
    finally:
        lean_cli("daemon", "stop")
    assert all(out.code == 0 for out in outputs), [out.stderr for out in outputs]
    assert [out for out in outputs if MARK in out.stdout + out.stderr] == []
    assert outputs[2].json["result"] == [] and "Demo/Proofs.lean" in outputs[4].stdout
