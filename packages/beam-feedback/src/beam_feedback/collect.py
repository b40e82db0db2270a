"""Collecting a workspace's debug context without starting Lean.

This module owns what a report says about its environment: Beam and Python versions, the OS, the
project's ``lean-toolchain``, lakefile kind and manifest packages, git state, ``elan`` and
``lake`` versions, and runtime stats and open files handed in by the caller. Every command that
fails becomes a collection warning; nothing here raises for a broken or unusual workspace.

It must never start a Lean server, build anything, install a toolchain or write to the workspace:
``lake --version`` runs only a toolchain that is already installed, ``git status`` runs with
optional locks off, and files are only read.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue

from beam_feedback.__about__ import __version__
from beam_feedback._command import CommandError, run_command
from beam_lsp import strict_json
from beam_lsp.project import LAKEFILES, TOOLCHAIN_FILE, elan_toolchain_dir, read_toolchain

__all__ = ["DEFAULT_COMMAND_TIMEOUT", "CollectedContext", "collect_context"]

DEFAULT_COMMAND_TIMEOUT: Final = 5.0
"""Seconds each external command (``git``, ``elan``, ``lake``) may take before it is killed."""

_BEAM_DISTRIBUTIONS: Final = ("beam-feedback", "beam-lsp", "beam-broker", "beam-mcp")
# Variables that would point git at some other repository than the workspace's.
_GIT_REDIRECTS: Final = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
_MAX_MANIFEST: Final = 8 * 1024 * 1024
# The commands `git status` would run that a repository's own config names (`git config --show-scope` lines).
_REPO_FILTER: Final = re.compile(r"^(?:local|worktree)\t(filter\..+\.(?:clean|smudge|process))$")


@dataclass(frozen=True)
class CollectedContext:
    """The result of :func:`collect_context`.

    Attributes:
        data: The collected context as a JSON-ready dict (not yet redacted).
        warnings: One line per failed command or unreadable file, in collection order.
    """

    data: dict[str, JsonValue]
    warnings: tuple[str, ...]


class _Collector:
    """Accumulates warnings for one collection; lives only for one call."""

    def __init__(self, env: Mapping[str, str], timeout: float) -> None:
        self.env = env
        self.timeout = timeout
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def which(self, command: str) -> str | None:
        return shutil.which(command, path=self.env.get("PATH", os.defpath))

    def run(self, argv: list[str], cwd: Path | None = None) -> str:
        return run_command(argv, cwd=cwd, env=self.env, timeout=self.timeout)


def _identity(identity: Mapping[str, JsonValue] | None, runtime_active: bool) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = {
        "name": "beam-feedback",
        "version": __version__,
        "runtime_active": runtime_active,
    }
    if identity:
        result.update(identity)
    return result


def _python(*, detailed: bool) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
    }
    if detailed:
        result["executable"] = sys.executable
    return result


def _os(*, detailed: bool) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
    }
    if detailed:
        result["platform"] = platform.platform()
    return result


def _beam_versions() -> dict[str, JsonValue]:
    versions: dict[str, JsonValue] = {}
    for distribution in _BEAM_DISTRIBUTIONS:
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    versions.setdefault("beam-feedback", __version__)
    return versions


def _read_small(path: Path, limit: int) -> str:
    with path.open(encoding="utf-8", errors="replace") as handle:
        return handle.read(limit)


def _toolchain(root: Path, collector: _Collector) -> str | None:
    try:
        toolchain = read_toolchain(root)
    except FileNotFoundError:
        collector.warn(f"no {TOOLCHAIN_FILE} file in the workspace root")
        return None
    except OSError as exc:
        collector.warn(f"could not read {TOOLCHAIN_FILE}: {exc.strerror or exc}")
        return None
    if toolchain is None:
        collector.warn(f"{TOOLCHAIN_FILE} is empty")
    return toolchain


def _lakefile(root: Path, collector: _Collector) -> dict[str, JsonValue] | None:
    found = [name for name in sorted(LAKEFILES) if (root / name).is_file()]  # Lake prefers lakefile.lean
    if len(found) > 1:
        collector.warn(f"both {' and '.join(found)} exist in the workspace root")
    if found:
        return {"file": found[0], "kind": found[0].rsplit(".", 1)[1]}
    collector.warn(f"no {' or '.join(sorted(LAKEFILES))} in the workspace root")
    return None


def _without_userinfo(url: str) -> str:
    """Drop ``user:password@`` from a URL: manifests sometimes carry credentialed remotes."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    # What follows the last `@` as written: `parts.port` raises for a port that is no number, and
    # `parts.hostname` drops an IPv6 address's brackets (and lower-cases the host).
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _manifest_package(entry: object) -> dict[str, JsonValue] | None:
    if not isinstance(entry, dict):
        return None
    # Old manifests (version <= 6) wrap each package as {"git": {...}} or {"path": {...}}.
    if len(entry) == 1:
        ((kind, inner),) = entry.items()
        if kind in ("git", "path") and isinstance(inner, dict):
            entry = {**inner, "type": kind}
    name = entry.get("name")
    if not isinstance(name, str):
        return None
    package: dict[str, JsonValue] = {"name": name}
    for source, target in (("type", "type"), ("rev", "rev"), ("inputRev", "input_rev"), ("dir", "dir")):
        value = entry.get(source)
        if isinstance(value, str):
            package[target] = value
    url = entry.get("url")
    if isinstance(url, str):
        package["url"] = _without_userinfo(url)
    return package


