"""Shell completion scripts generated from the `lean-beam` parser, exercised in bash, zsh and fish.

Each shell completes a few command lines in a directory with a Lean file, a subdirectory and another file; a shell
that is not installed skips its test (bash is everywhere; zsh and fish are in Debian's `zsh` and `fish`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from beam_broker import OPERATIONS
from beam_broker import cli as beam_cli
from beam_broker._cli import completion
from beam_broker._cli.commands import command_name

TIMEOUT = 30
ZSH_CAPTURE = r"""
# zsh -f THIS SCRIPT OUT LINE: press Tab after LINE in an interactive zsh with SCRIPT; candidates go to OUT.
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT='> '; autoload -U compinit; compinit -u -d ${2}.dump; source $1"
zpty -w z 'compadd() { local -a h; builtin compadd -A h "$@"; print -rl -- $h >> '"$2"'; builtin compadd "$@"; }'
zpty -w z 'comppostfuncs=(_t_done); _t_done() { print -u2 -- "COMPLETED-$((6*7))"; }'
zpty -w z 'print READY-$((1+1))'
zpty -r -m z out '*READY-2*'
zpty -w -n z "$3"$'\t'
zpty -r -m z out '*COMPLETED-42*'
zpty -d z
"""
CASES = [
    ("lean-beam sy", {"sync"}),
    ("lean-beam sync ", {"A.lean", "Sub/"}),
    ("lean-beam sync A.lean --diag", {"--diagnostic-scope", "--diagnostics-in-result"}),
    ("lean-beam sync --diagnostic-scope ", {"errors", "all"}),
    ("lean-beam --root /tmp hov", {"hover"}),
    ("lean-beam goals A.lean:1:0 --mode ", {"before", "after"}),
    ("lean-beam daemon st", {"start", "stop", "status"}),
    ("lean-beam completion ", {"bash", "zsh", "fish"}),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Sub").mkdir()
    (tmp_path / "Sub" / "B.lean").write_text("", encoding="utf-8")
    (tmp_path / "A.lean").write_text("", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    return tmp_path


def script(shell: str, where: Path) -> Path:
    path = where.parent / f"lean-beam.{shell}"
    path.write_text(completion.script(beam_cli.build_parser(), shell), encoding="utf-8")
    return path


def shell_or_skip(name: str) -> str:
    """The shell's path; a skip where it is missing, a failure where CI installed the shells (`.ci/run`)."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("BEAM_SHELLS_REQUIRED") == "1":
            pytest.fail(f"{name} is not installed, and BEAM_SHELLS_REQUIRED=1 says it must be")
        pytest.skip(f"{name} is not installed (.ci/run installs it: apt-get install -y {name})")
    return found


def test_the_tree_is_read_from_the_parser() -> None:
    tree = completion.read(beam_cli.build_parser())
    names = [c.name for c in tree.commands]
    daemon = ["stats", "daemon", "serve", "status", "stop", "recover"]
    assert names == [*(command_name(spec) for spec in OPERATIONS), *daemon, "doctor", "completion"]
    by_name = {c.name: c for c in tree.commands}
    sync = {f: o for o in by_name["sync"].options for f in o.flags}
    assert sync["--diagnostic-scope"].values == "choices" and sync["--diagnostic-scope"].choices == ("errors", "all")
    assert sync["--root"].values == "dir" and sync["--lean-cmd"].values == "free" and sync["-q"].values == "none"
    assert by_name["sync"].argument == "lean" and by_name["completion"].argument == "choices"
    todo = {f: o for o in by_name["todo"].options for f in o.flags}
    assert todo["--kinds"].choices == ("sorry", "hole", "diagnostic", "code_action", "incomplete_proof")
    serve = next(c for c in by_name["daemon"].commands if c.name == "serve")
    assert not [o for o in serve.options if "--ready-fd" in o.flags]  # hidden options stay hidden
    assert not [o for o in by_name["serve"].options if "--ready-fd" in o.flags]
    with pytest.raises(ValueError, match="no completion"):
        completion.script(beam_cli.build_parser(), "tcsh")


def test_every_script_names_every_command() -> None:
    parser = beam_cli.build_parser()
    for shell in ("bash", "zsh", "fish"):
        text = completion.script(parser, shell)
        assert f"completion {shell}" in text
        for spec in OPERATIONS:
            assert command_name(spec) in text


def test_the_completion_command_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["completion", "fish"]) == 0
    assert capsys.readouterr().out == completion.script(beam_cli.build_parser(), "fish")
    assert beam_cli.main(["completion", "ksh"]) == 2


def test_bash_completes_commands_options_values_and_lean_files(project: Path) -> None:
    bash = shell_or_skip("bash")
    source = script("bash", project)
    driver = [f"source {source}"]
    for line, _ in CASES:
        words = line.split(" ")
        quoted = " ".join(f"'{w}'" for w in words)
        driver.append(f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=(); _lean_beam")
        driver.append('printf "%s\\n" "${COMPREPLY[@]}"; echo "--end--"')
    out = subprocess.run(
        [bash, "--norc", "-c", "\n".join(driver)], cwd=project, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert out.returncode == 0, out.stderr
    answers = out.stdout.split("--end--\n")
    for (line, expected), answer in zip(CASES, answers, strict=False):
        got = {w + ("/" if (project / w).is_dir() and not w.endswith("/") else "") for w in answer.split()}
        assert got == expected, line


def test_fish_completes_commands_options_values_and_lean_files(project: Path) -> None:
    fish = shell_or_skip("fish")
    source = script("fish", project)
    driver = [f"source {source}"]
    for line, _ in CASES:
        driver.append(f"complete -C '{line}'; echo --end--")
    out = subprocess.run([fish, "-c", "\n".join(driver)], cwd=project, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    answers = out.stdout.split("--end--\n")
    for (line, expected), answer in zip(CASES, answers, strict=False):
        got = {row.split("\t")[0] for row in answer.splitlines()}
        assert expected <= got and not {"notes.txt", "help"} & got, line


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_zsh_completes_commands_options_values_and_lean_files(project: Path, line: str, expected: set[str]) -> None:
    zsh = shell_or_skip("zsh")
    source = script("zsh", project)
    harness = project.parent / "capture.zsh"
    harness.write_text(ZSH_CAPTURE, encoding="utf-8")
    out_file = project.parent / "candidates"
    out_file.unlink(missing_ok=True)
    subprocess.run(
        [zsh, "-f", str(harness), str(source), str(out_file), line], cwd=project, timeout=TIMEOUT, check=True
    )
    got = set(out_file.read_text(encoding="utf-8").split())
    assert {w.rstrip("/") for w in expected} <= got and "notes.txt" not in got
