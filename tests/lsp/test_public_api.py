"""The public API of beam-lsp beyond what `tests/test_layout.py` checks of every package: old homes, cheap imports."""

from __future__ import annotations

import collections.abc
import inspect
import subprocess
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lsprotocol import types as lsp_types

import beam_lsp


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = beam_lsp.Nope


def test_names_that_existed_before_the_split_still_import_from_the_client_module() -> None:
    from beam_lsp import client

    for name in ("LeanClient", "SyncResult", "DiagnosticsEvent", "ProgressEvent", "ServerExitedEvent", "ClientStats"):
        assert getattr(client, name) is getattr(beam_lsp, name)


def test_importing_the_package_the_redactor_and_the_parsers_does_not_load_the_client() -> None:
    code = (
        "import sys, beam_lsp, beam_lsp.redaction, beam_lsp.strict_json, beam_lsp.project; "
        "print(sorted(m for m in ('beam_lsp.client', 'lsprotocol', 'anyio') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def _named(annotation: object) -> Iterator[object]:
    """Every type an annotation names, recursively through unions, generics and aliases."""
    yield annotation
    for arg in typing.get_args(annotation):
        yield from _named(arg)


def _public_callables() -> Iterator[tuple[str, Callable[..., object], dict[str, object]]]:
    names = {name: getattr(beam_lsp, name) for name in beam_lsp.__all__}
    names |= {n: getattr(collections.abc, n) for n in collections.abc.__all__} | {"Path": Path, "types": lsp_types}
    for name, value in names.items():
        if inspect.isclass(value) and value.__module__.startswith("beam_lsp"):
            for member, fn in vars(value).items():
                target = fn.fget if isinstance(fn, property) else getattr(fn, "__func__", fn)
                if (not member.startswith("_") or member == "__init__") and inspect.isfunction(target):
                    yield f"{name}.{member}", target, {**vars(sys.modules[value.__module__]), **names}
        elif inspect.isfunction(value):
            yield name, value, {**vars(sys.modules[value.__module__]), **names}


def test_public_signatures_name_only_public_types_and_never_any() -> None:
    exported = [getattr(beam_lsp, name) for name in beam_lsp.__all__]
    problems = []
    for where, fn, namespace in _public_callables():
        hints = typing.get_type_hints(fn, globalns=namespace)
        for param, annotation in hints.items():
            for named in _named(annotation):
                if named is typing.Any:
                    problems.append(f"{where}({param}): Any")
                elif (
                    inspect.isclass(named)
                    and named.__module__.startswith("beam_lsp.")
                    and not any(named is e for e in exported)
                    and named.__module__ not in ("beam_lsp.jsonrpc", "beam_lsp.redaction", "beam_lsp.strict_json")
                ):
                    problems.append(f"{where}({param}): {named.__module__}.{named.__name__} is not public")
    assert problems == []
