"""beam_feedback._command: external commands end on time, whole process group included, and fail as warnings."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import pytest

from beam_feedback import collect_context
from beam_feedback._command import CommandError, run_command
from tests.feedback.helpers import make_executable


def test_a_command_returns_its_output(tmp_path: Path, bin_dir: Path, env: dict[str, str]) -> None:
    tool = make_executable(bin_dir / "tool", 'echo "version 1.2 in $PWD"')
    assert run_command([str(tool)], cwd=tmp_path, env=env, timeout=10).strip() == f"version 1.2 in {tmp_path}"


def test_a_command_that_cannot_start_is_a_command_error(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(CommandError):
        run_command([str(tmp_path / "missing-tool")], cwd=None, env=env, timeout=10)


def test_a_hanging_command_is_killed_and_becomes_a_warning(project: Path, env: dict[str, str], bin_dir: Path) -> None:
    # The script's child keeps stdout open: only killing the whole process group ends the command.
    sleep = shutil.which("sleep")
    assert sleep is not None
    make_executable(bin_dir / "lake", f"'{sleep}' 60 & wait")
    context = collect_context(project, env=env, command_timeout=0.3)
    assert context.warnings == ("lake --version failed: lake did not answer within 0.3s",)


def test_a_command_that_exits_non_zero_becomes_a_warning(project: Path, env: dict[str, str], bin_dir: Path) -> None:
    make_executable(bin_dir / "elan", "echo 'elan: broken install' >&2; exit 3")
    context = collect_context(project, env=env)
    assert context.warnings == ("elan --version failed: elan exited with status 3: elan: broken install",)


def test_a_command_whose_descendant_escapes_the_process_group_still_ends(
    project: Path, env: dict[str, str], bin_dir: Path, tmp_path: Path
) -> None:
    setsid, sh, sleep = shutil.which("setsid"), shutil.which("sh"), shutil.which("sleep")
    if setsid is None or sh is None or sleep is None:
        pytest.skip("needs setsid, sh and sleep")
    pid_file = tmp_path / "escaped.pid"
    # The descendant starts a new session (so the group kill misses it) and keeps stdout open.
    make_executable(bin_dir / "lake", f"'{setsid}' '{sh}' -c 'echo $$ > \"{pid_file}\"; exec \"{sleep}\" 60' & wait")
    try:
        context = collect_context(project, env=env, command_timeout=0.3)
        assert context.warnings == ("lake --version failed: lake did not answer within 0.3s",)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text(encoding="utf-8").strip()), signal.SIGKILL)
