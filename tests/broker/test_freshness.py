"""Freshness of imports, without Lean: sources on disk, `.olean` files and what Lake says, against a worker's view."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from beam_broker._documents import read_source, text_hash
from beam_broker._freshness import Freshness, Stale, _stat
from beam_broker._lake import Layout

pytestmark = pytest.mark.anyio

CHAIN = {
    "P/Base.lean": "prelude\ndef one := 1\n",
    "P/Mid.lean": "prelude\nimport P.Base\ndef two := one\n",
    "P/Top.lean": "prelude\nimport P.Mid\nimport Outside.Lib\ndef three := two\n",
}


class Lake:
    """A scripted `lake build --no-build`: what it is asked, and an answer per module (0 unless set)."""

    def __init__(self, answers: dict[str, int | None] | None = None) -> None:
        self.asked: list[list[str]] = []
        self.answers = answers or {}

    async def __call__(self, modules: list[str]) -> int | None:
        self.asked.append(modules)
        codes = [self.answers.get(m, 0) for m in modules]
        if None in codes:
            return None
        return max(c for c in codes if c is not None)


def project(root: Path, files: dict[str, str] = CHAIN) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel in files:
        build(root, rel.removesuffix(".lean").replace("/", "."))
    return root


def olean_path(root: Path, module: str) -> Path:
    """Where Lake's default layout puts the module's `.olean`."""
    return Layout.default(root).olean_path(module)


def build(root: Path, module: str) -> None:
    """A new `.olean` for the module (what a Lake build leaves)."""
    olean = olean_path(root, module)
    olean.parent.mkdir(parents=True, exist_ok=True)
    olean.write_bytes(os.urandom(16))


def make(root: Path, lake: Lake) -> Freshness:
    return Freshness(str(root), lambda p: p.relative_to(root).as_posix(), lake, max_source_bytes=1 << 20)


def names(stale: list[Stale]) -> list[tuple[str, bool, bool]]:
    return [(s.module, s.needs_save, s.direct) for s in stale]


def age(root: Path) -> None:
    """Date every source back a minute: a file read later is not racy (as sources are, most of the time)."""
    past = time.time_ns() - 60 * 10**9
    for path in root.rglob("*.lean"):
        os.utime(path, ns=(past, past))


async def test_the_closure_lists_workspace_imports_after_their_own_imports(tmp_path: Path) -> None:
    fresh = make(project(tmp_path), Lake())
    nodes = await fresh.closure(("P.Top",))
    assert [(n.name, n.imports) for n in nodes] == [("P.Base", ()), ("P.Mid", ("P.Base",)), ("P.Top", ("P.Mid",))]


async def test_lake_is_asked_once_about_what_beam_does_not_know_and_a_clean_answer_is_kept(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    lake = Lake()
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Mid",))
    assert await fresh.stale(("P.Mid",), loaded, {}) == []
    assert await fresh.stale(("P.Mid",), loaded, {}) == []
    assert lake.asked == [["P.Base", "P.Mid"]]


async def test_an_import_edited_on_disk_is_stale_and_so_is_every_module_over_it(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    lake = Lake()
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Top",))
    assert await fresh.stale(("P.Top",), loaded, {}) == []
    (root / "P/Base.lean").write_text("prelude\ndef one := 2\n")  # same size: only the content differs
    stale = await fresh.stale(("P.Top",), loaded, {})
    assert names(stale) == [("P.Base", True, False), ("P.Mid", True, False), ("P.Top", True, True)]
    assert stale[0].wire() == {
        "module": "P.Base",
        "path": "P/Base.lean",
        "needsSave": True,
        "direct": False,
    }
    assert len(lake.asked) == 1  # what Beam recorded answers: Lake is not asked again


async def test_a_file_edited_back_to_what_was_built_is_current_again_whatever_its_time(tmp_path: Path) -> None:
    root = project(tmp_path)
    fresh = make(root, Lake())
    loaded = await fresh.loading(("P.Mid",))
    assert await fresh.stale(("P.Mid",), loaded, {}) == []
    original = (root / "P/Base.lean").read_text()
    (root / "P/Base.lean").write_text("prelude\ndef one := 3\n")
    assert names(await fresh.stale(("P.Mid",), loaded, {})) == [("P.Base", True, False), ("P.Mid", True, True)]
    (root / "P/Base.lean").write_text(original)  # a new mtime and ctime, the built content
    assert await fresh.stale(("P.Mid",), loaded, {}) == []


async def test_artifacts_rebuilt_after_a_worker_loaded_them_need_a_refresh_not_a_save(tmp_path: Path) -> None:
    root = project(tmp_path)
    lake = Lake()
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Mid",))
    assert await fresh.stale(("P.Mid",), loaded, {}) == []
    build(root, "P.Base")  # rebuilt by someone (Lake says it is built from its source)
    stale = await fresh.stale(("P.Mid",), loaded, {})
    assert names(stale) == [("P.Base", False, False), ("P.Mid", True, True)]  # Mid was built over the old Base
    assert lake.asked[-1] == ["P.Base"]  # the record was about the old .olean: Lake is asked about the new one
    assert fresh.outdated(loaded, ("P.Mid",))
    assert not fresh.outdated(await fresh.loading(("P.Mid",)), ("P.Mid",))


async def test_a_worker_that_started_while_imports_were_rebuilt_is_not_trusted(tmp_path: Path) -> None:
    root = project(tmp_path)
    fresh = make(root, Lake())
    loaded = await fresh.loading(("P.Base",))
    build(root, "P.Base")  # between didOpen and the first barrier: which one did the worker load?
    assert names(await fresh.stale(("P.Base",), loaded, {}, settle=True)) == [("P.Base", False, True)]
    again = await fresh.loading(("P.Base",))
    build(root, "P.Base")
    # Lake's setup for that worker built it (its setup lines said so): the worker loaded what was there then.
    at_setup = fresh.on_disk(again)
    assert await fresh.stale(("P.Base",), again, {}, settle=True, rebuilt_at_setup=at_setup) == []
    assert again.confirmed
    late = await fresh.loading(("P.Base",))
    build(root, "P.Base")
    at_setup = fresh.on_disk(late)
    build(root, "P.Base")  # another build while the worker elaborated: not what it loaded
    stale = await fresh.stale(("P.Base",), late, {}, settle=True, rebuilt_at_setup=at_setup)
    assert names(stale) == [("P.Base", False, True)]


async def test_when_lake_says_out_of_date_each_module_is_asked_imports_first(tmp_path: Path) -> None:
    root = project(tmp_path)
    lake = Lake({"P.Base": 3})
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Top",))
    stale = await fresh.stale(("P.Top",), loaded, {})
    assert names(stale) == [("P.Base", True, False), ("P.Mid", True, False), ("P.Top", True, True)]
    assert lake.asked == [["P.Base", "P.Mid", "P.Top"], ["P.Base"]]  # Mid and Top sit over a stale Base
    await fresh.stale(("P.Top",), loaded, {})
    assert len(lake.asked) == 2  # nothing changed since Lake said so


async def test_without_lake_the_artifacts_are_taken_as_made_from_the_sources_first_seen(tmp_path: Path) -> None:
    root = project(tmp_path)
    fresh = make(root, Lake({"P.Base": None}))
    loaded = await fresh.loading(("P.Base",))
    assert await fresh.stale(("P.Base",), loaded, {}) == []
    (root / "P/Base.lean").write_text("prelude\ndef one := 4\n")
    assert names(await fresh.stale(("P.Base",), loaded, {})) == [("P.Base", True, True)]


async def test_a_held_text_that_is_not_what_was_built_is_stale(tmp_path: Path) -> None:
    fresh = make(project(tmp_path), Lake())
    loaded = await fresh.loading(("P.Base",))
    assert await fresh.stale(("P.Base",), loaded, {"P.Base": text_hash(CHAIN["P/Base.lean"])}) == []
    assert names(await fresh.stale(("P.Base",), loaded, {"P.Base": "0" * 16})) == [("P.Base", True, True)]


async def test_a_deleted_or_unreadable_import_is_stale(tmp_path: Path) -> None:
    root = project(tmp_path)
    lake = Lake()
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Mid",))
    (root / "P/Base.lean").write_bytes(b"prelude\n\xff\n")
    assert names(await fresh.stale(("P.Mid",), loaded, {})) == [("P.Base", True, False), ("P.Mid", True, True)]
    (root / "P/Base.lean").unlink()  # gone, but its build is still there for Lean to load: never a clean Mid
    assert names(await fresh.stale(("P.Mid",), loaded, {})) == [("P.Base", True, False), ("P.Mid", True, True)]
    olean_path(root, "P.Base").unlink()  # nothing of it left: Lake cannot build Mid (an unknown import)
    lake.answers["P.Mid"] = 1
    assert names(await fresh.stale(("P.Mid",), loaded, {})) == [("P.Mid", True, True)]


async def test_a_save_records_the_module_and_its_imports_and_rebuilt_modules_are_named_once(tmp_path: Path) -> None:
    root = project(tmp_path)
    lake = Lake()
    fresh = make(root, lake)
    (root / "P/Base.lean").write_text("prelude\ndef one := 5\n")
    start = await fresh.before_build("P.Mid")
    build(root, "P.Base")
    build(root, "P.Mid")
    await fresh.built(start)
    assert fresh.take_rebuilt() == [str(olean_path(root, m).with_suffix(".ilean")) for m in ("P.Base", "P.Mid")]
    assert fresh.take_rebuilt() == []
    assert await fresh.stale(("P.Mid",), await fresh.loading(("P.Mid",)), {}) == []
    assert lake.asked == []  # the save told Beam what the artifacts are made from
    build(root, "P.Base")  # an outside `lake build`: seen by the next check
    await fresh.stale(("P.Mid",), await fresh.loading(("P.Mid",)), {})
    assert fresh.take_rebuilt() == [str(olean_path(root, "P.Base").with_suffix(".ilean"))]


async def test_a_source_read_within_the_racy_window_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    reads: list[Path] = []
    real = read_source

    async def counting(path: Path, *, limit: int) -> str:
        reads.append(path)
        return await real(path, limit=limit)

    monkeypatch.setattr("beam_broker._freshness.read_source", counting)
    fresh = make(root, Lake())
    await fresh.closure(("P.Base",))
    await fresh.closure(("P.Base",))
    assert len(reads) == 2  # just written: a later write in the same timestamp tick would not change its stat
    age(root)
    later = time.time_ns() + 60 * 10**9  # a minute after every change (the mtime set back and the ctime)
    monkeypatch.setattr("beam_broker._freshness.time", SimpleNamespace(time_ns=lambda: later))
    await fresh.closure(("P.Base",))
    await fresh.closure(("P.Base",))
    assert len(reads) == 3  # its stat changed (read again); then it is old enough to trust the stat


async def test_what_lake_says_about_new_modules_is_recorded_against_the_imports_beam_already_knows(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, {**CHAIN, "P/Side.lean": "prelude\nimport P.Base\ndef side := one\n"})
    age(root)
    lake = Lake()
    fresh = make(root, lake)
    assert await fresh.stale(("P.Mid",), await fresh.loading(("P.Mid",)), {}) == []
    assert await fresh.stale(("P.Side",), await fresh.loading(("P.Side",)), {}) == []  # Base known, Side new
    assert lake.asked == [["P.Base", "P.Mid"], ["P.Side"]]
    assert await fresh.stale(("P.Side",), await fresh.loading(("P.Side",)), {}) == []
    assert len(lake.asked) == 2


async def test_modules_lake_called_out_of_date_over_an_import_edited_back_are_current_again(tmp_path: Path) -> None:
    """Lake's "out of date" about a module holds while everything it judged holds, its imports' sources too."""
    root = project(tmp_path)
    age(root)
    original = (root / "P/Base.lean").read_text()
    (root / "P/Base.lean").write_text("prelude\ndef one := 6\n")  # edited before Beam ever looked
    lake = Lake({"P.Base": 3, "P.Mid": 3, "P.Top": 3})  # Lake judges a module with its imports
    fresh = make(root, lake)
    loaded = await fresh.loading(("P.Top",))
    stale = await fresh.stale(("P.Top",), loaded, {})
    assert names(stale) == [("P.Base", True, False), ("P.Mid", True, False), ("P.Top", True, True)]
    (root / "P/Base.lean").write_text(original)  # `git checkout`: the build is current again
    lake.answers.clear()
    assert await fresh.stale(("P.Top",), loaded, {}) == []


async def test_a_module_lake_called_out_of_date_for_a_transitive_import_is_current_once_it_is(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    lake = Lake()
    fresh = make(root, lake)
    assert await fresh.stale(("P.Mid",), await fresh.loading(("P.Mid",)), {}) == []  # Base and Mid recorded
    original = (root / "P/Base.lean").read_text()
    (root / "P/Base.lean").write_text("prelude\ndef one := 7\n")
    lake.answers["P.Top"] = 3  # Top is new to Beam: asked alone, Lake says out of date (Base is)
    loaded = await fresh.loading(("P.Top",))
    await fresh.learn(("P.Top",), {})  # as a sync does while Lean elaborates
    assert lake.asked[-1] == ["P.Top"]
    stale = await fresh.stale(("P.Top",), loaded, {})
    assert names(stale) == [("P.Base", True, False), ("P.Mid", True, False), ("P.Top", True, True)]
    (root / "P/Base.lean").write_text(original)
    lake.answers.clear()
    assert await fresh.stale(("P.Top",), loaded, {}) == []


async def test_a_source_whose_mtime_was_set_back_is_racy_while_its_ctime_is_recent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cp -p`, `tar x`, `rsync -t` write a file and set its mtime back; the write's own time is its ctime.

    A second such write of the same size in the same timestamp tick leaves the whole `stat` unchanged, so a read
    within the racy window of the ctime must not be trusted either.
    """
    root = project(tmp_path)
    age(root)  # mtimes a minute back, ctimes now
    ctime = os.stat(root / "P/Base.lean").st_ctime_ns
    monkeypatch.setattr("beam_broker._freshness.time", SimpleNamespace(time_ns=lambda: ctime + 1))  # its tick
    fresh = make(root, Lake())
    loaded = await fresh.loading(("P.Mid",))
    assert await fresh.stale(("P.Mid",), loaded, {}) == []
    base = str(root / "P/Base.lean")
    first = _stat(base)
    Path(base).write_text("prelude\ndef one := 8\n")  # same size, same inode
    # A coarse clock: the second write's mtime (restored) and ctime are the first's, so its whole `stat` is too.
    monkeypatch.setattr("beam_broker._freshness._stat", lambda path: first if path == base else _stat(path))
    assert names(await fresh.stale(("P.Mid",), loaded, {})) == [("P.Base", True, False), ("P.Mid", True, True)]
