"""Broker settings: which Lean server command and which Lake a workspace uses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from beam_broker import RUNTIME_SETUP, BrokerError
from beam_broker import errors as codes
from beam_broker.config import (
    REPORT_DELAY_ARG,
    SERVER_CMD_ENV,
    BrokerConfig,
    command_words,
    lake_command,
    server_command,
    split_command,
)


def executable(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_server_command_is_the_config_then_the_environment_then_lake_serve(tmp_path: Path) -> None:
    lake = executable(tmp_path / "bin", "lake")
    env = {"PATH": str(lake.parent), SERVER_CMD_ENV: "lean --server -Dx=1"}
    assert server_command(BrokerConfig(lean_cmd=["my", "lean"]), env) == ["my", "lean"]
    assert server_command(BrokerConfig(), env) == ["lean", "--server", "-Dx=1"]
    assert server_command(BrokerConfig(), {"PATH": str(lake.parent)}) == [str(lake), "serve", "--", REPORT_DELAY_ARG]


def test_a_lean_command_is_read_once_and_its_errors_never_echo_it(tmp_path: Path) -> None:
    # The one reading of a Lean command line: `--lean-cmd` of both CLIs and the environment variable use it.
    assert split_command("lake serve -- '-Dx=a b'") == ["lake", "serve", "--", "-Dx=a b"]
    unclosed = "lean --token 's3cret"
    for text, problem in (
        (unclosed, "does not split like a shell command: No closing quotation"),
        (" ", "must not be empty"),
    ):
        with pytest.raises(ValueError, match=f"^{problem}$"):
            split_command(text)
        with pytest.raises(BrokerError) as info:
            server_command(BrokerConfig(), {"PATH": str(tmp_path), SERVER_CMD_ENV: text})
        assert info.value.code == RUNTIME_SETUP and info.value.message == f"{SERVER_CMD_ENV} {problem}"
    assert "s3cret" in command_words(BrokerConfig(), {SERVER_CMD_ENV: unclosed})  # still found, to redact it


def test_no_server_command_is_a_runtime_setup_error(tmp_path: Path) -> None:
    with pytest.raises(BrokerError) as info:
        server_command(BrokerConfig(), {"PATH": str(tmp_path)})
    assert info.value.code == RUNTIME_SETUP and "lake" in info.value.message


def test_saves_use_the_lake_the_server_runs_under_else_lake_on_path(tmp_path: Path) -> None:
    served = executable(tmp_path / "toolchain", "lake")
    on_path = executable(tmp_path / "bin", "lake")
    path = {"PATH": str(on_path.parent)}
    assert lake_command(BrokerConfig(lean_cmd=[str(served), "serve"]), path) == str(served)
    assert lake_command(BrokerConfig(lean_cmd=["python", "fake_lean.py"]), path) == str(on_path)
    assert lake_command(BrokerConfig(), path) == str(on_path)
    with pytest.raises(BrokerError) as info:
        lake_command(BrokerConfig(lean_cmd=["lean", "--server"]), {"PATH": str(tmp_path / "empty")})
    assert info.value.code == codes.RUNTIME_SETUP and "lake" in info.value.message


def test_the_environment_is_the_configured_one_or_a_copy_of_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    assert BrokerConfig(env={"A": "1"}).environment() == {"A": "1"}
    monkeypatch.setenv("BEAM_CONFIG_TEST", "yes")
    env = BrokerConfig().environment()
    assert env["BEAM_CONFIG_TEST"] == "yes" and env is not os.environ
