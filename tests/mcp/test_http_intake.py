"""The intake of request bodies (`beam_mcp._http.intake`): a bounded pool, its deadline, eviction of the oldest."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from beam_mcp._http.intake import Intake, Slot

pytestmark = pytest.mark.anyio

TIMEOUT = 20


async def hold(intake: Intake, slots: list[Slot], *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """Take a slot and stay in it until evicted or cancelled; `slots` records it."""
    with intake.slot() as slot:
        slots.append(slot)
        task_status.started()
        await anyio.sleep_forever()


async def test_bodies_up_to_the_limit_are_received_side_by_side() -> None:
    intake = Intake(3, deadline=TIMEOUT)
    slots: list[Slot] = []
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            await tg.start(hold, intake, slots)
        assert intake.receiving == 3 and intake.evictions == 0
        assert not any(slot.evicted or slot.scope.cancel_called for slot in slots)
        tg.cancel_scope.cancel()
    assert intake.receiving == 0


async def test_one_more_body_evicts_the_one_arriving_longest() -> None:
    intake = Intake(2, deadline=TIMEOUT)
    slots: list[Slot] = []
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            await tg.start(hold, intake, slots)
        assert [slot.evicted for slot in slots] == [True, False, False] and slots[0].scope.cancel_called
        assert intake.receiving == 2 and intake.evictions == 1
        with intake.slot() as fourth:  # a body that arrives at once still takes (and frees) a slot
            assert [slot.evicted for slot in slots] == [True, True, False]
        assert not fourth.evicted and not fourth.scope.cancelled_caught
        assert intake.receiving == 1 and intake.evictions == 2
        tg.cancel_scope.cancel()


async def test_a_slot_is_cancelled_at_its_deadline_without_being_evicted() -> None:
    intake = Intake(1, deadline=0.01)
    with anyio.fail_after(TIMEOUT), intake.slot() as slot:
        await anyio.sleep_forever()
    assert slot.scope.cancelled_caught and not slot.evicted and intake.receiving == 0


async def test_a_limit_below_one_still_receives_one_body_at_a_time() -> None:
    intake = Intake(0, deadline=TIMEOUT)
    assert intake.limit == 1
    with intake.slot() as outer, intake.slot() as inner:
        assert outer.evicted and not inner.evicted
    assert intake.receiving == 0
