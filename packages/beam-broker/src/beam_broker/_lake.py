"""Running Lake for a workspace, and where Lake puts a module's source and build artifacts.

Owns the one way Beam runs Lake (`run`: a process group of its own, output redacted, lines streamed, the whole
group killed when the caller is cancelled or fails while Lake runs) and the layout rules (`Layout`, read from the
lakefile by `read_layout`): a module's source file under its package's `srcDir` (the root by default) and its
artifacts under its `buildDir` (`.lake/build` by default); every mapping between a module name and a file goes
through `Layout`. Module names reach Lake's command line only after `beam_lsp.project.is_module_name` accepted
them: Lake has no end-of-options marker for `lake build` (its `--` hands every later word to the subcommand as
extra arguments and builds the default targets instead). It never writes sources.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from beam_lsp import kill_tree
from beam_lsp.project import LAKEFILES, is_module_name, module_name
from beam_lsp.redaction import Redactor

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's chosen TOML reader before 3.11
    import tomli as tomllib


log = logging.getLogger("beam_broker")

OUTPUT_TAIL_LINES = 40
"""Lines of Lake's output kept for an error's data."""


DEFAULT_BUILD_DIR = ".lake/build"
"""Lake's `buildDir` when the lakefile sets none."""
MAX_LAKEFILE_BYTES = 1 << 20
"""A lakefile larger than this is not read (the default layout is assumed): a real one is a few KiB."""

_LEAN_COMMENTS = re.compile(r"/-.*?-/|--[^\n]*", re.DOTALL)
_LEAN_SETTING = re.compile(r'\b(package|lean_lib|lean_exe)\b|\b(srcDir|buildDir)\s*:=\s*"([^"\\\n]*)"')


def _parts(name: str) -> list[str]:
    return [part.removeprefix("«").removesuffix("»") for part in name.split(".")]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a Lake package keeps its modules' sources and build artifacts (`read_layout`).

    Every mapping between a module name and a file goes through here: a module's source, its `.olean` and other
    artifacts, and the module a source file under the root defines.
    """

    root: Path
    source_dirs: tuple[Path, ...]
    """The directories module paths are relative to (Lake's `srcDir` of each `lean_lib`/`lean_exe`, and of the
    package): the first one holding a module's file has it, the first one of all when none does."""
    build_dir: Path
    """Lake's `buildDir` (default `.lake/build`): `.olean` files are under `lib/lean`, C files under `ir`."""

    @classmethod
    def default(cls, root: str | Path) -> Layout:
        """Lake's defaults: sources under the root, artifacts under `.lake/build`."""
        return cls(Path(root), (Path(root),), Path(root, DEFAULT_BUILD_DIR))

    def source_path(self, name: str) -> Path:
        """Where a module's source file is (whether or not it exists)."""
        candidates = [Path(d, *_parts(name)).with_suffix(".lean") for d in self.source_dirs]
        if len(candidates) > 1:
            for path in candidates:
                if path.is_file():
                    return path
        return candidates[0]

    def module_file(self, name: str) -> Path | None:
        """The source file of a workspace module (`Foo.«Bar Baz»` -> `<srcDir>/Foo/Bar Baz.lean`), if it exists.

        None for a name that is not a module name (it could be read as an option) and for a module without a
        source file in the package (one from a dependency or the toolchain).
        """
        if not is_module_name(name):
            return None
        path = self.source_path(name)
        return path if path.is_file() else None

    def module_of(self, path: Path) -> str | None:
        """The module a `.lean` file defines: its path under the innermost source directory holding it, else None.

        Lexical, as `beam_lsp.project.module_name` (nothing is resolved). A file outside every source directory
        is no module of the package (Lean names it `«external:<uri>»`).
        """
        for directory in sorted(self.source_dirs, key=lambda d: len(d.parts), reverse=True):
            name = module_name(directory, path)
            if name is not None:
                return name
        return None

    def olean_path(self, name: str) -> Path:
        """The `.olean` a module's importers load (whether or not it exists)."""
        return self.build_dir.joinpath("lib", "lean", *_parts(name)).with_suffix(".olean")

    def artifact_paths(self, module: str) -> dict[str, str]:
        """The build artifacts Lake wrote for a module (only paths that exist)."""
        olean = self.olean_path(module)
        rel = olean.relative_to(self.build_dir / "lib" / "lean").with_suffix("")
        lib = olean.parent
        ir = self.build_dir / "ir" / rel.parent
        stem = rel.name
        candidates: dict[str, list[Path]] = {
            "olean": [olean],
            "ilean": [lib / f"{stem}.ilean"],
            "c": [ir / f"{stem}.c"],
            "trace": [lib / f"{stem}.trace", lib / f"{stem}.olean.trace"],
            "olean_server": [lib / f"{stem}.olean.server"],
            "olean_private": [lib / f"{stem}.olean.private"],
            "ir": [lib / f"{stem}.ir", ir / f"{stem}.ir"],
            "bc": [ir / f"{stem}.bc"],
        }
        out = {}
        for key, paths in candidates.items():
            for p in paths:
                if p.is_file():
                    out[key] = str(p)
                    break
        return out