def _manifest(root: Path, collector: _Collector) -> dict[str, JsonValue] | None:
    path = root / "lake-manifest.json"
    if not path.is_file():
        return None
    try:
        raw = strict_json.loads(_read_small(path, _MAX_MANIFEST))
    except OSError as exc:
        collector.warn(f"could not read lake-manifest.json: {exc.strerror or exc}")
        return None
    except ValueError as exc:  # not JSON, a repeated key, NaN, or nested too deep
        collector.warn(f"lake-manifest.json is not valid JSON: {str(exc).removeprefix('not valid JSON: ')}")
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("packages", []), list):
        collector.warn("lake-manifest.json has no 'packages' list")
        return None
    packages: list[JsonValue] = []
    for entry in raw.get("packages", []):
        package = _manifest_package(entry)
        if package is None:
            collector.warn("lake-manifest.json has a package entry without a name")
            continue
        packages.append(package)
    version = raw.get("version")
    return {"version": version if isinstance(version, (int, str)) else None, "packages": packages}


def _git_env(env: Mapping[str, str]) -> dict[str, str]:
    child = {key: value for key, value in env.items() if key not in _GIT_REDIRECTS}
    # `git status` must not take index.lock (a concurrent git command in the workspace would
    # fail), and its messages must be in English for the "not a git repository" check below.
    child["GIT_OPTIONAL_LOCKS"] = "0"
    child["LC_ALL"] = "C"
    return child


def _no_repo_programs(git: str, root: Path, collector: _Collector) -> list[str]:
    """``-c`` options that keep ``git status`` from running what the repository's config names.

    A project's ``.git/config`` is not the user's (a clone, an archive): ``git status`` runs its
    ``core.fsmonitor`` hook, and its filters' ``clean`` commands on files whose stat data changed. An empty
    command is no filter. The user's own (global, system) filters are left alone.

    Raises:
        CommandError: ``git config`` failed (an unreadable config: status would fail too).
    """
    listing = run_command(
        [git, "-C", str(root), "config", "--list", "--show-scope", "--name-only"],
        cwd=root,
        env=_git_env(collector.env),
        timeout=collector.timeout,
    )
    keys = sorted({found[1] for line in listing.splitlines() if (found := _REPO_FILTER.match(line))})
    return ["-c", "core.fsmonitor=false", *(option for key in keys for option in ("-c", f"{key}="))]


def _git(root: Path, collector: _Collector) -> dict[str, JsonValue] | None:
    git = collector.which("git")
    if git is None:
        return None
    try:
        safe = _no_repo_programs(git, root, collector)
        # Submodules are not entered: each has a config of its own, with programs of its own.
        output = run_command(
            [git, "-C", str(root), *safe, "status", "--porcelain=v2", "--branch", "--ignore-submodules=all"],
            cwd=root,
            env=_git_env(collector.env),
            timeout=collector.timeout,
        )
    except CommandError as exc:
        if "not a git repository" in exc.stderr:
            return None
        collector.warn(f"git status failed: {exc}")
        return None
    branch: str | None = None
    commit: str | None = None
    dirty = False
    for line in output.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.removeprefix("# branch.oid ").strip()
            commit = None if oid == "(initial)" else oid
        elif line.startswith("# branch.head "):
            head = line.removeprefix("# branch.head ").strip()
            branch = None if head == "(detached)" else head
        elif line and not line.startswith("#"):
            dirty = True
    return {"branch": branch, "commit": commit, "dirty": dirty}


