"""`lean-beam doctor`: every check passing and failing, with its hint, and the exit status that sums them up."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from beam_broker import cli as beam_cli
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

from .support import Cli, fake_lake

FAKE_LEAN_BIN = """#!{python}
import sys
if sys.argv[1:] == ["--version"]:
    print("Lean (version {version}, x86_64-unknown-linux-gnu, fake)")
    sys.exit(0)
sys.exit(3)
"""


@pytest.fixture
def setup(tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake-lane project with `lake` and `lean` (4.35.0) on PATH and the fake Lean server as the command."""
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := ERROR_HERE\n"})
    env = fake_lake(tmp_path / "bin")
    lean_bin(tmp_path / "bin", "4.35.0")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(state_dir))
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", shlex.join(fake_cmd()))
    return root


def lean_bin(directory: Path, version: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lean = directory / "lean"
    lean.write_text(FAKE_LEAN_BIN.format(python=sys.executable, version=version), encoding="utf-8")
    lean.chmod(0o755)


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = beam_cli.main(["--json", "doctor", *argv])
    out, err = capsys.readouterr()
    report = json.loads(out)
    return code, {c["name"]: c for c in report["checks"]} | {"ok": report["ok"]}, err


def test_every_check_passes_in_a_working_setup(setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, checks, err = doctor(capsys)
    assert code == beam_cli.EXIT_OK and checks.pop("ok") is True
    assert {name: c["status"] for name, c in checks.items()} == {
        "Lean server command": "ok",
        "lake": "ok",
        "lean": "ok",
        "project root": "ok",
        "toolchain": "ok",
        "daemon socket directory": "ok",
        "Lean server": "ok",
    }
    assert "(from BEAM_LEAN_SERVER_CMD)" in checks["Lean server command"]["detail"]
    assert checks["project root"]["detail"] == f"{setup} (lean-toolchain)"
    assert "Lean (version 4.35.0" in checks["toolchain"]["detail"]
    assert "no daemon runs" in checks["daemon socket directory"]["detail"]
    assert (
        "synced a scratch file" in checks["Lean server"]["detail"] and "(no errors)" in checks["Lean server"]["detail"]
    )
    assert "doctor: starting Lean for a scratch file" in err
    assert not (setup / ".beam").exists()  # the scratch file and the directory made for it are gone


def test_a_named_file_is_synced_and_its_errors_do_not_fail_the_check(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks, _ = doctor(capsys, "A.lean")
    assert code == 0 and checks["Lean server"]["detail"].startswith("started and synced A.lean in ")
    assert checks["Lean server"]["detail"].endswith("(1 error)")


def test_without_lean_every_check_says_what_is_missing_and_doctor_exits_3(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": ""})
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(state_dir))
    monkeypatch.delenv("BEAM_LEAN_SERVER_CMD", raising=False)
    assert beam_cli.main(["--human", "doctor"]) == beam_cli.EXIT_SETUP == 3
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"fail  Lean server command +no Lean server command: install Lean with elan", lines[0])
    assert lines[1].strip().startswith("hint: install Lean with elan")
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == [
        "fail", "fail", "fail", "ok", "skip", "ok", "skip", "3",
    ]  # fmt: skip
    assert lines[-1] == "3 checks failed"


def test_a_configured_command_that_is_not_an_executable_fails(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", "/nonexistent/lean-server --stdio")
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["Lean server command"]["status"] == "fail"
    assert "is not an executable" in checks["Lean server command"]["detail"]
    assert checks["Lean server"]["status"] == "skip"


def test_a_toolchain_other_than_the_projects_fails_with_a_hint(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lean_bin(tmp_path / "bin", "4.30.0")
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["toolchain"]["status"] == "fail"
    assert "lean-toolchain asks for leanprover/lean4:v4.35.0" in checks["toolchain"]["detail"]
    assert "elan" in checks["toolchain"]["hint"]


def test_a_lean_that_cannot_say_its_version_fails(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bin" / "lean").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    code, checks, _ = doctor(capsys)
    assert code == 3 and "exited 1" in checks["toolchain"]["detail"]


def test_outside_a_project_the_root_fails_and_lean_is_not_started(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["project root"]["status"] == "fail" and "--root" in checks["project root"]["hint"]
    assert checks["Lean server"] == {"name": "Lean server", "status": "skip", "detail": "no project root"}
    code, checks, _ = doctor(capsys, "--root", str(tmp_path))
    assert code == 3 and "has none of" in checks["project root"]["detail"]
    code, checks, _ = doctor(capsys, str(setup / "A.lean"))  # a file of a project, from outside it
    assert code == 3 and f"is in the Lean project {setup}: run lean-beam there" in checks["project root"]["detail"]


def test_an_unusable_socket_directory_fails_with_a_hint(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("HOME", os.devnull)  # ~/.cache/beam cannot be made under a device
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["daemon socket directory"]["status"] == "fail"
    assert "XDG_RUNTIME_DIR" in checks["daemon socket directory"]["hint"]
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    code, checks, _ = doctor(capsys)
    assert code == 3 and "longer than a unix socket path may be" in checks["daemon socket directory"]["detail"]


def test_a_lean_server_that_does_not_start_or_answer_fails(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", shlex.join(fake_cmd({"crash_on": {"method": "initialize"}})))
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["Lean server"]["detail"].startswith("runtimeSetup: ")
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", shlex.join(fake_cmd({"stall": ["textDocument/waitForDiagnostics"]})))
    code, checks, _ = doctor(capsys, "--timeout", "0.5")
    assert code == 3 and checks["Lean server"]["detail"].startswith("no answer for ")


def test_a_project_where_no_scratch_file_can_be_written_asks_for_a_file(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (setup / ".beam").write_text("not a directory", encoding="utf-8")
    code, checks, _ = doctor(capsys)
    assert code == 3 and checks["Lean server"]["hint"] == "name a file: doctor FILE"


@pytest.mark.lean
def test_doctor_passes_on_real_lean_and_syncs_a_real_file(lean_cli: Cli) -> None:
    result = lean_cli("doctor", "Demo/Proofs.lean")
    assert result.code == 0, result.stdout + result.stderr
    checks = {c["name"]: c for c in result.json["checks"]}
    assert all(c["status"] == "ok" for c in checks.values()), checks
    assert "Lean (version 4.35.0" in checks["toolchain"]["detail"]
    assert checks["Lean server"]["detail"].endswith("(no errors)")
    scratch = lean_cli("--human", "doctor")
    assert scratch.code == 0 and scratch.stdout.splitlines()[-1] == "all checks passed"
    assert "synced a scratch file" in scratch.stdout


def test_a_server_command_without_report_delay_zero_passes_with_a_hint(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = tmp_path / "bin" / "lean-server"
    server.parent.mkdir(parents=True, exist_ok=True)
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", f"{server} --stdio")
    _, checks, _ = doctor(capsys)
    slow = checks["Lean server command"]
    assert slow["status"] == "ok" and "-Dserver.reportDelayMs=0" in slow["hint"] and "200 ms" in slow["hint"]
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", f"{server} --stdio -Dserver.reportDelayMs=0")
    _, checks, _ = doctor(capsys)
    assert checks["Lean server command"]["status"] == "ok" and "hint" not in checks["Lean server command"]


def test_doctor_shows_the_project_toolchain_elan_has_installed_and_that_it_serves_the_project(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    toolchain = tmp_path / "elan" / "toolchains" / "leanprover--lean4---v4.35.0"
    lean_bin(toolchain / "bin", "4.35.0")
    (toolchain / "bin" / "lake").write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n", encoding="utf-8")
    (toolchain / "bin" / "lake").chmod(0o755)
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    _, checks, _ = doctor(capsys)  # installed, but BEAM_LEAN_SERVER_CMD is set: the explicit command wins
    assert checks["toolchain"]["detail"].startswith(
        "the command from BEAM_LEAN_SERVER_CMD serves this project (an explicit command wins over its toolchain): "
    )
    assert checks["lake"]["detail"] == str(tmp_path / "bin" / "lake")
    monkeypatch.delenv("BEAM_LEAN_SERVER_CMD")  # the default (lake serve on PATH): the project toolchain replaces it
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elsewhere"))
    _, checks, _ = doctor(capsys)  # not installed where elan looks: lake serve on PATH
    assert "leanprover/lean4:v4.35.0 is not in " in checks["toolchain"]["detail"]
    assert "so `lake serve` on PATH serves this project" in checks["toolchain"]["detail"]
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    (tmp_path / "bin" / "lean").unlink()  # the project's own toolchain answers, not the lean on PATH
    _, checks, _ = doctor(capsys)
    detail = checks["toolchain"]["detail"]
    assert checks["toolchain"]["status"] == "ok"
    assert detail.startswith(f"project toolchain leanprover/lean4:v4.35.0 from {toolchain} serves this project: ")
    assert "Lean (version 4.35.0" in detail
    assert checks["lake"]["detail"] == str(toolchain / "bin" / "lake")  # saves build with the project's toolchain


def test_a_lake_named_by_the_server_command_that_does_not_exist_fails(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finding: doctor said "ok" for a `lake` that does not exist (the server command named it).
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", "/nonexistent/bin/lake serve")
    _, checks, _ = doctor(capsys)
    assert checks["lake"]["status"] == "fail"
    assert checks["lake"]["detail"] == "/nonexistent/bin/lake is not an executable (`lean-beam save` needs it)"
