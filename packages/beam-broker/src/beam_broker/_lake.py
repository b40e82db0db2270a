"""Running Lake for a workspace, and where Lake puts a module's source and build artifacts.

Owns the one way Beam runs Lake (`run`: a process group of its own, output redacted, lines streamed, the whole
group killed when the caller is cancelled or fails while Lake runs) and the layout rules: a module's source file
under the root and its artifacts under `.lake/build`. Module names reach Lake's command line only after
`beam_lsp.project.is_module_name` accepted them: Lake has no end-of-options marker for `lake build` (its `--`
hands every later word to the subcommand as extra arguments and builds the default targets instead). It never
writes sources.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from beam_lsp import kill_tree
from beam_lsp.project import is_module_name
from beam_lsp.redaction import Redactor

from .config import BrokerConfig, lake_command
from .errors import BrokerError

log = logging.getLogger("beam_broker")

OUTPUT_TAIL_LINES = 40
"""Lines of Lake's output kept for an error's data."""


def module_file(root: str | Path, name: str) -> Path | None:
    """The source file of a workspace module (`Foo.«Bar Baz»` -> `<root>/Foo/Bar Baz.lean`), if it exists.

    None for a name that is not a module name (it could be read as an option) and for a module without a source
    file under the root (one from a dependency or the toolchain).
    """
    if not is_module_name(name):
        return None
    path = source_path(root, name)
    return path if path.is_file() else None


def source_path(root: str | Path, name: str) -> Path:
    """Where a module's source file is under the root (whether or not it exists)."""
    parts = [part.removeprefix("«").removesuffix("»") for part in name.split(".")]
    return Path(root, *parts).with_suffix(".lean")


def build_dir(root: str | Path) -> Path:
    """Where Lake puts the workspace package's build artifacts (Lake's default `buildDir`)."""
    return Path(root, ".lake", "build")


def olean_path(root: str | Path, name: str) -> Path:
    """The `.olean` a module's importers load (whether or not it exists)."""
    parts = [part.removeprefix("«").removesuffix("»") for part in name.split(".")]
    return build_dir(root).joinpath("lib", "lean", *parts).with_suffix(".olean")


def artifact_paths(root: str, module: str) -> dict[str, str]:
    """The build artifacts Lake wrote for a module (only paths that exist)."""
    olean = olean_path(root, module)
    rel = olean.relative_to(build_dir(root) / "lib" / "lean").with_suffix("")
    lib = olean.parent
    ir = build_dir(root) / "ir" / rel.parent
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
    proc = await anyio.open_process(list(args), cwd=cwd, env=dict(env), stdin=None, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        buf = b""

        async def drain_stderr() -> None:
            assert proc.stderr is not None
            async for chunk in proc.stderr:
                lines.extend(redactor.redact(chunk.decode("utf-8", "replace")).splitlines())

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
    root: str, config: BrokerConfig, env: Mapping[str, str], redactor: Redactor, modules: list[str]
) -> int | None:
    """Ask Lake whether modules are built: `lake build --no-build MODULES...` in `root`.

    Returns Lake's exit code (0: built from their current sources, and so are their imports; 3: something would
    need building), or None when there is no Lake to ask.
    """
    try:
        args = [lake_command(config, env, root), "build", "--no-build", *modules]
    except BrokerError:
        return None
    try:
        code, _ = await run(args, cwd=root, env=env, redactor=redactor)
    except OSError as exc:
        log.info("%s: cannot ask Lake whether imports are built: %s", root, redactor.redact(str(exc)))
        return None
    return code
