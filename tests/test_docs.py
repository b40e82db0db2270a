"""The README's and docs/'s runnable blocks run as a reader would run them (`tests/support/doc_blocks.py`).

MCP client configurations (`json`, `toml`) start the server they name with only the environment they give it (as
a client that passes a minimal environment would) and must answer `server/discover`; `console` and `sh` blocks run
on the real Lean lane in a checkout-shaped directory (`.venv` is this interpreter's environment,
`tests/fixtures/demo` a copy of the demo project) and must exit 0 (a console command may fail when the page shows
its status with `echo $?`), each console command printing the lines the page shows below it. The install block
runs in the `standalone` lane (`tests/standalone.sh`): it creates a venv and downloads the packages' dependencies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.support import modern_meta
from tests.support.doc_blocks import ROOT, Block, documents, runnable_blocks
from tests.support.fixtures import lean_toolchain
from tests.support.toolchain import Toolchain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

BLOCKS = [block for page in documents() for block in runnable_blocks(page)]
CHECKOUT = "/path/to/beam"
PROJECT = "/path/to/your/lean/project"
VENV = Path(sys.prefix)
"""The environment running the tests: it has the four packages installed, as the Quickstart's `.venv` does."""
EXPECTED = {
    "README.md": {"install": 1, "json": 1, "console": 1},
    "docs/cli.md": {"console": 1},
    "docs/mcp-clients.md": {"json": 5, "toml": 1},
    "docs/mcp-http.md": {"sh": 1},
}
"""How many runnable blocks of each kind a page has at least: a marker that goes missing fails here."""
__all__ = ["lean_toolchain"]  # the fixture


def _of(*kinds: str) -> list[Block]:
    return [block for block in BLOCKS if block.kind in kinds]


def test_the_pages_keep_their_runnable_blocks() -> None:
    for page, kinds in EXPECTED.items():
        for kind, least in kinds.items():
            found = [b for b in BLOCKS if b.path == page and b.kind == kind]
            assert len(found) >= least, (page, kind, len(found))


def test_the_readme_opens_with_the_main_job_and_the_tests() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == [
        "bash scripts/tox.sh -e demo",
        "bash scripts/tox.sh -m ci",
    ]
    assert readme.index("## Quickstart") < readme.index("## Test lanes")