def read_layout(root: str | Path) -> Layout:
    """The layout a project's lakefile sets (`srcDir`, `buildDir`), Lake's defaults where it sets none.

    `lakefile.lean` first, as Lake reads it when both exist. `lakefile.toml` is parsed as TOML: the package's
    `srcDir` and `buildDir`, and each `[[lean_lib]]`/`[[lean_exe]]` `srcDir` (relative to the package's, as Lake
    takes it). `lakefile.lean` is Lean code Beam does not run: a plain pattern reads each `srcDir := "..."` and
    `buildDir := "..."` string literal outside comments, after the `package`, `lean_lib` or `lean_exe` it follows;
    a directory computed by code is not seen (the defaults stay). An unreadable or malformed lakefile gives the
    defaults, as a missing one does.
    """
    base = Path(root)
    package: str | None = "."
    build: str | None = None
    targets: list[str | None] = []
    lean, toml = (next(base / name for name in LAKEFILES if name.endswith(suffix)) for suffix in (".lean", ".toml"))
    if lean.is_file():
        text = _read_lakefile(lean)
        in_package = True
        for match in _LEAN_SETTING.finditer(_LEAN_COMMENTS.sub(" ", text or "")):
            if match.group(1) is not None:  # a declaration: what follows sets its fields
                in_package = match.group(1) == "package"
                if not in_package:
                    targets.append(".")
            elif match.group(2) == "buildDir":
                build = match.group(3) if in_package else build
            elif in_package:
                package = match.group(3) or "."
            else:
                targets[-1] = match.group(3) or "."
    elif toml.is_file():
        text = _read_lakefile(toml)
        try:
            config = tomllib.loads(text) if text is not None else {}
        except tomllib.TOMLDecodeError as exc:
            log.info("%s: cannot read the layout from lakefile.toml, taking Lake's defaults: %s", base, exc)
            config = {}
        package = _string(config.get("srcDir"), ".")
        build = _string(config.get("buildDir"), None)
        for kind in ("lean_lib", "lean_exe"):
            entries = config.get(kind)
            listed = entries if isinstance(entries, list) else []
            targets.extend(_string(entry.get("srcDir"), ".") for entry in listed if isinstance(entry, dict))
    source = _under(base, package)
    dirs = [_under(source, d) for d in targets] or [source]
    return Layout(base, tuple(dict.fromkeys(dirs)), _under(base, build or DEFAULT_BUILD_DIR))


def _read_lakefile(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_LAKEFILE_BYTES + 1)
    except OSError as exc:
        log.info("%s: cannot read it, taking Lake's default layout: %s", path, exc)
        return None
    if len(data) > MAX_LAKEFILE_BYTES:
        return None
    return data.decode("utf-8", "replace")


def _string(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) and value else default


def _under(base: Path, rel: str | None) -> Path:
    """`rel` taken from `base`, normalized lexically (`./src` -> `src`, `.` -> `base` itself)."""
    return Path(os.path.normpath(base / (rel or ".")))


class Layouts:
    """The layout of one workspace, read again only when one of its lakefiles changes (`stat`)."""

    def __init__(self, root: str | Path) -> None:
        """Nothing read yet."""
        self.root = Path(root)
        self._keys: tuple[object, ...] | None = None
        self._layout = Layout.default(root)

    def get(self) -> Layout:
        """The current layout."""
        keys = tuple(_key(self.root / name) for name in LAKEFILES)
        if keys != self._keys:
            self._layout = read_layout(self.root)
            self._keys = keys
        return self._layout


def _key(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


async def run(
    args: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    redactor: Redactor,
    on_line: Callable[[str], None] | None = None,
) -> tuple[int, list[str]]:
    """Run Lake (`args`, Lake first) in a new process group and return its exit code and last output lines.

    Each non-empty stdout line goes to `on_line` as it arrives (redacted); stderr is kept, redacted, for the
    tail. Unless Lake exits by itself, its whole group is killed (a cancelled caller too).

    Raises:
        OSError: Lake could not be started.
    """
    lines: list[str] = []
    # Never the server's stdin: over stdio that is the MCP client's stream.
    proc = await anyio.open_process(
        list(args), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        buf = b""

        async def drain_stderr() -> None:
            assert proc.stderr is not None
            # By line, not by read: a secret written in two pieces arrives in two reads and must be matched whole.
            pending = b""
            async for chunk in proc.stderr:
                pending += chunk
                *complete, pending = pending.split(b"\n")
                lines.extend(redactor.redact(raw.decode("utf-8", "replace")).rstrip("\r") for raw in complete)
            if pending:
                lines.append(redactor.redact(pending.decode("utf-8", "replace")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_stderr)
            async for chunk in proc.stdout:
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for raw in complete:
                    line = redactor.redact(raw.decode("utf-8", "replace")).rstrip()
                    lines.append(line)
                    if on_line is not None and line.strip():
                        on_line(line.strip())
            if buf:
                lines.append(redactor.redact(buf.decode("utf-8", "replace")))
        code = await proc.wait()
    finally:
        if proc.returncode is None:  # cancelled or failed while Lake runs; not yet reaped, so the group is ours
            kill_tree(proc.pid)
        with anyio.CancelScope(shield=True):
            await proc.aclose()
    return code, lines[-OUTPUT_TAIL_LINES:]


async def check_built(
    root: str, command: Callable[[], str | None], env: Mapping[str, str], redactor: Redactor, modules: list[str]
) -> int | None:
    """Ask Lake whether modules are built: `lake build --no-build MODULES...` in `root`.

    `command` gives the Lake to run (None: there is none; the caller resolves it, so this module needs nothing of
    the broker's configuration and the mirror rule can read `Layout` without an import cycle).

    Returns Lake's exit code (0: built from their current sources, and so are their imports; 3: something would
    need building), or None when there is no Lake to ask.
    """
    lake = command()
    if lake is None:
        return None
    try:
        code, _ = await run([lake, "build", "--no-build", *modules], cwd=root, env=env, redactor=redactor)
    except OSError as exc:
        log.info("%s: cannot ask Lake whether imports are built: %s", root, redactor.redact(str(exc)))
        return None
    return code
