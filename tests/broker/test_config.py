"""Broker settings: which Lean server command and which Lake a workspace uses."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from beam_broker import RUNTIME_SETUP, Broker, BrokerError
from beam_broker import errors as codes
from beam_broker.config import (
    REPORT_DELAY_ARG,
    SERVER_CMD_ENV,
    BrokerConfig,
    Toolchain,
    command_words,
    elan_home,
    lake_command,
    project_toolchain,
    server_command,
    split_command,
    workspace_command,
)
from beam_lsp.project import elan_toolchain_dir
from tests.support.fixtures import FAKE_LEAN, fake_broker, fake_cmd
from tests.support.projects import fake_project


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


def install_toolchain(elan: Path, name: str, lake_text: str = "#!/bin/sh\nexit 0\n") -> Path:
    """A stand-in toolchain in elan's directory layout: `<elan>/toolchains/<dir>/bin/lake`."""
    lake = elan / "toolchains" / str(elan_toolchain_dir(name)) / "bin" / "lake"
    lake.parent.mkdir(parents=True)
    lake.write_text(lake_text, encoding="utf-8")
    lake.chmod(0o755)
    return lake


def test_elan_names_a_toolchain_directory_by_escaping_slashes_and_colons() -> None:
    assert elan_toolchain_dir("leanprover/lean4:v4.9.0") == "leanprover--lean4---v4.9.0"
    assert elan_toolchain_dir("my-local-build") == "my-local-build"
    # Names that are no directory of `toolchains`: `..` is elan's home, whose `bin/lake` is elan's own proxy.
    assert [elan_toolchain_dir(name) for name in ("..", ".", "")] == [None, None, None]


def test_a_project_toolchain_installed_in_elans_directory_replaces_only_lake_serve_on_path(tmp_path: Path) -> None:
    elan = tmp_path / "elan"
    lake = install_toolchain(elan, "leanprover/lean4:v4.35.0")
    on_path = executable(tmp_path / "bin", "lake")
    default = [str(on_path), "serve", "--", REPORT_DELAY_ARG]
    root = tmp_path / "proj"
    root.mkdir()
    env = {"ELAN_HOME": str(elan), "PATH": str(on_path.parent)}
    config = BrokerConfig()
    assert workspace_command(config, env, str(root)) == (default, None)  # no lean-toolchain
    (root / "lean-toolchain").write_text("\n  leanprover/lean4:v4.35.0  \n", encoding="utf-8")
    cmd, toolchain = workspace_command(config, env, str(root))
    assert toolchain == Toolchain("leanprover/lean4:v4.35.0", str(lake.parent.parent), str(lake))
    assert cmd == [str(lake), "serve", "--", REPORT_DELAY_ARG]
    assert lake_command(config, env, str(root)) == str(lake)  # saves build with the same toolchain
    assert lake_command(config, env) == str(on_path)  # no project: the lake on PATH
    # an explicit command wins over the project's toolchain: --lean-cmd / lean_cmd, then $BEAM_LEAN_SERVER_CMD
    explicit = BrokerConfig(lean_cmd=["configured", "serve"])
    assert workspace_command(explicit, env, str(root)) == (["configured", "serve"], None)
    assert lake_command(explicit, env, str(root)) == str(on_path)
    from_env = {**env, SERVER_CMD_ENV: "lean --server"}
    assert workspace_command(config, from_env, str(root)) == (["lean", "--server"], None)
    assert project_toolchain(config, from_env, str(root)) is None
    # not installed, switched off, or elan's home elsewhere (HOME/.elan): lake serve on PATH
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.99.0\n", encoding="utf-8")
    assert workspace_command(config, env, str(root)) == (default, None)
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    off = BrokerConfig(project_toolchains=False)
    assert workspace_command(off, env, str(root)) == (default, None)
    assert elan_home({"HOME": str(tmp_path)}) == str(tmp_path / ".elan")
    assert project_toolchain(config, {"HOME": str(elan.parent / "nowhere")}, str(root)) is None


def test_a_lean_toolchain_naming_a_directory_above_elans_toolchains_is_no_project_toolchain(tmp_path: Path) -> None:
    """Finding: `..` maps to itself, so `$ELAN_HOME/toolchains/../bin/lake`, elan's own proxy, served the project as
    toolchain ".." (the proxy then fails on that name). A name that is no directory of `toolchains` is not installed."""
    elan = tmp_path / "elan"
    executable(elan / "bin", "lake")  # elan's proxy, installed beside `toolchains` as elan does
    executable(elan / "toolchains" / "bin", "lake")  # what `.` would name
    on_path = executable(tmp_path / "bin", "lake")
    root = tmp_path / "proj"
    root.mkdir()
    env = {"ELAN_HOME": str(elan), "PATH": str(on_path.parent)}
    for name in ("..", ".", "../", "..\r\n"):
        (root / "lean-toolchain").write_text(name, encoding="utf-8")
        assert project_toolchain(BrokerConfig(), env, str(root)) is None, name
        assert lake_command(BrokerConfig(), env, str(root)) == str(on_path), name