def _lake_binary(lake: str, toolchain: str | None, collector: _Collector) -> str | None:
    """The real ``lake`` to ask for its version, or None when asking could install a toolchain.

    An elan proxy (a ``lake`` next to an ``elan`` binary) resolves the project's toolchain and may
    download it, so we run the toolchain's own ``lake`` instead, and only if it is installed.
    """
    proxy_dir = Path(lake).parent
    if not (proxy_dir / "elan").exists() and not (proxy_dir / "elan.exe").exists():
        return lake
    if toolchain is None:
        # Without a toolchain the proxy would pick elan's default one, which says nothing
        # about this workspace (and a missing lean-toolchain was already reported).
        return None
    elan_home = Path(collector.env["ELAN_HOME"]) if collector.env.get("ELAN_HOME") else proxy_dir.parent
    folder = elan_toolchain_dir(toolchain)
    installed = elan_home / "toolchains" / folder / "bin" if folder is not None else None
    for candidate in (installed / "lake", installed / "lake.exe") if installed is not None else ():
        if candidate.is_file():
            return str(candidate)
    collector.warn(f"lake version not asked: toolchain {toolchain!r} is not installed (Beam never installs one)")
    return None


def _tools(toolchain: str | None, collector: _Collector) -> dict[str, JsonValue]:
    tools: dict[str, JsonValue] = {"elan": None, "lake": None}
    elan = collector.which("elan")
    if elan is not None:
        try:
            tools["elan"] = collector.run([elan, "--version"]).splitlines()[0] or None
        except CommandError as exc:
            collector.warn(f"elan --version failed: {exc}")
        except IndexError:
            collector.warn("elan --version printed nothing")
    lake = collector.which("lake")
    if lake is not None:
        binary = _lake_binary(lake, toolchain, collector)
        if binary is not None:
            try:
                tools["lake"] = collector.run([binary, "--version"]).splitlines()[0] or None
            except CommandError as exc:
                collector.warn(f"lake --version failed: {exc}")
            except IndexError:
                collector.warn("lake --version printed nothing")
    return tools


def _plain_json(value: object, what: str, collector: _Collector) -> JsonValue | None:
    """A JSON-only deep copy of caller data; unknown leaf types become their ``str()``."""
    try:
        copied: JsonValue = json.loads(json.dumps(value, default=str, allow_nan=False))
    except (ValueError, TypeError, RecursionError) as exc:
        collector.warn(f"{what} could not be converted to JSON and were left out: {exc}")
        return None
    return copied


def collect_context(
    root: Path | None,
    *,
    confidential: bool = False,
    runtime_stats: object = None,
    open_files: object = None,
    identity: Mapping[str, JsonValue] | None = None,
    env: Mapping[str, str] | None = None,
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
) -> CollectedContext:
    """Collect debug context for a workspace without starting Lean.

    Non-confidential collection returns ``identity``, ``beam`` (installed Beam distributions),
    ``python``, ``os``, and, when ``root`` is given, ``workspace`` (``root``, ``lean_toolchain``,
    ``lakefile``, ``manifest``), ``git`` (``branch``, ``commit``, ``dirty``; null outside a git
    work tree or without ``git``) and ``tools`` (``elan``, ``lake`` version lines); ``runtime``
    holds ``stats`` and ``open_files`` when the caller passes them. Confidential collection
    returns only ``identity``, ``python`` and ``os`` (no paths, no project data, no runtime data)
    and no warnings.

    Args:
        root: The workspace root (an existing directory), or None to skip project context.
        confidential: Collect nothing project-derived.
        runtime_stats: The caller's cached runtime statistics for this workspace (plain data).
        open_files: The caller's open files for this workspace (plain data).
        identity: Members merged over the default ``identity`` (``name``, ``version``,
            ``runtime_active``), e.g. the MCP server's own name and protocol.
        env: Environment for tool lookup and the commands; defaults to ``os.environ``.
        command_timeout: Seconds each external command may take.

    Returns:
        The collected data and the collection warnings.
    """
    runtime_active = runtime_stats is not None or open_files is not None
    collector = _Collector(os.environ if env is None else env, command_timeout)
    if confidential:
        data: dict[str, JsonValue] = {
            "identity": _identity(identity, runtime_active),
            "python": _python(detailed=False),
            "os": _os(detailed=False),
        }
        return CollectedContext(data, ())
    data = {
        "identity": _identity(identity, runtime_active),
        "beam": _beam_versions(),
        "python": _python(detailed=True),
        "os": _os(detailed=True),
    }
    toolchain: str | None = None
    if root is not None:
        toolchain = _toolchain(root, collector)
        data["workspace"] = {
            "root": str(root),
            "lean_toolchain": toolchain,
            "lakefile": _lakefile(root, collector),
            "manifest": _manifest(root, collector),
        }
        data["git"] = _git(root, collector)
    data["tools"] = _tools(toolchain, collector)
    if runtime_active:
        runtime: dict[str, JsonValue] = {}
        if runtime_stats is not None:
            runtime["stats"] = _plain_json(runtime_stats, "runtime stats", collector)
        if open_files is not None:
            runtime["open_files"] = _plain_json(open_files, "open files", collector)
        data["runtime"] = runtime
    return CollectedContext(data, tuple(collector.warnings))
