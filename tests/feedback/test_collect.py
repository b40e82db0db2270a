"""Collecting workspace context without starting Lean (mirrors beam_feedback/collect.py)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

from beam_feedback import collect_context
from tests.feedback.helpers import make_executable


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_a_lean_project_yields_toolchain_lakefile_and_manifest_packages(project: Path, env: dict[str, str]) -> None:
    context = collect_context(project, env=env)
    assert context.warnings == ()
    workspace = context.data["workspace"]
    assert workspace == {
        "root": str(project),
        "lean_toolchain": "leanprover/lean4:v4.9.0",
        "lakefile": {"file": "lakefile.toml", "kind": "toml"},
        "manifest": {
            "version": 7,
            "packages": [
                {
                    "name": "mathlib",
                    "type": "git",
                    "rev": "0123456789abcdef0123456789abcdef01234567",
                    "input_rev": "master",
                    "url": "https://github.com/leanprover-community/mathlib4",
                },
                {"name": "local", "type": "path", "dir": "../local"},
            ],
        },
    }


def test_versions_of_beam_python_and_the_os_are_collected(project: Path, env: dict[str, str]) -> None:
    data = collect_context(project, env=env).data
    assert data["identity"] == {"name": "beam-feedback", "version": "0.1.0", "runtime_active": False}
    assert isinstance(data["beam"], dict)
    assert data["beam"]["beam-feedback"] == "0.1.0"
    assert isinstance(data["python"], dict)
    assert data["python"]["version"] == platform.python_version()
    assert isinstance(data["os"], dict)
    assert data["os"]["system"] == platform.system()


def test_a_missing_toolchain_file_is_a_warning_not_an_error(project: Path, env: dict[str, str]) -> None:
    (project / "lean-toolchain").unlink()
    context = collect_context(project, env=env)
    assert context.warnings == ("no lean-toolchain file in the workspace root",)
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["lean_toolchain"] is None


def test_an_empty_toolchain_file_is_a_warning(project: Path, env: dict[str, str]) -> None:
    (project / "lean-toolchain").write_text("\n", encoding="utf-8")
    assert collect_context(project, env=env).warnings == ("lean-toolchain is empty",)


def test_a_lean_lakefile_is_recognised_and_a_missing_one_warned_about(project: Path, env: dict[str, str]) -> None:
    (project / "lakefile.toml").unlink()
    assert collect_context(project, env=env).warnings == ("no lakefile.lean or lakefile.toml in the workspace root",)
    (project / "lakefile.lean").write_text("import Lake\n", encoding="utf-8")
    context = collect_context(project, env=env)
    assert context.warnings == ()
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["lakefile"] == {"file": "lakefile.lean", "kind": "lean"}


def test_a_broken_manifest_is_a_warning(project: Path, env: dict[str, str]) -> None:
    (project / "lake-manifest.json").write_text("{broken", encoding="utf-8")
    context = collect_context(project, env=env)
    assert len(context.warnings) == 1
    assert context.warnings[0].startswith("lake-manifest.json is not valid JSON")
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["manifest"] is None


def test_a_missing_manifest_is_simply_absent(project: Path, env: dict[str, str]) -> None:
    (project / "lake-manifest.json").unlink()
    context = collect_context(project, env=env)
    assert context.warnings == ()
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["manifest"] is None


def test_old_manifest_entries_are_unwrapped_and_url_credentials_dropped(project: Path, env: dict[str, str]) -> None:
    manifest = {
        "version": 4,
        "packages": [
            {"git": {"name": "std", "url": "https://user:hunter2secret@example.com/std4", "rev": "abc"}},
            {"nameless": True},
        ],
    }
    (project / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    context = collect_context(project, env=env)
    assert context.warnings == ("lake-manifest.json has a package entry without a name",)
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["manifest"] == {
        "version": 4,
        "packages": [{"name": "std", "type": "git", "rev": "abc", "url": "https://example.com/std4"}],
    }


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://user:hunter2secret@example.com:notaport/std4", "https://example.com:notaport/std4"),
        ("https://user:hunter2secret@[::1]:8080/std4", "https://[::1]:8080/std4"),
        ("https://hunter2secret@example.com/std4", "https://example.com/std4"),
    ],
)
def test_url_credentials_are_dropped_whatever_the_port_says(
    project: Path, env: dict[str, str], url: str, kept: str
) -> None:
    # `SplitResult.port` raises ValueError for a port that is no number: a typo in a manifest must neither crash
    # the report nor keep the password.
    manifest = {"version": 7, "packages": [{"type": "git", "name": "std", "url": url}]}
    (project / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    context = collect_context(project, env=env)
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["manifest"] == {
        "version": 7,
        "packages": [{"name": "std", "type": "git", "url": kept}],
    }


def test_git_branch_commit_and_dirtiness_are_collected(
    project: Path, env: dict[str, str], git_path: str, bin_dir: Path
) -> None:
    env["PATH"] = f"{bin_dir}:{git_path}"
    _git(project, "init", "-q", "-b", "topic")
    assert collect_context(project, env=env).data["git"] == {"branch": "topic", "commit": None, "dirty": True}
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "init")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, encoding="utf-8", check=True
    ).stdout.strip()
    assert collect_context(project, env=env).data["git"] == {"branch": "topic", "commit": commit, "dirty": False}
    (project / "Main.lean").write_text("def x := 1\n", encoding="utf-8")
    git_state = collect_context(project, env=env).data["git"]
    assert isinstance(git_state, dict)
    assert git_state["dirty"] is True


def test_git_status_runs_no_program_the_repository_configures(
    project: Path, env: dict[str, str], git_path: str, bin_dir: Path, tmp_path: Path
) -> None:
    # A cloned project's .git/config is not the user's: `git status` runs `core.fsmonitor` as a command, so a
    # report about an untrusted project would run its code (collection runs nothing but version queries).
    # Nor a clean filter, which it runs on every file whose stat data changed since the index was written.
    env["PATH"] = f"{bin_dir}:{git_path}"
    _git(project, "init", "-q", "-b", "topic")
    (project / ".gitattributes").write_text("* filter=evil\n", encoding="utf-8")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "init")
    ran = tmp_path / "ran"
    _git(project, "config", "core.fsmonitor", str(make_executable(tmp_path / "hook.sh", f'echo hook >> "{ran}"')))
    _git(
        project,
        "config",
        "filter.evil.clean",
        str(make_executable(tmp_path / "clean.sh", f'echo clean >> "{ran}"; cat')),
    )
    os.utime(project / "lean-toolchain", (0, 0))
    state = collect_context(project, env=env).data["git"]
    assert not ran.exists()
    assert isinstance(state, dict) and state["branch"] == "topic" and state["commit"] is not None


def test_a_workspace_outside_git_has_no_git_state_and_no_warning(
    project: Path, env: dict[str, str], git_path: str, bin_dir: Path
) -> None:
    env["PATH"] = f"{bin_dir}:{git_path}"
    context = collect_context(project, env=env)
    assert context.data["git"] is None
    assert context.warnings == ()


def test_without_git_installed_git_state_is_null(project: Path, env: dict[str, str]) -> None:
    context = collect_context(project, env=env)
    assert context.data["git"] is None
    assert context.warnings == ()


def test_a_failing_git_becomes_a_warning(project: Path, env: dict[str, str], bin_dir: Path) -> None:
    make_executable(bin_dir / "git", "echo 'fatal: detected dubious ownership' >&2; exit 128")
    context = collect_context(project, env=env)
    assert context.data["git"] is None
    assert context.warnings == ("git status failed: git exited with status 128: fatal: detected dubious ownership",)


def test_elan_and_lake_versions_are_collected_when_found(project: Path, env: dict[str, str], bin_dir: Path) -> None:
    make_executable(bin_dir / "elan", "echo 'elan 3.1.1 (71ddc6633 2024-02-22)'")
    make_executable(bin_dir / "lake", "echo 'Lake version 5.0.0-abc (Lean version 4.9.0)'")
    tools = collect_context(project, env=env).data["tools"]
    # bin_dir has both elan and lake, so lake looks like an elan proxy: see the next tests.
    assert isinstance(tools, dict)
    assert tools["elan"] == "elan 3.1.1 (71ddc6633 2024-02-22)"


def test_a_plain_lake_is_asked_for_its_version(project: Path, env: dict[str, str], bin_dir: Path) -> None:
    make_executable(bin_dir / "lake", "echo 'Lake version 5.0.0 (Lean version 4.9.0)'")
    tools = collect_context(project, env=env).data["tools"]
    assert tools == {"elan": None, "lake": "Lake version 5.0.0 (Lean version 4.9.0)"}


def test_an_elan_proxy_lake_is_bypassed_for_the_installed_toolchain(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    elan_home = tmp_path / "elan-home"
    proxy_ran = tmp_path / "proxy-ran"
    make_executable(elan_home / "bin" / "elan", "echo 'elan 3.1.1'")
    make_executable(elan_home / "bin" / "lake", f"touch '{proxy_ran}'; echo proxy")
    toolchain_bin = elan_home / "toolchains" / "leanprover--lean4---v4.9.0" / "bin"
    make_executable(toolchain_bin / "lake", "echo 'Lake version 5.0.0 (Lean version 4.9.0)'")
    env["PATH"] = str(elan_home / "bin")
    env["ELAN_HOME"] = str(elan_home)
    context = collect_context(project, env=env)
    assert context.data["tools"] == {"elan": "elan 3.1.1", "lake": "Lake version 5.0.0 (Lean version 4.9.0)"}
    assert not proxy_ran.exists()


def test_an_uninstalled_toolchain_is_never_installed_through_the_proxy(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    elan_home = tmp_path / "elan-home"
    proxy_ran = tmp_path / "proxy-ran"
    make_executable(elan_home / "bin" / "elan", "echo 'elan 3.1.1'")
    make_executable(elan_home / "bin" / "lake", f"touch '{proxy_ran}'; echo installing")
    env["PATH"] = str(elan_home / "bin")
    context = collect_context(project, env=env)
    assert isinstance(context.data["tools"], dict)
    assert context.data["tools"]["lake"] is None
    assert context.warnings == (
        "lake version not asked: toolchain 'leanprover/lean4:v4.9.0' is not installed (Beam never installs one)",
    )
    assert not proxy_ran.exists()


def test_runtime_stats_and_open_files_are_included_when_passed(project: Path, env: dict[str, str]) -> None:
    stats = {"requests": 3, "path": project / "Main.lean"}
    context = collect_context(project, env=env, runtime_stats=stats, open_files=[{"path": "Main.lean", "version": 2}])
    assert context.data["runtime"] == {
        "stats": {"requests": 3, "path": str(project / "Main.lean")},
        "open_files": [{"path": "Main.lean", "version": 2}],
    }
    assert isinstance(context.data["identity"], dict)
    assert context.data["identity"]["runtime_active"] is True


def test_runtime_data_that_is_not_json_becomes_a_warning(project: Path, env: dict[str, str]) -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    context = collect_context(project, env=env, runtime_stats={"x": float("nan")}, open_files=cyclic)
    assert context.data["runtime"] == {"stats": None, "open_files": None}
    assert len(context.warnings) == 2
    assert context.warnings[0].startswith("runtime stats could not be converted to JSON")
    assert context.warnings[1].startswith("open files could not be converted to JSON")


def test_the_caller_identity_is_merged_over_the_default(env: dict[str, str]) -> None:
    identity = {"name": "lean-beam-mcp", "mcp_protocol": "2026-07-28"}
    data = collect_context(None, env=env, identity=identity).data
    assert data["identity"] == {
        "name": "lean-beam-mcp",
        "version": "0.1.0",
        "runtime_active": False,
        "mcp_protocol": "2026-07-28",
    }
    assert "workspace" not in data
    assert "git" not in data


def test_confidential_collection_holds_nothing_project_derived(
    project: Path, env: dict[str, str], bin_dir: Path
) -> None:
    (project / "lean-toolchain").unlink()
    make_executable(bin_dir / "git", "exit 1")
    context = collect_context(project, env=env, confidential=True, runtime_stats={"a": 1}, open_files=["Main.lean"])
    assert set(context.data) == {"identity", "python", "os"}
    assert context.warnings == ()
    assert str(project) not in json.dumps(context.data)


def test_two_lakefiles_are_reported_and_the_lean_one_named(project: Path, env: dict[str, str]) -> None:
    (project / "lakefile.lean").write_text("import Lake\n", encoding="utf-8")
    context = collect_context(project, env=env)
    assert context.warnings == ("both lakefile.lean and lakefile.toml exist in the workspace root",)
    assert isinstance(context.data["workspace"], dict)
    assert context.data["workspace"]["lakefile"] == {"file": "lakefile.lean", "kind": "lean"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000, "nesting deeper than"),
        ('{"packages": [], "packages": []}', "duplicate key 'packages'"),
        ('{"version": NaN, "packages": []}', "NaN is not valid JSON"),
    ],
)
def test_a_manifest_that_is_not_strict_json_is_a_warning_never_a_crash(
    project: Path, env: dict[str, str], text: str, reason: str
) -> None:
    (project / "lake-manifest.json").write_text(text, encoding="utf-8")
    context = collect_context(project, env=env)
    [warning] = context.warnings
    assert warning.startswith("lake-manifest.json is not valid JSON: ") and reason in warning