def running_fake_lean() -> str:
    """A `lake` stand-in whose `serve` runs the scripted fake Lean server (its arguments are ignored)."""
    return (
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(FAKE_LEAN)!r}\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )


def server_cmdline(broker: Broker, root: Path) -> bytes:
    """The command line of the Lean server process a broker runs for `root`."""
    runtime = broker.cached(str(root))
    client = runtime.live_client() if runtime is not None else None
    assert client is not None and client.pid is not None
    return Path(f"/proc/{client.pid}/cmdline").read_bytes()


@pytest.mark.anyio
async def test_two_projects_with_different_toolchains_run_different_lean_servers_in_one_broker(tmp_path: Path) -> None:
    elan = tmp_path / "elan"
    lakes = {
        name: install_toolchain(elan, name, running_fake_lean()) for name in ("leanprover/lean4:v4.35.0", "nightly-x")
    }
    roots = {}
    for name in lakes:
        roots[name] = fake_project(
            tmp_path / str(elan_toolchain_dir(name)), {"A.lean": "theorem a : True := trivial\n"}
        )
        (roots[name] / "lean-toolchain").write_text(name + "\n", encoding="utf-8")
    plain = fake_project(tmp_path / "plain", {"A.lean": "theorem a : True := trivial\n"})
    (plain / "lean-toolchain").write_text("leanprover/lean4:v4.0.0\n", encoding="utf-8")  # not installed
    on_path = tmp_path / "bin" / "lake"
    on_path.parent.mkdir()
    on_path.write_text(running_fake_lean(), encoding="utf-8")
    on_path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != SERVER_CMD_ENV}
    env |= {"ELAN_HOME": str(elan), "PATH": f"{on_path.parent}{os.pathsep}{env.get('PATH', '')}"}
    async with Broker.open(BrokerConfig(env=env)) as broker:  # no explicit command: project toolchains apply
        for root in [*roots.values(), plain]:
            await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
        toolchains = {w["root"]: w["toolchain"] for w in broker.status()["workspaces"]}
        for name, root in roots.items():
            assert str(lakes[name]).encode() in server_cmdline(broker, root)  # that toolchain's lake serves it
            assert toolchains[str(root)] == name
        assert str(on_path).encode() in server_cmdline(broker, plain)  # not installed: lake serve on PATH
    assert toolchains[str(plain)] is None
    # an explicit command wins: the test lanes and a pinned replica get the Lean they ask for on a machine with elan
    async with fake_broker(env=env) as broker:
        for root in [*roots.values(), plain]:
            await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
            assert str(FAKE_LEAN).encode() in server_cmdline(broker, root)
            assert not any(str(lake).encode() in server_cmdline(broker, root) for lake in [*lakes.values(), on_path])
        assert {w["toolchain"] for w in broker.status()["workspaces"]} == {None}
    env[SERVER_CMD_ENV] = shlex.join(fake_cmd())
    async with Broker.open(BrokerConfig(env=env)) as broker:
        for root in roots.values():
            await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
            assert not any(str(lake).encode() in server_cmdline(broker, root) for lake in lakes.values())
        assert {w["toolchain"] for w in broker.status()["workspaces"]} == {None}


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("memory_budget_mib", 0, "at least 1 (None: no budget)"),
        ("memory_budget_mib", -5, "at least 1 (None: no budget)"),
        ("idle_timeout", 0, "more than 0 seconds (None: never)"),
        ("max_calls", 0, "at least 1"),
        ("max_workspace_heavy_calls", 0, "at least 1"),
        ("mirrors_per_document", 0, "at least 1"),
        ("admission_wait", -1.0, "0 or more seconds"),
        ("change_delay", float("nan"), "0 or more seconds"),
        ("measure_interval", 0, "more than 0 seconds"),
    ],
)
def test_a_setting_that_would_silently_mean_something_else_is_refused_by_name(
    setting: str, value: float, says: str
) -> None:
    # A budget of 0 MiB used to be accepted (every measurement over it: everything idle evicted, again and again).
    with pytest.raises(ValueError, match=f"BrokerConfig.{setting} must be {re.escape(says)}"):
        settings: dict[str, Any] = {setting: value}
        BrokerConfig(**settings)


def test_the_boundary_values_that_mean_something_are_accepted() -> None:
    config = BrokerConfig(memory_budget_mib=1, idle_timeout=0.5, change_delay=0, admission_wait=0, max_calls=1)
    assert (config.memory_budget_mib, config.change_delay, config.admission_wait) == (1, 0, 0)