def test_a_marker_must_stand_above_a_block_of_a_known_kind(tmp_path: Path) -> None:
    page = ROOT / "docs" / f"{tmp_path.name}.md"  # inside the repository, where pages live
    try:
        page.write_text("<!-- runnable -->\n```python\nprint(1)\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="no runner for 'python' blocks"):
            runnable_blocks(page)
        page.write_text("<!-- runnable -->\n\n```sh\ntrue\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="must be right above a fenced block"):
            runnable_blocks(page)
    finally:
        page.unlink(missing_ok=True)


def _servers(block: Block) -> dict[str, dict[str, Any]]:
    """The stdio servers of a configuration: Codex's `mcp_servers`, VS Code's `servers` (typed), else `mcpServers`."""
    if block.kind == "toml":
        return dict(tomllib.loads(block.text)["mcp_servers"])
    config = json.loads(block.text)
    if "servers" in config:  # VS Code: every server says its transport
        assert all(server["type"] == "stdio" for server in config["servers"].values()), block.id
        return dict(config["servers"])
    return dict(config["mcpServers"])


def _command(name: str) -> str:
    """A configured command as the reader's machine would resolve it: the checkout's venv is this one."""
    if name.startswith(f"{CHECKOUT}/.venv/bin/"):
        return str(VENV / "bin" / name.rsplit("/", 1)[1])
    return name


@pytest.mark.parametrize("block", _of("json", "toml"), ids=lambda b: b.id)
def test_each_client_configuration_starts_a_server_that_answers(block: Block, tmp_path: Path) -> None:
    servers = _servers(block)
    assert servers, block.id
    for name, server in servers.items():
        command = _command(server["command"])
        assert Path(command).is_absolute(), f"{block.id}: {name} needs an absolute command to work from a venv"
        env = {"HOME": str(tmp_path), **server.get("env", {})}  # what a client with a minimal environment passes
        env = {key: value.replace(PROJECT, str(tmp_path)) for key, value in env.items()}
        args = [arg.replace(PROJECT, str(tmp_path)) for arg in server.get("args", [])]
        discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}}
        done = subprocess.run(
            [command, *args],
            input=json.dumps(discover) + "\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (block.id, name, done.stderr)
        answer = json.loads(done.stdout.splitlines()[0])
        assert answer["result"]["supportedVersions"], (block.id, name, answer)


def _checkout(tmp_path: Path) -> Path:
    """A directory shaped like the reader's checkout: `.venv` (this environment) and the demo project."""
    checkout = tmp_path / "beam"
    (checkout / "tests" / "fixtures").mkdir(parents=True)
    (checkout / ".venv").symlink_to(VENV)
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo", checkout / "tests" / "fixtures" / "demo")
    return checkout


MARK = "@@beam-doc-command"
"""What the console script writes to stdout and stderr before each command, to cut them into each command's part."""
RC = "@@beam-doc-status"
"""What it writes to stderr after each command, with the command's exit status."""


def _console_script(block: Block) -> str:
    """The block's commands in one bash session, each between markers; `lean-beam` prints text as on a terminal.

    `echo $?` prints the exit status of the command before it, as in the reader's shell.
    """
    lines = ["__rc=0"]
    for n, command in enumerate(block.commands()):
        if command.startswith("lean-beam "):
            command = "lean-beam --human " + command.removeprefix("lean-beam ")
        command = "echo $__rc" if command == "echo $?" else command
        lines += [f"echo {MARK} {n}; echo {MARK} {n} >&2", command, f"__rc=$?; echo {RC} $__rc >&2"]
    return "\n".join(lines) + "\n"


def _parts(stream: str) -> list[str]:
    return [part.split("\n", 1)[1] if "\n" in part else "" for part in stream.split(f"{MARK} ")[1:]]


def _matches(shown: str, printed: str) -> bool:
    """A sample line against a printed one: `...` stands for any text."""
    return re.fullmatch(".*".join(re.escape(part) for part in shown.split("...")), printed) is not None


def _check_console(block: Block, stdout: str, stderr: str, checkout: Path) -> None:
    """Each command exits 0 (or the `echo $?` after it shows its status) and prints the lines the page shows.

    Compared: stdout, then the `lean-beam: ` lines of stderr (errors); a shown line starting with `beam: ` is a note
    on stderr (as the terminal shows it) and is not compared, nor is a command the page shows no lines for.
    """
    samples = block.samples()
    outs, errs = _parts(stdout), _parts(stderr)
    assert len(outs) == len(errs) == len(samples), (block.id, stdout[-4000:], stderr[-4000:])
    for n, ((command, shown), out, err) in enumerate(zip(samples, outs, errs, strict=True)):
        *err_lines, status = err.rstrip("\n").split("\n")
        checked = n + 1 < len(samples) and samples[n + 1][0] == "echo $?"
        assert status == f"{RC} 0" or checked, (block.id, command, status, out[-4000:], err[-4000:])
        wanted = [line for line in shown if not line.startswith("beam: ")]
        if not wanted:
            continue
        errors = [line for line in err_lines if line.startswith("lean-beam: ")]
        lines = [*out.rstrip("\n").splitlines(), *errors]
        lines = [line.replace(str(checkout), CHECKOUT) for line in lines]
        assert len(lines) == len(wanted) and all(map(_matches, wanted, lines)), (block.id, command, wanted, lines)


def _stop_daemons(block: Block, checkout: Path, env: dict[str, str]) -> None:
    """A block that starts a daemon and failed before stopping it leaves none behind."""
    if block.kind == "console" and any("daemon start" in command for command in block.commands()):
        demo = checkout / "tests" / "fixtures" / "demo"
        subprocess.run(["lean-beam", "daemon", "stop"], cwd=demo, env=env, capture_output=True, timeout=120)


@pytest.mark.lean
@pytest.mark.parametrize("block", _of("console", "sh"), ids=lambda b: b.id)
def test_each_shell_block_runs(block: Block, tmp_path: Path, lean_toolchain: Toolchain) -> None:
    checkout = _checkout(tmp_path)
    script = block.text if block.kind == "sh" else _console_script(block)
    script = script.replace(CHECKOUT, str(checkout)).replace(PROJECT, str(checkout / "tests" / "fixtures" / "demo"))
    env = {**lean_toolchain.env(), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env["PATH"]])  # for the clean-up's `lean-beam` only
    try:
        done = subprocess.run(
            ["bash", "-e", "-c", script] if block.kind == "sh" else ["bash", "-c", script],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        _stop_daemons(block, checkout, env)
    assert done.returncode == 0, (block.id, done.stdout[-4000:], done.stderr[-4000:])
    assert os.listdir(checkout / "tests" / "fixtures" / "demo"), block.id
    if block.kind == "console":
        _check_console(block, done.stdout, done.stderr, checkout)


def test_a_console_sample_is_compared_line_by_line_with_dots_for_any_text() -> None:
    text = "$ cd d\n$ lean-beam save A.lean\nA.lean: saved to .../A.olean\n$ lean-beam sync B.lean\n$ echo $?\n1\n"
    block = Block("x.md", 1, "console", text)
    assert block.samples() == [
        ("cd d", []),
        ("lean-beam save A.lean", ["A.lean: saved to .../A.olean"]),
        ("lean-beam sync B.lean", []),
        ("echo $?", ["1"]),
    ]
    script = _console_script(block).splitlines()
    assert script[5] == "lean-beam --human save A.lean" and script[-2] == "echo $__rc"
    out = f"{MARK} 0\n{MARK} 1\nA.lean: saved to /tmp/beam/A.olean\n\n{MARK} 2\n{MARK} 3\n1\n"

    def err(*status: int, error: str = "") -> str:
        return "".join(
            f"{MARK} {n}\nbeam: progress\n{error if n == 1 else ''}{RC} {rc}\n" for n, rc in enumerate(status)
        )

    _check_console(block, out, err(0, 0, 1, 0), Path("/tmp/beam"))
    with pytest.raises(AssertionError):
        _check_console(block, out.replace("saved to", "saved as"), err(0, 0, 1, 0), Path("/tmp/beam"))
    with pytest.raises(AssertionError):
        _check_console(block, out.replace("A.olean\n", "A.olean\nmore\n"), err(0, 0, 1, 0), Path("/tmp/beam"))
    with pytest.raises(AssertionError):  # an error line is compared too
        _check_console(block, out, err(0, 0, 1, 0, error="lean-beam: error: no\n"), Path("/tmp/beam"))
    with pytest.raises(AssertionError):  # a failure that no `echo $?` shows
        _check_console(block, out, err(0, 1, 1, 0), Path("/tmp/beam"))


def _python_block(readme: str) -> str:
    text = (ROOT / readme).read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, readme
    return blocks[0]


def test_the_mcp_readme_s_embedding_example_answers_beam_version(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _python_block("packages/beam-mcp/README.md")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["id"] == 1 and answer["result"]["structuredContent"]["name"] == "lean-beam-mcp"


def test_the_feedback_readme_s_example_writes_the_zip_it_prints(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    code = _python_block("packages/beam-feedback/README.md").replace("/path/to/lean/project", str(root))
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    bundle_dir, zip_path = done.stdout.splitlines()[-1].split(" ")
    assert bundle_dir == "None" and zip_path.startswith("~/project/.beam/feedback/") and zip_path.endswith(".zip")
    assert (tmp_path / zip_path.removeprefix("~/")).is_file()
    shown = next(line for line in code.splitlines() if line.startswith("print(result.bundle_dir"))
    assert "  # None ~/" in shown and shown.endswith(".zip"), shown  # what the README says it prints
