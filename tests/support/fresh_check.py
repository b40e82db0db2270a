"""The fresh check: what a from-scratch batch build of a disk state says about each of its Lean files.

Beam's first promise is that an agent never believes something Lean did not say; the oracle for it (DESIGN §4)
is a fresh batch check of the same disk state: every module compiled from scratch, in import order, with the
toolchain's `lean` into a private output directory (never the project's `.lake`), every file's messages
collected. `Oracle` does that and caches the result by the hash of all sources (a test checks the same disk
state many times). `lean_position` and `normalize` put Beam's diagnostics in the form Lean's batch mode reports
(1-based line, column in code points; olean directories replaced by `LIB_MARK`), so the two compare.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .lake_standin import imports_of

LIB_MARK = "<lib>"
"""What an olean directory is replaced with in message texts, so the oracle's and the project's compare equal."""


# ---- positions and message texts --------------------------------------------------------------------------
def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units (LSP's columns)."""
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def lean_position(text: str, line: int, character: int) -> tuple[int, int]:
    """An LSP position in `text` (0-based line, UTF-16 column) as Lean prints it (1-based line, code points).

    Lean splits lines at `\\n` only. A column in the middle of a surrogate pair or past the end of the line is
    kept as far as it goes (the end of the line).
    """
    lines = text.split("\n")
    if line >= len(lines):
        return line + 1, character
    units = 0
    for points, c in enumerate(lines[line]):
        if units >= character:
            return line + 1, points
        units += 2 if ord(c) > 0xFFFF else 1
    return line + 1, len(lines[line])


def normalize(text: str, lib_dirs: Sequence[Path | str]) -> str:
    """A message text with every olean directory in `lib_dirs` replaced by `LIB_MARK`.

    Import failures name the directory Lean looked in (`object file '<dir>/Truth/Base.olean' of module ...`):
    the project's `.lake/build/lib/lean` for Beam, a private directory for the oracle.
    """
    for d in lib_dirs:
        text = text.replace(str(d), LIB_MARK)
    return text


# ---- the oracle ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Message:
    """One message of a fresh check, where and as Lean's batch mode reports it."""

    severity: str
    """`error`, `warning` or `information`."""
    line: int
    """1-based."""
    column: int
    """In code points."""
    text: str
    """Lean's message text, olean directories replaced by `LIB_MARK`."""

    def show(self) -> str:
        """`line:column: severity: text`, as Lean prints it."""
        return f"{self.line}:{self.column}: {self.severity}: {self.text}"


@dataclasses.dataclass(frozen=True)
class FreshCheck:
    """What a from-scratch batch build of one disk state says about each file (by path under the root)."""

    digest: str
    messages: Mapping[str, tuple[Message, ...]]
    order: tuple[str, ...]
    """The files in the order they were compiled (imports first)."""

    def errors(self, path: str) -> tuple[Message, ...]:
        """The file's error messages."""
        return tuple(m for m in self.messages.get(path, ()) if m.severity == "error")

    def show(self) -> str:
        """Every file's messages, one per line (multi-line texts indented), for failure messages."""
        out = []
        for path in self.order:
            msgs = self.messages[path]
            out.append(f"  {path}: {'no messages' if not msgs else ''}".rstrip())
            out.extend("    " + m.show().replace("\n", "\n      ") for m in msgs)
        return "\n".join(out)


