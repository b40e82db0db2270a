"""The beam-feedback command end to end (mirrors beam_feedback/cli.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from beam_feedback.cli import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, main
from tests.feedback.helpers import minimal_input

FLAGS = [
    "--title",
    "Hover never answers",
    "--summary",
    "lean_hover times out.",
    "--reproduction",
    "Call lean_hover at 3:7.",
    "--expected",
    "A hover answer.",
    "--actual",
    "A timeout.",
]
SECRET = "tok_0123456789abcdef"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, project: Path, env: dict[str, str]) -> None:
    """Run every CLI test from inside the fake project with the closed environment."""
    monkeypatch.chdir(project)
    for name in list(os.environ):
        if name not in ("SYSTEMROOT", "TMPDIR"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_flags_produce_markdown_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *FLAGS, "--kind", "bug", "--tag", "hover")
    assert code == EXIT_OK
    assert err == ""
    assert out.startswith("# Hover never answers\n")
    assert "Review before posting publicly" in out
    assert "- Kind: `bug`" in out
    assert "- Tags: `hover`" in out
    # The CLI includes the collected context by default.
    assert "## Beam Debug Context" in out
    assert "- Active root: `~/proj`" in out


def test_no_collected_leaves_the_debug_context_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--no-collected")
    assert code == EXIT_OK
    assert "## Beam Debug Context" not in out


def test_the_workspace_is_found_from_a_subdirectory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    (project / "Sub" / "Deeper").mkdir(parents=True)
    monkeypatch.chdir(project / "Sub" / "Deeper")
    code, out, _ = _run(capsys, *FLAGS, "--json")
    assert code == EXIT_OK
    assert json.loads(out)["workspace"] == {"root": str(project)}


def test_an_explicit_workspace_is_used_relative_to_the_cwd(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    monkeypatch.chdir(project.parent)
    code, out, _ = _run(capsys, *FLAGS, "--workspace", "proj", "--json")
    assert code == EXIT_OK
    assert json.loads(out)["workspace"] == {"root": str(project)}


def test_a_workspace_root_under_the_home_directory_may_start_with_a_tilde(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    # build_report expands `~` in a root; the command must not make `~/proj` relative to the cwd first.
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "report.json"
    source.write_text(json.dumps(minimal_input(workspace={"root": "~/proj"})), encoding="utf-8")
    for argv in (["--input", str(source)], [*FLAGS, "--workspace", "~/proj"]):
        code, out, err = _run(capsys, *argv, "--json")
        assert (code, err) == (EXIT_OK, "")
        assert json.loads(out)["workspace"] == {"root": str(project)}


def test_an_empty_workspace_root_in_an_input_file_is_bad_input_not_the_cwd(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "report.json"
    source.write_text(json.dumps(minimal_input(workspace={"root": ""})), encoding="utf-8")
    code, out, err = _run(capsys, "--input", str(source))
    assert (code, out) == (EXIT_USAGE, "")
    assert "workspace.root" in err


def test_a_workspace_that_is_a_symlink_loop_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    code, out, err = _run(capsys, *FLAGS, "--workspace", str(tmp_path / "loop1"))
    assert (code, out) == (EXIT_USAGE, "")
    # Python before 3.13 raises resolving a loop (a traceback before the fix); 3.13 resolves it to itself, which is
    # no directory. Either way: bad input, exit 2, one line naming the root.
    assert err.startswith(
        (
            "beam-feedback: error: workspace root cannot be resolved: ",
            "beam-feedback: error: workspace root is not an existing directory: ",
        )
    )
    assert "loop1" in err and "Traceback" not in err


def test_json_output_is_the_full_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--json")
    assert code == EXIT_OK
    result = json.loads(out)
    assert set(result) == {"markdown", "metadata", "collection_warnings", "collected", "workspace"}
    assert result["metadata"]["schema"] == "beam.feedback.report-card.v1"


def test_a_json_input_file_is_read_and_flags_override_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "report.json"
    source.write_text(json.dumps(minimal_input(kind="ux", tags=["from-file"])), encoding="utf-8")
    code, out, _ = _run(capsys, "--input", str(source), "--kind", "perf", "--tag", "from-flag", "--json")
    assert code == EXIT_OK
    metadata = json.loads(out)["metadata"]
    assert metadata["kind"] == "perf"
    assert metadata["tags"] == ["from-file", "from-flag"]
    assert metadata["title"] == "Hover never answers"


def test_a_toml_input_file_is_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "report.toml"
    source.write_text(
        'title = "From TOML"\nsummary = "s"\nreproduction = "r"\nexpected = "e"\nactual = "a"\nseverity = "low"\n',
        encoding="utf-8",
    )
    code, out, _ = _run(capsys, "--input", str(source), "--json")
    assert code == EXIT_OK
    assert json.loads(out)["metadata"]["severity"] == "low"


def test_input_can_come_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(minimal_input(title="From stdin"))))
    code, out, _ = _run(capsys, "--input", "-")
    assert code == EXIT_OK
    assert out.startswith("# From stdin\n")


def test_a_bundle_is_written_and_its_paths_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "bundles"
    code, out, _ = _run(capsys, *FLAGS, "--bundle", "zip", "--out", str(out_dir))
    assert code == EXIT_OK
    [zip_path] = out.splitlines()
    assert list(out_dir.iterdir()) == [Path(zip_path)]  # the zip alone: no folder beside it, no lock file
    with zipfile.ZipFile(zip_path) as archive:
        card = archive.read(f"{Path(zip_path).stem}/card.md").decode("utf-8")
    assert card.startswith("# Hover never answers")


def test_out_alone_implies_a_dir_bundle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--out", str(tmp_path / "b"))
    assert code == EXIT_OK
    assert len(out.splitlines()) == 1
    assert (Path(out.strip()) / "manifest.json").is_file()


def test_out_with_bundle_none_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, *FLAGS, "--bundle", "none", "--out", str(tmp_path))
    assert code == EXIT_USAGE
    assert "--out needs --bundle dir or zip" in err


def test_the_default_bundle_location_is_inside_the_workspace(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--bundle", "dir")
    assert code == EXIT_OK
    assert out.startswith("~/proj/.beam/feedback/")
    assert len(list((project / ".beam" / "feedback").glob("2*"))) == 1


def test_evidence_files_are_attached(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"secret {SECRET}\n", encoding="utf-8")
    monkeypatch.setenv("LEAN_API_KEY", SECRET)
    code, out, _ = _run(capsys, *FLAGS, "--evidence", str(log))
    assert code == EXIT_OK
    assert "### server.log" in out
    assert "secret [redacted:LEAN_API_KEY]" in out
    assert SECRET not in out


def test_an_evidence_file_with_nul_bytes_is_attached_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A log cut short by a crash is often padded with NULs: that is when people send feedback. Path evidence
    # through build_report takes such a file; the command's own reading must too.
    log = tmp_path / "crash.log"
    log.write_bytes(b"started\n\x00\x00\x00\x00\n")
    code, out, err = _run(capsys, *FLAGS, "--evidence", str(log))
    assert (code, err) == (EXIT_OK, "")
    assert "### crash.log" in out and "started\n\ufffd\ufffd\ufffd\ufffd" in out


def test_a_missing_evidence_file_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, *FLAGS, "--evidence", str(tmp_path / "nope.log"))
    assert code == EXIT_USAGE
    assert out == ""
    assert "cannot read evidence file" in err


def test_confidential_output_does_not_echo_the_workspace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--confidential", "--json")
    assert code == EXIT_OK
    result = json.loads(out)
    assert "workspace" not in result
    assert "proj" not in out
    assert set(result["collected"]) == {"identity", "python", "os"}


def test_confidential_with_no_redact_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *FLAGS, "--confidential", "--no-redact")
    assert code == EXIT_USAGE
    assert out == ""
    assert "'confidential' cannot be combined with --no-redact" in err


def test_no_redact_keeps_the_home_directory(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    code, out, _ = _run(capsys, *FLAGS, "--no-redact")
    assert code == EXIT_OK
    assert f"- Active root: `{project}`" in out


def test_missing_required_fields_are_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--title", "only a title")
    assert code == EXIT_USAGE
    assert out == ""
    # The flags to add, in the user's words (not the report model's field names), in one line.
    assert err == (
        "beam-feedback: error: missing --summary, --reproduction, --expected, --actual (or --input FILE with "
        "those fields; in a terminal, run beam-feedback without them to write them in your editor)\n"
    )


def test_an_invalid_input_file_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(minimal_input(confidental=True)), encoding="utf-8")
    code, _, err = _run(capsys, "--input", str(source))
    assert code == EXIT_USAGE
    assert "feedback input accepts no undeclared fields: confidental" in err


def test_an_input_file_with_a_nul_or_a_lone_surrogate_is_bad_input_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(minimal_input(tags=["ok", "a\ud800"])), encoding="utf-8")  # "\ud800" escaped
    code, out, err = _run(capsys, "--input", str(source))
    assert (code, out) == (EXIT_USAGE, "")
    assert "feedback input field 'tags[1]' contains a lone surrogate (U+D800)" in err


def test_a_symlinked_bundle_directory_is_a_failure_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str], project: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / ".beam").symlink_to(outside, target_is_directory=True)
    code, out, err = _run(capsys, *FLAGS, "--bundle", "zip")
    assert (code, out) == (EXIT_FAILURE, "")
    assert "refusing to write a bundle: ~/proj/.beam is a symbolic link" in err
    assert list(outside.iterdir()) == []


def test_a_missing_input_file_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "--input", str(tmp_path / "missing.json"))
    assert code == EXIT_USAGE
    assert "cannot read feedback input" in err


def test_a_bad_workspace_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, *FLAGS, "--workspace", str(tmp_path / "missing"))
    assert code == EXIT_USAGE
    assert "workspace root is not an existing directory" in err


def test_an_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *FLAGS, "--confidental")
    assert code == EXIT_USAGE
    assert "unrecognized arguments: --confidental; did you mean '--confidential'?" in err


def test_an_unwritable_output_directory_is_a_failure(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code, out, err = _run(capsys, *FLAGS, "--bundle", "dir", "--out", str(blocker / "sub"))
    assert code == EXIT_FAILURE
    assert out == ""
    assert "cannot create bundle output directory" in err


def test_collection_warnings_go_to_stderr(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    (project / "lean-toolchain").unlink()
    code, _, err = _run(capsys, *FLAGS, "--workspace", str(project))
    assert code == EXIT_OK
    assert err == "beam-feedback: collection warning: no lean-toolchain file in the workspace root\n"


def test_help_describes_the_input_shape_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--help")
    assert code == EXIT_OK
    assert "required strings: title, summary, reproduction, expected, actual" in out
    assert "exit codes:" in out


def test_the_console_script_runs_as_a_module(project: Path, env: dict[str, str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "beam_feedback", *FLAGS, "--json"],
        cwd=project,
        env={**env, "PYTHONWARNDEFAULTENCODING": "1"},
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert completed.returncode == EXIT_OK, completed.stderr
    assert json.loads(completed.stdout)["workspace"] == {"root": str(project)}


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [*FLAGS, "--json"]])
def test_a_reader_that_goes_away_ends_the_command_with_141_quietly(
    argv: list[str], project: Path, env: dict[str, str]
) -> None:
    # Finding: argparse swallowed the broken pipe of `--help | head -1`, and a report into one was "cannot write".
    with subprocess.Popen(
        [sys.executable, "-m", "beam_feedback", *argv],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the child has written anything: its write fails with EPIPE
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == EXIT_BROKEN_PIPE == 141 and err == b""


@pytest.mark.parametrize(
    ("argv", "status"),
    [(FLAGS, EXIT_BROKEN_PIPE), (["--title", "x", "--no-input"], EXIT_USAGE), (["--bogus"], EXIT_USAGE)],
)
def test_a_reader_of_both_streams_that_goes_away_changes_nothing_but_the_output(
    argv: list[str], status: int, env: dict[str, str], tmp_path: Path
) -> None:
    # `beam-feedback ... 2>&1 | head -1`: collection warnings and errors go to the same closed pipe. A report
    # still ends as 141 (not 1 from a BrokenPipeError traceback), an error keeps its own status.
    with subprocess.Popen(
        [sys.executable, "-m", "beam_feedback", *argv, "--workspace", str(tmp_path)],  # no project: warnings
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.close()
        assert proc.wait(timeout=60) == status


def test_the_console_script_exits_2_on_bad_input(project: Path, env: dict[str, str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "beam_feedback", "--title", "x"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert completed.returncode == EXIT_USAGE
    assert "missing --summary, --reproduction" in completed.stderr


def test_a_huge_evidence_file_is_cut_with_a_note(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    log.write_bytes(b"y" * (1024 * 1024 + 5))
    code, out, err = _run(capsys, *FLAGS, "--evidence", str(log), "--json")
    assert code == EXIT_OK
    assert "beam-feedback: note: evidence huge.log was cut to its first 1048576 bytes" in err
    assert json.loads(out)["markdown"].count("y" * 8000) == 1


def test_without_a_project_marker_above_the_cwd_the_cwd_is_the_workspace(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    monkeypatch.chdir(loose)
    code, out, _ = _run(capsys, *FLAGS, "--json")
    assert code == EXIT_OK
    assert json.loads(out)["workspace"] == {"root": str(loose)}


def test_importing_the_cli_does_not_import_the_lean_client_stack() -> None:
    heavy = "('beam_lsp.client', 'beam_lsp.jsonrpc', 'lsprotocol', 'anyio')"
    code = f"import sys, beam_feedback.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# ---- asking a person ----------------------------------------------------------------------------------
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


_FILL = """\
import sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
answers = {"title": "Hover hangs", "summary": "It hangs.", "reproduction": "#check x\\nlean-beam hover A.lean:1:0",
           "expected": "An answer.", "actual": "Nothing."}
