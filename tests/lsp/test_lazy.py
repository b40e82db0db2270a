"""Lazy package exports (`beam_lsp.lazy`): a name loads its module on first use, once."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator

import pytest

from beam_lsp.lazy import lazy_coroutines, lazy_exports, lazy_module


@pytest.fixture
def package() -> Iterator[types.ModuleType]:
    """A package `lazy_pkg`, importing (it is in `sys.modules`), with nothing in it yet."""
    pkg = types.ModuleType("lazy_pkg")
    pkg.__path__ = []
    sys.modules["lazy_pkg"] = pkg
    try:
        yield pkg
    finally:
        del sys.modules["lazy_pkg"]


def test_a_name_loads_its_home_module_on_first_use_and_stays(
    package: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = types.ModuleType("lazy_pkg.home")
    thing = object()
    home.Thing = thing  # type: ignore[attr-defined]
    imported: list[tuple[str, str | None]] = []

    def import_module(name: str, anchor: str | None = None) -> types.ModuleType:
        imported.append((name, anchor))
        return home

    monkeypatch.setattr("importlib.import_module", import_module)
    names, getattr_ = lazy_exports("lazy_pkg", {".home": ("Thing",), "elsewhere.mod": ("Other",)})
    assert names == ("Thing", "Other") and imported == []
    assert getattr_("Thing") is thing
    assert imported == [(".home", "lazy_pkg")]
    assert vars(package)["Thing"] is thing  # kept: the next access is a plain attribute
    with pytest.raises(AttributeError, match="module 'lazy_pkg' has no attribute 'Nope'"):
        getattr_("Nope")


def test_a_name_listed_twice_is_refused(package: types.ModuleType) -> None:
    with pytest.raises(ValueError, match=r"Thing is listed in both \.home and \.other"):
        lazy_exports("lazy_pkg", {".home": ("Thing",), ".other": ("Thing",)})


@pytest.mark.anyio
async def test_a_stand_in_coroutine_imports_its_module_when_first_called(monkeypatch: pytest.MonkeyPatch) -> None:
    home = types.ModuleType("lazy_home")

    async def answer(x: int, *, plus: int) -> int:
        return x + plus

    home.answer = answer  # type: ignore[attr-defined]
    imported: list[str] = []

    def import_module(name: str) -> types.ModuleType:
        imported.append(name)
        return home

    monkeypatch.setattr("importlib.import_module", import_module)
    stand_in = lazy_coroutines("lazy_home").answer
    assert imported == [] and inspect.iscoroutinefunction(stand_in)
    assert (stand_in.__module__, stand_in.__name__) == ("lazy_home", "answer")
    assert await stand_in(1, plus=2) == 3
    assert imported == ["lazy_home"]


def test_a_lazy_module_imports_its_module_on_the_first_name_read_and_then_holds_every_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = types.ModuleType("lazy_real")
    real.Thing = object()  # type: ignore[attr-defined]
    real.Other = object()  # type: ignore[attr-defined]
    imported: list[str] = []

    def import_module(name: str) -> types.ModuleType:
        imported.append(name)
        return real

    monkeypatch.setattr("importlib.import_module", import_module)
    stand_in = lazy_module("lazy_real")
    assert imported == []
    assert stand_in.Thing is real.Thing
    assert stand_in.Other is real.Other
    assert "Other" in vars(stand_in)  # held: later reads are plain attribute reads
    assert imported == ["lazy_real"]
    with pytest.raises(AttributeError):
        _ = stand_in.Nope
