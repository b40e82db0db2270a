"""The public API of beam-lsp beyond what `tests/test_layout.py` checks of every package: old homes, cheap imports."""

from __future__ import annotations

import collections.abc
import inspect
import os
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


_LSP_TYPES_SCRIPT = """
import sys
import threading
from pathlib import Path

import anyio

where: list[str] = []


class Watch:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "lsprotocol.types":
            where.append(threading.current_thread().name)
        return None


sys.meta_path.insert(0, Watch)

from beam_lsp import LeanClient, Position, path_to_uri
from tests.support.fixtures import fake_cmd


def loaded() -> bool:
    return any(m == "lsprotocol" or m.startswith(("lsprotocol.", "cattrs")) for m in sys.modules)


async def main(root: Path) -> None:
    async with LeanClient.start(fake_cmd({"goal": "p"}), cwd=root) as client:
        uri = path_to_uri(root / "A.lean")
        await client.open(uri, "theorem t : True := trivial\\n")
        with anyio.fail_after(30):
            assert (await client.sync(uri)).complete
            await client.plain_goal(uri, Position(line=0, character=2))
        print("after sync and goal:", loaded())
        with anyio.fail_after(30):
            await client.hover(uri, Position(line=0, character=8))
        print("after hover:", loaded(), client.capabilities.hover_provider)
        print("loaded on the event loop's thread:", where == [threading.main_thread().name])


anyio.run(main, Path(sys.argv[1]))
"""


def test_lsprotocol_loads_with_the_first_standard_lsp_answer_not_with_the_client(tmp_path: Path) -> None:
    # lsprotocol (about 1 s of CPU and 16 MiB) is only needed to read an answer into its types: a client that
    # syncs and asks Lean's own requests never loads it, and the server's capabilities are read when asked. The
    # first typed request loads it on a worker thread: never on the event loop, which would stop every task.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _LSP_TYPES_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        "after sync and goal: False",
        "after hover: True True",
        "loaded on the event loop's thread: False",
    ]


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
