"""lean-lsp-mcp's project-wide tools: the build, local search, and the four that forward to web services."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from . import _search, _web
from ._core import Base, Ctx, error_code, uri_path
from ._errors import CompatError
from ._project import display, files_under, lean_project


class ProjectTools(Base):
    """The project-wide tools, one method per lean-lsp-mcp tool."""

    async def build(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_build`: re-sync every file this server has open, saving their stale imports first."""
        if a["clean"] or a["fetch_cache"]:
            raise CompatError(
                "lean_build with clean or fetch_cache is not available: Beam builds the imports of open files "
                "(lean_sync's rebuild_imports); run `lake clean` or `lake exe cache get` yourself"
            )
        if a["lean_project_path"]:
            self.project.root = lean_project(a["lean_project_path"], None)
        root = self.project.current()
        log: list[str] = []
        errors: list[str] = []
        for path in files_under(root, list(self.versions)):
            args = {"workspace": {"root": str(root)}, "path": path, "rebuild_imports": True}
            try:
                out = await cx.op("sync", args)
            except Exception as exc:
                if error_code(exc) is None:
                    raise
                errors.append(f"{display(root, Path(path))}: {getattr(exc, 'message', exc)}")
                continue
            self.versions[path] = int(out["version"])
            log.extend(f"built {module}" for module in out.get("rebuilt_imports") or [])
            log.append(f"synced {display(root, Path(path))}")
        lines = log[-a["output_lines"] :] if a["output_lines"] > 0 else []
        return {"success": not errors, "output": "\n".join(lines), "errors": errors}

    async def local_search(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_local_search`: declarations in the project's sources, with Beam's symbol index when it runs."""
        if a["project_root"]:
            try:
                self.project.root = lean_project(a["project_root"], self.project.root)
            except CompatError as exc:
                raise CompatError(f"Invalid project root '{a['project_root']}': {exc.message}") from exc
        elif self.project.root is None:
            raise CompatError("Lean project path not set. Call a file-based tool first.")
        root = self.project.current()
        query = a["query"].strip()
        found = await anyio.to_thread.run_sync(_search.search, root, query, a["limit"])
        broker = await cx.calls.broker()
        index = "unavailable"
        if broker.cached(str(root)) is not None:
            try:
                out = await cx.op("workspace_symbols", {"workspace": {"root": str(root)}, "query": query})
            except Exception as exc:
                if error_code(exc) is None:
                    raise
                index = "error"
            else:
                symbols = []
                for sym in out["result"]:
                    path = uri_path((sym.get("location") or {}).get("uri", ""))
                    if isinstance(sym.get("name"), str) and path is not None:
                        symbols.append((sym["name"], path))
                matches = await anyio.to_thread.run_sync(_search.index_matches, root, symbols, query)
                found = _search.merge(found, matches, query, a["limit"])
                index = "consulted"
        return {"items": found, "index": index}

    async def leansearch(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_leansearch`."""
        self.limits.take("leansearch", _web.TOOL_LIMIT)
        return await _web.leansearch(self.env, a["query"], a["num_results"])

    async def loogle(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_loogle` (rate limited only on the public service)."""
        if not _web.custom(self.env, _web.LOOGLE_URL_ENV):
            self.limits.take("loogle", _web.LOOGLE_LIMIT)
        return await _web.loogle(self.env, a["query"], a["num_results"])

    async def leanfinder(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_leanfinder`."""
        self.limits.take("leanfinder", _web.TOOL_LIMIT)
        return await _web.leanfinder(self.env, a["query"], a["num_results"], a["version"])

    async def hammer_premise(self, cx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
        """`lean_hammer_premise`: the first goal at a position, sent to the premise service."""
        if not _web.custom(self.env, _web.HAMMER_URL_ENV):
            self.limits.take("hammer_premise", _web.TOOL_LIMIT)
        doc = await self._open(cx, a["file_path"])
        # lean-lsp-mcp's plainGoal at the position itself: what `lean_goal` with a column answers.
        goals = await self._goals(cx, doc, a["line"] - 1, a["column"] - 1, "exact")
        if not goals:
            status = "no_goal" if goals is None else "complete"
            raise CompatError(
                f"No goals found at line {a['line']}, column {a['column']} (status: {status}). "
                "Try a different position."
            )
        return await _web.hammer_premise(self.env, goals[0], a["num_results"])