out = []
for line in text.splitlines():
    out.append(line)
    for name, value in answers.items():
        if line.startswith(f"## {name} "):
            out.append(value)
open(path, "w", encoding="utf-8").write("\\n".join(out) + "\\n")
"""


def _terminal(monkeypatch: pytest.MonkeyPatch, typed: str = "") -> _Tty:
    """stdin and stderr are a terminal (stdin holds what the person types); returns stderr."""
    err = _Tty()
    monkeypatch.setattr(sys, "stdin", _Tty(typed))
    monkeypatch.setattr(sys, "stderr", err)
    return err


def test_a_bare_run_in_a_terminal_opens_the_editor_on_a_template(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    editor = tmp_path / "fill.py"
    editor.write_text(_FILL, encoding="utf-8")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    _terminal(monkeypatch)
    assert main(["--kind", "bug"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("# Hover hangs\n")
    assert "#check x\nlean-beam hover A.lean:1:0" in out  # a Lean `#` line is text, not a template comment
    assert "- Kind: `bug`" in out and "Nothing." in out


def test_an_editor_that_saves_latin_1_loses_nothing_it_can_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # An editor set to Latin-1 writes `café` as one byte 0xE9: the person's text must not end in a traceback.
    editor = tmp_path / "latin1.py"
    editor.write_text(_FILL.replace('encoding="utf-8").write', 'encoding="latin-1").write'), encoding="utf-8")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    _terminal(monkeypatch)
    assert main(["--summary", "caf\u00e9 hangs"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("# Hover hangs\n")
    assert "caf\ufffd hangs" in out


def test_an_empty_required_section_or_a_failing_editor_cancels(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _terminal(monkeypatch)
    monkeypatch.setenv("EDITOR", "true")  # saves the template as it was: every required section empty
    assert main(["--title", "x"]) == EXIT_USAGE
    assert err.getvalue().endswith(
        "beam-feedback: error: no summary, reproduction, expected, actual given: no report was made\n"
    )
    monkeypatch.setenv("EDITOR", "false")
    assert main([]) == EXIT_USAGE
    assert "the editor (false) exited with status 1: no report was made" in err.getvalue()
    assert capsys.readouterr().out == ""


def test_without_an_editor_each_missing_field_is_prompted_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _terminal(monkeypatch, "Hover hangs\n\nIt hangs.\nCall hover.\nAn answer.\nNothing.\n")
    assert main([]) == EXIT_OK
    prompts = err.getvalue()
    assert "title (one line): summary (what went wrong, in a few sentences): summary (" in prompts  # asked again
    assert capsys.readouterr().out.startswith("# Hover hangs\n")
    err = _terminal(monkeypatch, "Only a title\n")  # then Ctrl-D
    assert main([]) == EXIT_USAGE
    assert err.getvalue().endswith("beam-feedback: error: cancelled: no report was made\n")


def test_ctrl_c_at_a_prompt_exits_130_in_one_line_as_lean_beam_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class _CtrlC:
        def isatty(self) -> bool:
            return True

        def readline(self) -> str:
            raise KeyboardInterrupt

    err = _terminal(monkeypatch)
    monkeypatch.setattr(sys, "stdin", _CtrlC())
    assert main([]) == EXIT_INTERRUPTED == 130
    assert err.getvalue().endswith("title (one line): \nbeam-feedback: interrupted: no report was made\n")
    assert capsys.readouterr().out == ""


def test_no_input_never_asks_even_in_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EDITOR", "false")
    err = _terminal(monkeypatch, "typed\n")
    assert main(["--no-input", "--title", "x"]) == EXIT_USAGE
    assert "error: missing --summary" in err.getvalue()
    assert sys.stdin.read() == "typed\n"  # nothing was read


def test_confidential_with_evidence_is_refused_in_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Finding: --confidential silently dropped --evidence and --client-request-id.
    log = tmp_path / "server.log"
    log.write_text("x", encoding="utf-8")
    code, out, err = _run(capsys, *FLAGS, "--confidential", "--evidence", str(log), "--client-request-id", "r1")
    assert (code, out) == (EXIT_USAGE, "")
    assert err.endswith(
        "beam-feedback: error: a confidential report carries no --evidence, --client-request-id (nothing of "
        "the project leaves with it): drop them, or drop --confidential\n"
    )
