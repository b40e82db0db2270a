"""Where a lean-lsp-mcp `file_path` lives: its Lean project (the workspace Beam runs) and its path in it.

lean-lsp-mcp takes a `file_path` absolute or relative to `LEAN_PROJECT_PATH`, finds the project from the file,
and shows paths relative to the project (`.lake/packages/<name>/...` for dependencies). The project root is the
projection's one piece of state besides document versions: `LEAN_PROJECT_PATH` when set, else the last project a
file was found in (a relative path needs one). What makes a directory a project is `beam_lsp.project`'s rule (the
only copy); lean-lsp-mcp additionally asks for a `lean-toolchain` file, and so does this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from beam_lsp.project import TOOLCHAIN_FILE, is_project_root

from ._errors import CompatError

PROJECT_PATH_ENV: Final = "LEAN_PROJECT_PATH"
PREWARM_FILES_ENV: Final = "LEAN_MCP_PREWARM_FILES"
"""lean-lsp-mcp's setting: project-relative Lean files, comma-separated, elaborated in the background at start-up."""


def is_root(directory: Path) -> bool:
    """Whether a directory is a Lean project lean-lsp-mcp would serve (a `lean-toolchain` and Beam's markers)."""
    return (directory / TOOLCHAIN_FILE).is_file() and is_project_root(directory)


def owner(file: Path) -> Path | None:
    """The project that serves a file.

    The innermost root above it, or for a file under `<root>/.lake/packages`, that outer root (a dependency's
    files are served by the project that depends on it).
    """
    parts = file.parts
    for index in range(len(parts) - 2):
        if parts[index : index + 2] == (".lake", "packages"):
            outer = Path(*parts[:index])
            if is_root(outer):
                return outer
    for directory in file.parents:
        if is_root(directory):
            return directory
    return None


def startup_root(env: Mapping[str, str], cwd: Path) -> Path | None:
    """The project known when the server starts: `LEAN_PROJECT_PATH`, else the working directory, if a project.

    The server starts its Lean server ahead of the first call (`BrokerHost`'s prewarm); a directory that is not
    a project root starts nothing (the first file's project is found from the file, as before).
    """
    configured = env.get(PROJECT_PATH_ENV)
    raw = Path(os.path.expanduser(configured)) if configured else cwd
    try:
        root = Path(os.path.realpath(raw))
        return root if is_root(root) else None
    except OSError:
        return None


def prewarm_files(env: Mapping[str, str]) -> list[str]:
    """The files `LEAN_MCP_PREWARM_FILES` names (comma-separated, blanks dropped), as lean-lsp-mcp reads it."""
    return [part.strip() for part in env.get(PREWARM_FILES_ENV, "").split(",") if part.strip()]


class Project:
    """The projection's notion of the current project (`LEAN_PROJECT_PATH`, else the last one used)."""

    def __init__(self, configured: str | None) -> None:
        self.root: Path | None = None
        if configured:
            root = Path(os.path.realpath(os.path.expanduser(configured)))
            self.root = root if root.is_dir() else None

    def resolve(self, file_path: str) -> tuple[Path, Path]:
        """The (project root, canonical file) of a `file_path`; the root becomes the current project.

        The current project serves every file under it; a file elsewhere is served by its own project (`owner`).

        Raises:
            CompatError: No such file, or no Lean project holds it (lean-lsp-mcp's message).
        """
        raw = Path(os.path.expanduser(file_path))
        if not raw.is_absolute():
            raw = (self.root / raw) if self.root is not None else Path.cwd() / raw
        file = Path(os.path.realpath(raw))
        current = self.root if self.root is not None and file.is_relative_to(self.root) and is_root(self.root) else None
        # lean-lsp-mcp keeps the current project while it holds the file (a nested project's file included), so
        # relative paths keep meaning the same project; else the file's own project.
        root = (current or owner(file)) if file.is_file() else None
        if root is None:
            raise CompatError(
                f"Invalid Lean file path: '{file_path}' not found in any Lean project "
                "(no lean-toolchain ancestor or file does not exist)"
            )
        self.root = root
        return root, file

    def current(self) -> Path:
        """The current project root.

        Raises:
            CompatError: None is known yet.
        """
        if self.root is None or not is_root(self.root):
            raise CompatError("No valid Lean project path found. Run another tool first to set it up.")
        return self.root


def directory(raw: str, base: Path | None) -> Path | None:
    """A directory argument (`~` expanded; relative to `base` when given), canonical; None when it is none."""
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute() and base is not None:
        path = base / path
    found = Path(os.path.realpath(path))
    return found if found.is_dir() else None


def lean_project(raw: str, base: Path | None) -> Path:
    """A project argument (`lean_project_path`, `project_root`), checked as lean-lsp-mcp checks it before using it.

    Raises:
        CompatError: No such directory, or no Lean project (lean-lsp-mcp's messages); the current project stays.
    """
    found = directory(raw, base)
    if found is None:
        raise CompatError(f"Lean project path '{raw}' does not exist.")
    if not is_root(found):
        raise CompatError(
            f"Lean project path '{found}' must contain `lean-toolchain` and either `lakefile.lean` or `lakefile.toml`."
        )
    return found


def files_under(root: Path, paths: list[str]) -> list[str]:
    """The paths that are existing files under `root`, sorted."""
    return sorted(p for p in paths if Path(p).is_relative_to(root) and Path(p).is_file())


def display(root: Path, path: Path) -> str:
    """A path as lean-lsp-mcp shows it: relative to the project (dependencies under `.lake/packages/<name>`)."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
