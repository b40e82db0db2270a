"""The projection's core: one call, one document as a call sees it, and the state every tool family shares.

`Ctx` is a running tool call, `Doc` a file at the version Beam reported last, `Base` the per-server state (the
project, the versions Beam reported, the web tools' rate limits) with the document steps every tool takes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

import anyio

from beam_broker.errors import BrokerError

from . import _text, _web
from ._errors import CompatError
from ._project import PROJECT_PATH_ENV, Project

if TYPE_CHECKING:
    from beam_mcp._calls import CallRun, Calls

T = TypeVar("T")
U = TypeVar("U")


@dataclasses.dataclass
class Ctx:
    """One running tool call: the broker through `Calls`, and the call's notifier.

    `fresh` asks `Base._open` for the file's version again instead of taking the one Beam reported last
    (the surface runs a call again so when the broker says that version is no longer current: `Outdated`).
    """

    calls: Calls
    run: CallRun
    fresh: bool = False

    async def op(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run a broker operation for this call.

        Raises:
            Outdated: The operation named a document version that is no longer current (the file changed).
        """
        try:
            return await self.calls.broker_call(self.run, name, arguments)
        except Exception as exc:
            data = getattr(exc, "data", None)
            if error_code(exc) == "contentModified" and isinstance(data, dict):
                if data.get("reason") == "documentVersionMismatch" and not self.fresh:
                    raise Outdated from exc
            raise


class Outdated(Exception):
    """A call used the version Beam reported last for a file, and the file has changed since: ask again."""


@dataclasses.dataclass(frozen=True)
class Doc:
    """A file as this call sees it: its project, canonical path, Beam's version and the text on disk."""

    root: Path
    file: Path
    version: int
    text: str

    @property
    def workspace(self) -> dict[str, str]:
        """The workspace descriptor of its project."""
        return {"root": str(self.root)}

    @property
    def lines(self) -> list[str]:
        """Its lines as lean-lsp-mcp counts them."""
        return _text.lines_of(self.text)

    @property
    def lsp(self) -> list[str]:
        """Its lines as LSP counts them."""
        return _text.lsp_lines(self.text)

    def at(self, line: int, column: int) -> dict[str, Any]:
        """The operation arguments of a 0-based line and code-point column (UTF-16 `character`)."""
        lsp = self.lsp
        text = lsp[line] if 0 <= line < len(lsp) else ""
        return {"line": line, "character": _text.to_utf16(text, column)}

    def args(self, **more: Any) -> dict[str, Any]:
        """Operation arguments naming this document version."""
        return {"workspace": self.workspace, "path": str(self.file), "version": self.version, **more}


def error_code(exc: BaseException) -> str | None:
    """The broker error code an exception carries (None for any other exception)."""
    return exc.code if isinstance(exc, BrokerError) else None


def uri_path(uri: str) -> Path | None:
    """The real path a `file:` URI names (None for another scheme)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(os.path.realpath(unquote(parsed.path)))


async def both(first: Awaitable[T], second: Awaitable[U]) -> tuple[T, U]:
    """Two awaitables at once (Lean answers two positions of a document in parallel).

    The first failure is raised alone, as a sequential call would raise it (never an exception group: the surface
    maps errors one by one).
    """
    results: list[Any] = [None, None]
    failures: list[Exception] = []

    async def run(index: int, work: Awaitable[Any]) -> None:
        try:
            results[index] = await work
        except Exception as exc:
            failures.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0, first)
        tg.start_soon(run, 1, second)
    if failures:
        raise failures[0]
    return results[0], results[1]


@dataclasses.dataclass
class Base:
    """lean-lsp-mcp's per-server state over Beam's operations, and the document steps every tool takes.

    Args:
        env: The environment the projection reads (`LEAN_PROJECT_PATH`, the web tools' URLs).
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.project = Project(self.env.get(PROJECT_PATH_ENV))
        self.versions: dict[str, int] = {}
        """The last version Beam reported for each canonical file: what a tool asks about (`_open`) and what
        `lean_build` re-syncs."""
        self.limits = _web.RateLimits()

    async def _open(self, cx: Ctx, file_path: str) -> Doc:
        """The file as this call sees it, at the version Beam reported last for it.

        Every version-bound operation reads the file again and refuses a version that is no longer its text's
        (`Outdated`, and the call runs again with `cx.fresh`), so the version need not be asked for first; a file
        not seen yet, or a fresh call, is read into Beam first (`update`: a version without a barrier).
        """
        root, file = self.project.resolve(file_path)
        known = self.versions.get(str(file))
        if known is not None and not cx.fresh:
            return self._doc(root, file, known)
        out = await cx.op("update", {"workspace": {"root": str(root)}, "path": str(file)})
        return self._doc(root, file, int(out["version"]))

    async def _synced(self, cx: Ctx, file_path: str) -> tuple[Doc, dict[str, Any]]:
        """Read the file and wait until Lean elaborated it (`sync`, every diagnostic in the result)."""
        root, file = self.project.resolve(file_path)
        args = {"workspace": {"root": str(root)}, "path": str(file), "diagnostic_scope": "all"}
        out = await cx.op("sync", {**args, "diagnostics_in_result": True})
        return self._doc(root, file, int(out["version"])), out

    def _doc(self, root: Path, file: Path, version: int) -> Doc:
        self.versions[str(file)] = version
        return Doc(root, file, version, _text.read_source(str(file)))

    async def _lean_diagnostics(self, cx: Ctx, doc: Doc, fallback: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Lean's diagnostics of the document version as Lean published them (`leanTags`, silent ones included).

        They come from Beam's diagnostics cache for the file (a read that never starts Lean work); when the cache
        already holds another version, from `fallback` (the `sync` items: visible diagnostics only).
        """
        broker = await cx.calls.broker()
        try:
            cached = broker.diagnostics(str(doc.file))
        except Exception as exc:
            if error_code(exc) is None:
                raise
            cached = {}
        if cached.get("version") == doc.version:
            return [dict(d) for d in cached.get("diagnostics", [])]
        # As Lean publishes them: LSP severity numbers (what `success` and the filters read), not Beam's names.
        return [
            {
                "severity": _text.LSP_SEVERITY.get(d["severity"], d["severity"]),
                "message": d["message"],
                "fullRange": d["range"],
            }
            for d in fallback
        ]

    def _line(self, doc: Doc, line: int) -> str:
        lines = doc.lines
        if line < 1 or line > len(lines):
            raise CompatError(f"Line {line} out of range (file has {len(lines)} lines)")
        return lines[line - 1]

    async def _goals(self, cx: Ctx, doc: Doc, line: int, column: int, mode: str) -> list[str] | None:
        """Goals at a 0-based position (None: Lean has no proof state there)."""
        try:
            out = await cx.op("goals", doc.args(**doc.at(line, column), mode=mode))
        except Exception as exc:
            if error_code(exc) == "invalidParams":
                return None
            raise
        return [_text.goal_text(goal) for goal in out["goals"]]
