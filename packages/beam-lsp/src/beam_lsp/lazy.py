"""Loading on first use: a package's public names (PEP 562), a module of coroutine functions, and a module.

Every Beam package lists its public names this way, so that importing a package costs only what is used: the MCP
server answers discovery before the Lean client stack loads, and `lean-beam` answers through its daemon without
pydantic. A package writes each name once in its table (home module -> names, the module written as in an import
statement: `".client"`); the table gives its `__all__` and its module `__getattr__`. Type checkers cannot read the
table, so the package also imports the names under `TYPE_CHECKING` (`from .client import LeanClient as
LeanClient`); a test holds the two to the same names. `lazy_coroutines` stands in for a module of coroutine
functions until one of them is called (the broker's registry names its handlers this way). `lazy_module` stands in
for a module until one of its names is read (beam-lsp loads lsprotocol so: about 1 s and 16 MiB of classes that a
client answering diagnostics and Lean's own requests never needs). Standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import ModuleType
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, Iterable[str]]) -> tuple[tuple[str, ...], Callable[[str], Any]]:
    """The public names of `package` and the module `__getattr__` that loads each one on first use.

    Args:
        package: The package's `__name__` (it must be importing: call this from its `__init__`).
        homes: Each home module and the names it exports; a module is written as in an import statement,
            relative to the package (`".client"`) or absolute (`"beam_lsp.redaction"`, a name re-exported).

    Returns:
        The names in table order (the package's `__all__` lists them) and the `__getattr__`, which imports a
        name's home module, keeps the value in the package (the next access is a plain attribute) and raises
        `AttributeError` for any other name.

    Raises:
        ValueError: A name is listed twice.
    """
    where: dict[str, str] = {}
    for module, names in homes.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name} is listed in both {where[name]} and {module}")
            where[name] = module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return tuple(where), __getattr__


class lazy_coroutines:
    """Stands in for a module of coroutine functions: each attribute is one of them, imported when first called.

    `module` is imported by the first call of any of its functions (not by getting the attribute); the stand-in's
    functions are coroutine functions carrying the real ones' module and name. Type checkers should see the module
    itself (import it under `TYPE_CHECKING`), so calls are checked against the real signatures.
    """

    def __init__(self, module: str) -> None:
        """Stand in for `module` (an absolute module name)."""
        self._module = module

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        module = self._module

        async def call(*args: Any, **kwargs: Any) -> Any:
            function: Callable[..., Awaitable[Any]] = getattr(importlib.import_module(module), name)
            return await function(*args, **kwargs)

        call.__module__, call.__name__, call.__qualname__ = module, name, name
        return call


class _LazyModule(ModuleType):
    """A module object that imports the module it names when one of its names is first read, then holds them all."""

    def __getattr__(self, name: str) -> Any:
        # Only names not yet in this object come here: the first read copies the real module's names in, so every
        # later read is an ordinary module attribute (no Python call on a client's hot path).
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for the module `name` that imports it when one of its names is first read.

    A module binds it where it would import the module (`types = lazy_module("lsprotocol.types")`, with the real
    import under `TYPE_CHECKING` for type checkers); annotations never read it (`from __future__ import
    annotations`), so only code that builds or tests a value of the module's types pays for the import. Importing
    the module from several threads at once is safe (Python's import lock); the stand-in then holds the same names.

    Args:
        name: The absolute name of the module.
    """
    return _LazyModule(name)
