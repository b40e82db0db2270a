"""Admission control on the fake Lean: bounded calls per workspace and in all, two lanes, `busy`, draining.

A call is held in flight with a `LeanGate` on its project (the fake Lean server holds its Lean work until the gate
opens), so the tests know exactly what is running without sleeping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from beam_broker import Broker, BrokerError
from beam_broker import errors as codes
from beam_broker._serve.admission import Admission
from beam_broker.config import BrokerConfig
from tests.support.fixtures import LeanGate, fake_broker

from .support import TIMEOUT, call, error_of, fake_project

pytestmark = pytest.mark.anyio

WAIT = 0.2
"""The admission wait of these brokers: a call without a slot fails `busy` this soon."""


async def _sync(broker: Broker, root: Path, done: list[dict[str, Any]]) -> None:
    done.append(await call(broker, "sync", root, path="A.lean"))


def projects(tmp_path: Path, *names: str) -> list[Path]:
    return [fake_project(tmp_path / name, {"A.lean": "theorem a : True := trivial\n"}) for name in names]


async def test_a_heavy_call_past_the_workspace_limit_fails_busy_and_a_cheap_call_still_runs(tmp_path: Path) -> None:
    a, b = projects(tmp_path, "a", "b")
    async with fake_broker(max_workspace_heavy_calls=1, admission_wait=WAIT) as broker:
        await call(broker, "sync", b, path="A.lean")
        done: list[dict[str, Any]] = []
        async with LeanGate.install(a) as gate, anyio.create_task_group() as tg:
            tg.start_soon(_sync, broker, a, done)
            with anyio.fail_after(TIMEOUT):
                await gate.reached()
            assert broker.admission.lanes["heavy"].in_flight == 1
            err = await error_of(broker, "sync", a, path="A.lean")
            assert err.code == codes.BUSY
            assert err.data is not None
            assert err.data["scope"] == "workspace" and err.data["lane"] == "heavy" and err.data["limit"] == 1
            assert err.data["reason"] == "busy" and err.data["retryAfterMs"] >= 100
            # another workspace's heavy call has a slot of its own workspace
            assert (await call(broker, "sync", b, path="A.lean"))["version"] == 1
            gate.open()
        assert done and done[0]["version"] == 1
        assert broker.admission.rejected == {"busy": 1}


async def test_queued_heavy_calls_never_take_the_slots_of_cheap_calls(tmp_path: Path) -> None:
    a, b = projects(tmp_path, "a", "b")
    async with fake_broker(max_heavy_calls=1, max_calls=1, admission_wait=WAIT) as broker:
        synced = await call(broker, "sync", b, path="A.lean")
        done: list[dict[str, Any]] = []
        async with LeanGate.install(a) as gate, anyio.create_task_group() as tg:
            tg.start_soon(_sync, broker, a, done)
            with anyio.fail_after(TIMEOUT):
                await gate.reached()
            err = await error_of(broker, "save", b, path="A.lean")  # the one heavy slot of the server is taken
            assert err.code == codes.BUSY and err.data is not None and err.data["scope"] == "global"
            # the one cheap slot is free: a hover answers while the heavy lane is full
            hover = await call(broker, "hover", b, path="A.lean", version=synced["version"], line=0, character=8)
            assert hover["workspace"] == {"root": str(b)}
            gate.open()
        assert len(done) == 1


async def test_a_draining_broker_refuses_new_calls_at_once_and_lets_admitted_ones_finish(tmp_path: Path) -> None:
    (a,) = projects(tmp_path, "a")
    async with fake_broker() as broker:
        done: list[dict[str, Any]] = []
        async with LeanGate.install(a) as gate, anyio.create_task_group() as tg:
            tg.start_soon(_sync, broker, a, done)
            with anyio.fail_after(TIMEOUT):
                await gate.reached()
            broker.drain()
            assert broker.in_flight == 1
            err = await error_of(broker, "hover", a, path="A.lean", version=1, line=0, character=8)
            assert err.code == codes.BUSY and err.data is not None and err.data["reason"] == "draining"
            gate.open()
        assert done and done[0]["version"] == 1
        assert broker.in_flight == 0
        assert broker.status()["rejections"] == {"draining": 1}


async def test_every_call_is_reported_to_call_listeners_refused_ones_included(tmp_path: Path) -> None:
    (a,) = projects(tmp_path, "a")
    seen: list[tuple[str, str]] = []
    async with fake_broker() as broker:
        broker.add_call_listener(lambda tool, outcome, seconds: seen.append((tool, outcome)))
        await call(broker, "sync", a, path="A.lean")
        await error_of(broker, "hover", a, path="A.lean", version=7, line=0, character=0)
        broker.drain()
        await error_of(broker, "sync", a, path="A.lean")
    assert seen == [("lean_sync", "success"), ("lean_hover", "contentModified"), ("lean_sync", "busy")]


async def test_a_waiting_call_gets_the_first_slot_that_comes_free() -> None:
    admission = Admission(BrokerConfig(max_workspace_calls=1, admission_wait=60))
    order: list[str] = []
    release = anyio.Event()

    async def first() -> None:
        async with admission.admit("k", "/k", "cheap"):
            order.append("first")
            await release.wait()

    async def second() -> None:
        async with admission.admit("k", "/k", "cheap"):
            order.append("second")

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            while not order:
                await anyio.lowlevel.checkpoint()
            tg.start_soon(second)
            while admission.lanes["cheap"].waiting == 0:
                await anyio.lowlevel.checkpoint()
            assert admission.counts("k").in_flight == 1 and admission.counts("k").waiting == 1
            release.set()
    assert order == ["first", "second"]
    assert admission.by_workspace == {}  # nothing is kept for a workspace without calls


async def test_a_call_cancelled_while_it_waits_gives_its_place_back() -> None:
    admission = Admission(BrokerConfig(max_calls=1, admission_wait=60))
    release = anyio.Event()

    async def holder() -> None:
        async with admission.admit("a", "/a", "cheap"):
            await release.wait()

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            while admission.lanes["cheap"].in_flight == 0:
                await anyio.lowlevel.checkpoint()
            with anyio.move_on_after(0.05):
                async with admission.admit("b", "/b", "cheap"):
                    raise AssertionError("admitted without a slot")
            assert admission.lanes["cheap"].waiting == 0
            release.set()
        async with admission.admit("b", "/b", "cheap"):
            assert admission.lanes["cheap"].in_flight == 1
    with pytest.raises(BrokerError):
        admission.draining = True
        async with admission.admit("b", "/b", "heavy"):
            pass


async def test_a_call_cancelled_while_it_waits_leaves_nothing_kept_for_its_workspace() -> None:
    """The table of per-workspace slots does not grow with every root whose only call was cancelled waiting."""
    admission = Admission(BrokerConfig(max_calls=1, admission_wait=60))
    release = anyio.Event()

    async def holder() -> None:
        async with admission.admit("a", "/a", "cheap"):
            await release.wait()

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            while admission.lanes["cheap"].in_flight == 0:
                await anyio.lowlevel.checkpoint()
            with anyio.CancelScope() as scope:
                tg.start_soon(_cancel_when_waiting, admission, scope)
                async with admission.admit("b", "/b", "cheap"):  # waits for the global slot "a" holds
                    raise AssertionError("admitted without a slot")
            assert scope.cancelled_caught
            assert ("cheap", "b") not in admission.by_workspace
            release.set()
    assert admission.by_workspace == {}


async def _cancel_when_waiting(admission: Admission, scope: anyio.CancelScope) -> None:
    while admission.lanes["cheap"].waiting == 0:
        await anyio.lowlevel.checkpoint()
    scope.cancel()
