"""Probe mirror pools: checkout, limits, idle closing, private URIs (a recording stand-in for the Lean client)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from beam_broker import _mirrors as mirrors
from beam_broker._mirrors import FOLLOW_CHARS, SPLIT_CHARS, MirrorPool, is_mirror_path

pytestmark = pytest.mark.anyio
SOURCE = "file:///w/Demo/A.b.lean"


@dataclasses.dataclass
class Recorder:
    """Records what the pool asks of a Lean client (closing mirrors and forgetting their diagnostics)."""

    exited: object = None
    closed: list[str] = dataclasses.field(default_factory=list)
    forgotten: list[str] = dataclasses.field(default_factory=list)
    sent: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    fatal: bool = False

    async def close(self, uri: str) -> None:
        self.closed.append(uri)

    async def open(self, uri: str, text: str) -> int:
        self.sent.append(("open", uri, text))
        return len(self.sent)

    async def change(self, uri: str, text: str, *, save: bool = True) -> int:
        assert save is False, "a mirror is never saved"
        self.sent.append(("change", uri, text))
        return len(self.sent)

    @property
    def cache(self) -> Recorder:
        return self

    def forget(self, uri: str) -> None:
        self.forgotten.append(uri)

    def document_progress(self, uri: str) -> Any:
        return self


def client(recorder: Recorder) -> Any:
    return cast(Any, recorder)


def test_mirror_uris_sit_beside_the_source_and_are_recognized() -> None:
    pool = MirrorPool(SOURCE, 2)
    assert pool.mirror_uri(1) == "file:///w/Demo/A_b_beamProbe1.lean"
    assert is_mirror_path(pool.mirror_uri(3)) and is_mirror_path("/w/Demo/A_beamProbe12.lean")
    assert not is_mirror_path("/w/Demo/A.lean")


async def test_concurrent_checkouts_use_up_to_the_limit_then_queue() -> None:
    pool = MirrorPool(SOURCE, 2)
    held: list[str] = []
    release = anyio.Event()
    third = anyio.Event()

    async def probe(label: str, done: anyio.Event | None = None) -> None:
        async with pool.checkout() as mirror:
            held.append(f"{label}:{mirror.uri.rsplit('_', 1)[-1]}")
            if done is not None:
                done.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(probe, "a")
        tg.start_soon(probe, "b")
        await anyio.wait_all_tasks_blocked()
        assert held == ["a:beamProbe1.lean", "b:beamProbe2.lean"]
        tg.start_soon(probe, "c", third)
        await anyio.wait_all_tasks_blocked()
        assert len(held) == 2 and sum(m.waiting for m in pool.mirrors) == 1  # queued on a busy mirror
        release.set()
        with anyio.fail_after(5):
            await third.wait()
    assert len(pool.mirrors) == 2 and all(m.idle for m in pool.mirrors)


async def test_idle_mirrors_close_and_their_uris_are_never_reused() -> None:
    pool = MirrorPool(SOURCE, 2)
    recorder = Recorder()
    async with pool.checkout() as first:
        first.opened = True
    async with pool.checkout() as again:
        assert again is first
    await pool.close_idle(client(recorder), idle_seconds=3600)
    assert pool.mirrors == [first] and recorder.closed == []
    await pool.close_idle(client(recorder), idle_seconds=0)
    assert pool.mirrors == [] and recorder.closed == recorder.forgotten == [first.uri]
    async with pool.checkout() as fresh:
        assert fresh.uri != first.uri and fresh.uri.endswith("_beamProbe2.lean")


async def test_busy_mirrors_are_not_closed_and_unopened_ones_need_no_lean() -> None:
    pool = MirrorPool(SOURCE, 1)
    recorder = Recorder()
    async with pool.checkout():
        await pool.close_idle(client(recorder), idle_seconds=0)
        assert len(pool.mirrors) == 1
    await pool.close_idle(client(recorder), idle_seconds=0)
    assert pool.mirrors == [] and recorder.closed == []  # never opened in Lean: nothing to close there


async def test_closing_all_mirrors_skips_a_dead_client() -> None:
    pool = MirrorPool(SOURCE, 2)
    async with pool.checkout() as mirror:
        mirror.opened = True
    dead = Recorder(exited=object())
    await pool.close_all(client(dead))
    assert pool.mirrors == [] and dead.closed == []
    await pool.close_all(None)


HEAD = "prelude\nimport Demo.Basic\n"
BODY = "".join(f"\ntheorem t{i} (p : Prop) (hp : p) : p := hp\n" for i in range(400))


async def test_a_mirror_opens_once_then_changes_and_sends_nothing_for_the_text_it_holds() -> None:
    pool = MirrorPool(SOURCE, 2)
    lean = Recorder()
    async with pool.checkout() as mirror:
        assert await mirrors.write(client(lean), mirror, HEAD + "def a := 1\n") == (1, False)  # opened: new header
        assert await mirrors.write(client(lean), mirror, HEAD + "def a := 2\n") == (2, True)  # same header
        await mirrors.show(client(lean), mirror, HEAD + "def a := 2\n")
        assert len(lean.sent) == 2
        assert await mirrors.write(client(lean), mirror, "prelude\nimport Demo.Other\ndef a := 2\n") == (3, False)
        lean.fatal = True  # its worker failed: the same text is sent again (a change restarts the worker)
        await mirrors.show(client(lean), mirror, "prelude\nimport Demo.Other\ndef a := 2\n")
    assert [kind for kind, _, _ in lean.sent] == ["open", "change", "change", "change"]


async def test_a_probe_takes_the_idle_mirror_lean_has_most_of_already_elaborated() -> None:
    pool = MirrorPool(SOURCE, 2)
    lean = Recorder()
    top, end = HEAD + "def a := 1\n", HEAD + BODY + "def z := 1\n"
    async with pool.checkout(top) as first:
        await mirrors.write(client(lean), first, top + "#check a\n")
    async with pool.checkout(end) as second:  # far from the first one's text: a mirror of its own
        assert second is not first
        await mirrors.write(client(lean), second, end + "#check z\n")
    async with pool.checkout(top) as again:
        assert again is first
    async with pool.checkout(end) as again:
        assert again is second
    edited = HEAD + "def a := 2\n"  # an edit at the top: both mirrors share only the header with it
    async with pool.checkout(edited) as chosen:
        assert chosen is first, "the mirror whose text is closest, not the long one"
    async with pool.checkout(edited.replace("def a := 2\n", "def a := 2\n" + BODY)) as chosen:
        assert chosen is second
    assert len(BODY) > SPLIT_CHARS


async def test_a_probe_near_the_mirror_s_text_reuses_it_even_when_the_pool_has_room() -> None:
    pool = MirrorPool(SOURCE, 2)
    lean = Recorder()
    async with pool.checkout(HEAD + BODY) as first:
        await mirrors.write(client(lean), first, HEAD + BODY)
    async with pool.checkout(HEAD + BODY + "theorem more : True := trivial\n") as again:
        assert again is first and len(pool.mirrors) == 1


OLD = HEAD + "def a := 1\n\ndef b := 2\n\ndef c := 3\n"
HELD = HEAD + "def a := 1\n\n#check b_probe\n"  # a probe after `def a`: the source's beginning, then the probe


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (OLD.replace("a := 1", "a := 10"), HEAD + "def a := 10\n\n#check b_probe\n"),  # inside the copy
        (OLD.replace("def a", "def z := 0\n\ndef a"), HEAD + "def z := 0\n\ndef a := 1\n\n#check b_probe\n"),
        (OLD.replace("c := 3", "c := 4"), None),  # after the copy: the mirror is right as it is
        (OLD.replace("def b", "def bb"), None),  # reaches past the copy (the probe's place): the probe decides
        (OLD, None),
    ],
)
def test_a_mirror_follows_a_source_edit_inside_its_copy_of_the_source(new: str, expected: str | None) -> None:
    assert mirrors.followed(HELD, OLD, new) == expected


def test_an_edit_lean_would_elaborate_long_again_or_walk_a_long_copy_for_is_not_followed() -> None:
    body = "".join(f"def d{i} := {i}\n" for i in range(SPLIT_CHARS // 10))
    old = HEAD + "def a := 1\n" + body
    held = old + "#check probe\n"
    assert mirrors.followed(held, old, old.replace("a := 1", "a := 2")) is None  # all of `body` again
    assert mirrors.followed(held, old, old.replace("d1 :=", "d1' :=")) is None
    last = f"def d{SPLIT_CHARS // 10 - 1}"
    assert mirrors.followed(held, old, old.replace(last, last + "x")) == old.replace(last, last + "x") + (
        "#check probe\n"
    )
    long_old = HEAD + "".join(f"def e{i} := {i}\n" for i in range(FOLLOW_CHARS // 10))
    long_held = long_old + "#check probe\n"  # a probe at the end of a long file: every version walks it all
    assert len(long_old) > FOLLOW_CHARS
    assert mirrors.followed(long_held, long_old, long_old[:-2] + "7\n") is None


@given(
    prefix=st.text(alphabet="ab\n", max_size=30),
    probe=st.text(alphabet="xy\n", min_size=1, max_size=10),
    rest=st.text(alphabet="ab\n", max_size=30),
    cut=st.integers(min_value=0, max_value=60),
    width=st.integers(min_value=0, max_value=5),
    inserted=st.text(alphabet="abc\n", max_size=5),
)
def test_following_an_edit_is_applying_it_to_the_mirror_s_copy(
    prefix: str, probe: str, rest: str, cut: int, width: int, inserted: str
) -> None:
    old = HEAD + prefix + rest
    held = HEAD + prefix + probe
    cut = min(cut, len(old))
    new = old[:cut] + inserted + old[cut + width :]
    got = mirrors.followed(held, old, new)
    copied = mirrors._shared(held, old)
    delta = len(new) - len(old)
    if got is not None:  # the mirror's copy, edited; the source after the copy unchanged; the probe untouched
        assert got == new[: copied + delta] + held[copied:]
        assert old[copied:] == new[copied + delta :] and got != held
    if "c" in inserted and cut + inserted.index("c") < copied and cut + width <= copied and new != old:
        assert got == held[:cut] + inserted + held[cut + width :]  # an edit that is surely inside: followed


async def test_follow_changes_the_mirror_probed_last_when_idle_and_the_header_stays() -> None:
    pool = MirrorPool(SOURCE, 3)
    lean = Recorder()
    assert await mirrors.follow(client(lean), pool, OLD, OLD.replace("1", "2")) is False  # no mirror yet
    async with pool.checkout() as early, pool.checkout() as other, pool.checkout() as late:  # three mirrors
        for mirror in (early, other, late):
            await mirrors.write(client(lean), mirror, HELD)
    late.last_used = max(early.last_used, other.last_used) + 1  # probed last
    new = OLD.replace("a := 1", "a := 10")
    assert await mirrors.follow(client(lean), pool, OLD, new) is True
    assert late.text == HEAD + "def a := 10\n\n#check b_probe\n" and lean.sent[-1] == ("change", late.uri, late.text)
    assert early.text == HELD and other.text == HELD  # only the one probed last
    async with pool.checkout(late.text):  # busy: left to its probe
        assert await mirrors.follow(client(lean), pool, new, OLD) is False
    sent = len(lean.sent)
    other_header = new.replace(HEAD, "prelude\nimport Demo.Other\n")
    assert await mirrors.follow(client(lean), pool, new, other_header) is False  # a new header: the next probe's
    assert len(lean.sent) == sent


async def test_a_delayed_follow_gives_way_to_a_probe_that_wrote_the_mirror_meanwhile() -> None:
    # update -> follow waits; a probe sent meanwhile owns what the mirror holds (it sent its own text, which
    # `followed` could still take for a copy of the old source), and the follow sends nothing. Without a probe,
    # the follow applies the edit once the delay has passed.
    pool = MirrorPool(SOURCE, 1)
    lean = Recorder()
    async with pool.checkout() as mirror:
        await mirrors.write(client(lean), mirror, HELD)
    new = OLD.replace("a := 1", "a := 10")
    probed = HEAD + "def a := 1\n\n#check other_probe\n"
    assert mirrors.followed(probed, OLD, new) is not None
    async with anyio.create_task_group() as tg:
        done: list[bool] = []

        async def follow() -> None:
            done.append(await mirrors.follow(client(lean), pool, OLD, new, delay=0.05))

        tg.start_soon(follow)
        await anyio.sleep(0.01)
        async with pool.checkout(probed) as m:
            await mirrors.write(client(lean), m, probed)
    assert done == [False] and mirror.text == probed and lean.sent[-1] == ("change", mirror.uri, probed)
    with anyio.fail_after(5):
        sent = len(lean.sent)
        assert await mirrors.follow(client(lean), pool, OLD, new, delay=0.01) is True
    assert mirror.text == HEAD + "def a := 10\n\n#check other_probe\n" and len(lean.sent) == sent + 1


async def test_a_mirror_holding_only_a_copy_of_the_source_follows_without_the_delay() -> None:
    # A goals/hover mirror: the followed text is what the next question there needs, so nothing waits.
    pool = MirrorPool(SOURCE, 1)
    lean = Recorder()
    copy = HEAD + "def a := 1\n"
    async with pool.checkout() as mirror:
        await mirrors.write(client(lean), mirror, copy)
    new = OLD.replace("a := 1", "a := 10")
    with anyio.fail_after(5):
        assert await mirrors.follow(client(lean), pool, OLD, new, delay=60) is True
    assert mirror.text == HEAD + "def a := 10\n" and lean.sent[-1] == ("change", mirror.uri, mirror.text)