def sources(root: Path) -> dict[str, str]:
    """Every Lean source of a project (outside `.lake` and hidden directories), by path under the root."""
    out = {}
    for p in sorted(root.rglob("*.lean")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        out[rel.as_posix()] = p.read_text(encoding="utf-8")
    return out


def digest_of(files: Mapping[str, str]) -> str:
    """A hash of all sources (paths and texts)."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(json.dumps([path, files[path]]).encode())
    return h.hexdigest()


def import_order(files: Mapping[str, str]) -> list[str]:
    """The files in an order that puts each one's imports (those in `files`) before it; ties by path."""
    by_module = {p.removesuffix(".lean").replace("/", "."): p for p in files}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(path: str) -> None:
        if state.get(path) == 2:
            return
        if state.get(path) == 1:  # an import cycle: Lean reports it; compile in any order
            return
        state[path] = 1
        for mod in imports_of(files[path]):
            if mod in by_module:
                visit(by_module[mod])
        state[path] = 2
        order.append(path)

    for path in sorted(files):
        visit(path)
    return order


class Oracle:
    """The fresh check: every module of a disk state compiled from scratch with `lean`, results cached by digest.

    Each check copies the sources into a new private directory under `work` and compiles them there in import
    order (`lean --json -o X.olean -i X.ilean X.lean`) with `LEAN_PATH` naming only that check's own output
    directory, so nothing of the project's `.lake` (or of another check) can leak in. A module that fails
    writes no olean, so its importers fail too ("object file ... does not exist"): that is what a fresh check
    says. `--json` gives each message's position and text exactly as Lean holds them (the printed form,
    `file:line:col: error(name): text`, puts an error name before the text and has no end for multi-line
    texts); the positions are the same ones Lean prints: 1-based lines, columns in code points.
    """

    def __init__(self, lean: Path, work: Path) -> None:
        """Compile with the `lean` executable, in new directories under `work`."""
        self.lean = lean
        self.work = work
        self.runs = 0
        """How many checks actually compiled (the others were answered from the cache)."""
        self._cache: dict[str, FreshCheck] = {}

    def check(self, root: Path) -> FreshCheck:
        """The fresh check of every source under `root` as it is on disk now (cached by the sources' digest)."""
        return self.check_sources(sources(root))

    def check_sources(self, files: Mapping[str, str]) -> FreshCheck:
        """The fresh check of `files` (paths under a root and their texts)."""
        digest = digest_of(files)
        found = self._cache.get(digest)
        if found is None:
            found = self._cache[digest] = self._compile(files, digest)
        return found

    def _compile(self, files: Mapping[str, str], digest: str) -> FreshCheck:
        self.runs += 1
        base = self.work / f"check{self.runs}-{digest[:12]}"
        src, lib = base / "src", base / "lib"
        for path, text in files.items():
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            (src / path).write_text(text, encoding="utf-8")
            # Lake makes the module's output directory before compiling: a missing import is then reported as
            # a missing object file, as in a project whose build of that module failed.
            (lib / path).parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("LEAN_PATH", "LEAN_SRC_PATH", "LAKE")}
        env["LEAN_PATH"] = str(lib)
        order = import_order(files)
        messages: dict[str, tuple[Message, ...]] = {}
        for path in order:
            stem = (lib / path).with_suffix("")
            proc = subprocess.run(
                [str(self.lean), "--json", "-o", f"{stem}.olean", "-i", f"{stem}.ilean", path],
                cwd=src,
                env=env,
                capture_output=True,
                text=True,
                encoding="utf-8",
                check=False,
            )
            messages[path] = _parse(proc, path, [lib])
        shutil.rmtree(src, ignore_errors=True)
        return FreshCheck(digest, messages, tuple(order))


def _parse(proc: subprocess.CompletedProcess[str], path: str, lib_dirs: Sequence[Path]) -> tuple[Message, ...]:
    out = []
    for raw in proc.stdout.splitlines():
        if not raw.strip():
            continue
        try:
            msg = json.loads(raw)
            pos = msg["pos"]
            out.append(Message(msg["severity"], pos["line"], pos["column"], normalize(msg["data"], lib_dirs)))
        except (ValueError, KeyError, TypeError):
            out.append(Message("error", 1, 0, f"(oracle) unreadable lean output: {raw!r}"))
    if proc.returncode != 0 and not any(m.severity == "error" for m in out):
        # Lean failed without saying why (a crash?): the file is not clean, whatever Beam says.
        tail = proc.stderr.strip()[-2000:]
        out.append(Message("error", 1, 0, f"(oracle) lean exited {proc.returncode} on {path}: {tail}"))
    return tuple(out)
