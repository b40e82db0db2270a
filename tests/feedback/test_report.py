"""Building reports: modes, confidential rules, redaction, evidence (mirrors beam_feedback/report.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from beam_feedback import INVALID_INPUT, REPORT_SCHEMA, InvalidReportError, Redactor, build_report
from beam_feedback import report as report_module
from tests.feedback.helpers import make_executable, minimal_input

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
SECRET = "tok_0123456789abcdef"


def _workspace(project: Path) -> dict[str, str]:
    return {"root": str(project)}


def test_a_report_renders_markdown_metadata_and_echoes_the_workspace(
    project: Path, env: dict[str, str], redactor: Redactor
) -> None:
    data = minimal_input(workspace=_workspace(project), kind="bug", severity="high", tags=["hover", ""])
    result = build_report(data, env=env, redactor=redactor, now=NOW).to_json()
    assert set(result) == {"markdown", "metadata", "collection_warnings", "workspace"}
    assert result["workspace"] == {"root": str(project)}
    assert result["collection_warnings"] == []
    assert result["metadata"] == {
        "schema": REPORT_SCHEMA,
        "title": "Hover never answers",
        "kind": "bug",
        "severity": "high",
        "generated_at": "2024-05-06T07:08:09Z",
        "active_root": "~/proj",
        "tags": ["hover"],
        "bundle": "none",
        "redacted": True,
        "confidential": False,
        "client_request_id": None,
    }


def test_collected_context_is_returned_only_when_asked_for(project: Path, env: dict[str, str]) -> None:
    without = build_report(minimal_input(workspace=_workspace(project)), env=env)
    assert without.collected is None
    with_collected = build_report(minimal_input(workspace=_workspace(project), include_collected=True), env=env)
    assert with_collected.collected is not None
    workspace = with_collected.collected["workspace"]
    assert isinstance(workspace, dict)
    assert workspace["root"] == "~/proj"
    assert workspace["lean_toolchain"] == "leanprover/lean4:v4.9.0"
    assert "## Beam Debug Context" in with_collected.markdown


def test_collection_warnings_appear_once_in_markdown_and_in_the_result(project: Path, env: dict[str, str]) -> None:
    (project / "lean-toolchain").unlink()
    result = build_report(minimal_input(workspace=_workspace(project)), env=env)
    assert result.collection_warnings == ["no lean-toolchain file in the workspace root"]
    assert result.markdown.count("no lean-toolchain file in the workspace root") == 1


def test_runtime_stats_and_open_files_from_the_caller_are_reported(project: Path, env: dict[str, str]) -> None:
    result = build_report(
        minimal_input(workspace=_workspace(project), include_collected=True),
        env=env,
        runtime_stats={"uptimeMs": 10},
        open_files=[{"path": "A.lean"}, {"path": "B.lean"}],
    )
    assert result.collected is not None
    assert result.collected["runtime"] == {
        "stats": {"uptimeMs": 10},
        "open_files": [{"path": "A.lean"}, {"path": "B.lean"}],
    }
    assert "- Runtime active: yes (2 open files)" in result.markdown


def test_confidential_reports_collect_and_echo_nothing_project_derived(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    (project / "log.txt").write_text("confidential-log-line", encoding="utf-8")
    data = minimal_input(
        workspace=_workspace(project),
        confidential=True,
        include_collected=True,
        client_request_id="req-1",
        request={"path": "Secret.lean"},
        response={"answer": "confidential-response"},
        evidence=[{"name": "log.txt", "path": "log.txt"}],
    )
    result = build_report(data, env=env, runtime_stats={"open": 1}, open_files=["Secret.lean"], now=NOW)
    as_json = result.to_json()
    assert "workspace" not in as_json
    assert as_json["collection_warnings"] == []
    assert result.metadata.active_root is None
    assert result.metadata.client_request_id is None
    assert result.metadata.confidential is True
    assert result.collected is not None
    assert set(result.collected) == {"identity", "python", "os"}
    text = json.dumps(as_json)
    for leaked in ("proj", "Secret.lean", "confidential-", "req-1", "mathlib", "leanprover"):
        assert leaked not in text
    assert "Confidential report: do not post this report publicly." in result.markdown
    assert "Review before posting publicly" not in result.markdown


def test_confidential_with_a_missing_root_still_works_without_a_bundle(env: dict[str, str], tmp_path: Path) -> None:
    data = minimal_input(workspace={"root": str(tmp_path / "gone")}, confidential=True)
    assert build_report(data, env=env).metadata.active_root is None


def test_secrets_from_the_environment_and_flags_are_redacted_everywhere(project: Path, env: dict[str, str]) -> None:
    env["GITHUB_TOKEN"] = SECRET
    redactor = Redactor.from_sources(env, ["lean-beam-mcp", "--api-key", "flag-secret-value"], home=True)
    data = minimal_input(
        workspace=_workspace(project),
        title=f"Leak {SECRET}",
        summary="flag-secret-value appeared in output",
        include_collected=True,
        tags=[SECRET],
        client_request_id=SECRET,
        request={"headers": {"authorization": f"Bearer {SECRET}"}},
        evidence=[{"name": "env.json", "content": {"token": SECRET, "nested": ["flag-secret-value"]}}],
    )
    result = build_report(
        data,
        env=env,
        redactor=redactor,
        runtime_stats={"cmd": f"lean --token={SECRET}"},
        open_files=[f"{project}/{SECRET}.lean"],
    )
    text = json.dumps(result.to_json())
    assert SECRET not in text
    assert "flag-secret-value" not in text
    assert "[redacted:GITHUB_TOKEN]" in result.markdown
    assert "[redacted:api-key] appeared in output" in result.markdown
    assert result.metadata.title == "Leak [redacted:GITHUB_TOKEN]"
    assert result.collected is not None
    assert result.collected["runtime"] == {
        "stats": {"cmd": "lean --token=[redacted:GITHUB_TOKEN]"},
        "open_files": ["~/proj/[redacted:GITHUB_TOKEN].lean"],
    }


def test_secrets_and_home_in_the_keys_of_caller_data_are_redacted_as_in_the_markdown(
    project: Path, env: dict[str, str], home: Path
) -> None:
    # A caller's stats may be keyed by path (as the broker's are by workspace): the Markdown's debug context
    # hides such keys, so `collected` and the bundle's JSON must too.
    env["GITHUB_TOKEN"] = SECRET
    stats = {str(project): {SECRET: 1}}
    data = minimal_input(workspace=_workspace(project), include_collected=True, bundle="dir")
    result = build_report(data, env=env, runtime_stats=stats, identity={SECRET: "x"})
    assert result.collected is not None
    assert result.collected["runtime"] == {"stats": {"~/proj": {"[redacted:GITHUB_TOKEN]": 1}}}
    assert result.bundle_dir is not None
    bundle = Path(result.bundle_dir.replace("~", str(home), 1))
    for payload in [json.dumps(result.to_json()), *(p.read_text(encoding="utf-8") for p in bundle.glob("*.json"))]:
        assert SECRET not in payload
        assert str(project) not in payload.replace(json.dumps({"root": str(project)}), "")


def test_the_default_redactor_reads_secrets_from_env(project: Path, env: dict[str, str]) -> None:
    env["MY_PASSWORD"] = SECRET
    result = build_report(minimal_input(workspace=_workspace(project), summary=SECRET), env=env)
    assert SECRET not in result.markdown
    assert "[redacted:MY_PASSWORD]" in result.markdown


def test_home_is_replaced_by_tilde_in_markdown_metadata_and_collected(project: Path, env: dict[str, str]) -> None:
    result = build_report(minimal_input(workspace=_workspace(project), include_collected=True), env=env)
    text = json.dumps({k: v for k, v in result.to_json().items() if k != "workspace"})
    assert env["HOME"] not in text
    assert "`~/proj`" in result.markdown


def test_a_home_reached_through_a_symlink_is_replaced_in_its_resolved_spelling_too(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    # The root is resolved (and the MCP server passes a canonical one), so with HOME=/home/ada and /home a symlink
    # (automounts, /home -> /var/home) every path in the report is spelled under the real directory instead.
    (tmp_path / "link").symlink_to(tmp_path / "home")
    env["HOME"] = str(tmp_path / "link" / "ada")
    data = minimal_input(workspace={"root": str(tmp_path / "link" / "ada" / "proj")}, include_collected=True)
    result = build_report(data, env=env)
    text = json.dumps({k: v for k, v in result.to_json().items() if k != "workspace"})
    assert str(project) not in text
    assert result.metadata.active_root == "~/proj"
    assert "`~/proj`" in result.markdown


def test_redact_false_keeps_secrets_and_home(project: Path, env: dict[str, str]) -> None:
    env["GITHUB_TOKEN"] = SECRET
    result = build_report(minimal_input(workspace=_workspace(project), summary=SECRET, redact=False), env=env)
    assert SECRET in result.markdown
    assert str(project) in result.markdown
    assert result.metadata.redacted is False
    assert result.metadata.active_root == str(project)


def test_path_evidence_inside_the_workspace_is_read_and_redacted(project: Path, env: dict[str, str]) -> None:
    env["API_TOKEN"] = SECRET
    (project / "logs").mkdir()
    (project / "logs" / "server.log").write_text(f"using {SECRET}\n", encoding="utf-8")
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "server.log", "path": "logs/server.log"}])
    markdown = build_report(data, env=env).markdown
    assert "using [redacted:API_TOKEN]" in markdown
    assert "From `~/proj/logs/server.log`." in markdown


def test_path_evidence_outside_the_workspace_is_rejected(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x", encoding="utf-8")
    (project / "link.txt").symlink_to(outside)
    for path in (str(outside), "../../outside.txt", "link.txt"):
        data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": path}])
        with pytest.raises(InvalidReportError, match="path must be inside the workspace root"):
            build_report(data, env=env)


def test_path_evidence_may_be_a_symlink_that_stays_inside_the_workspace(project: Path, env: dict[str, str]) -> None:
    (project / "real.log").write_text("inside\n", encoding="utf-8")
    (project / "alias.log").symlink_to(project / "real.log")
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "alias.log"}])
    assert "inside" in build_report(data, env=env).markdown


def test_a_fifo_as_path_evidence_is_refused_at_once_without_blocking(project: Path, env: dict[str, str]) -> None:
    fifo = project / "pipe"
    os.mkfifo(fifo)
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "pipe"}])
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            build_report(data, env=env)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # blocked opening the FIFO: give it a writer so the thread can end, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        worker.join(30)
        pytest.fail("reading a FIFO as evidence blocked")
    [error] = outcome
    assert isinstance(error, InvalidReportError) and error.code == INVALID_INPUT
    assert error.message == "evidence 'e.txt': pipe is a FIFO, not a regular file"


def test_a_directory_as_path_evidence_is_refused_by_kind(project: Path, env: dict[str, str]) -> None:
    (project / "logs").mkdir()
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "logs"}])
    with pytest.raises(InvalidReportError, match=r"logs is a directory, not a regular file"):
        build_report(data, env=env)


def test_a_device_reached_through_a_symlink_in_the_workspace_is_refused(project: Path, env: dict[str, str]) -> None:
    (project / "zero").symlink_to("/dev/zero")
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "zero"}])
    with pytest.raises(InvalidReportError, match="path must be inside the workspace root"):
        build_report(data, env=env)


class _Unresolved(type(Path())):  # type: ignore[misc]
    """A path whose `resolve` changes nothing: as if a component was swapped for a symlink after resolving."""

    def resolve(self, strict: bool = False) -> _Unresolved:
        return self


def test_a_symlink_swapped_in_after_the_check_is_never_followed_out_of_the_workspace(
    project: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the workspace\n", encoding="utf-8")
    (project / "last.txt").symlink_to(outside / "secret.txt")  # the file itself became a symlink
    (project / "dir").symlink_to(outside)  # a directory on the way became a symlink
    monkeypatch.setattr(report_module, "Path", _Unresolved)
    for path, problem in (("last.txt", "cannot read last.txt"), ("dir/secret.txt", "inside the workspace root")):
        data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": path}])
        with pytest.raises(InvalidReportError, match=problem):
            build_report(data, env=env)


def test_missing_path_evidence_is_invalid_input(project: Path, env: dict[str, str]) -> None:
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "missing.log"}])
    with pytest.raises(InvalidReportError, match=r"cannot read missing\.log") as caught:
        build_report(data, env=env)
    assert caught.value.code == INVALID_INPUT


def test_a_symlink_loop_as_path_evidence_or_workspace_root_is_invalid_input(project: Path, env: dict[str, str]) -> None:
    # Path.resolve raises RuntimeError (not OSError) on a loop before Python 3.13: no traceback, no internal error.
    (project / "loop1").symlink_to("loop2")
    (project / "loop2").symlink_to("loop1")
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "e.txt", "path": "loop1"}])
    with pytest.raises(InvalidReportError, match=r"evidence 'e\.txt': cannot read loop1"):
        build_report(data, env=env)
    with pytest.raises(InvalidReportError, match="workspace root"):
        build_report(minimal_input(workspace={"root": str(project / "loop1" / "sub")}), env=env)


def test_path_evidence_needs_a_workspace(env: dict[str, str]) -> None:
    with pytest.raises(InvalidReportError, match="path evidence needs a workspace root"):
        build_report(minimal_input(evidence=[{"name": "e.txt", "path": "/etc/hostname"}]), env=env)


def test_a_relative_workspace_root_is_rejected(env: dict[str, str]) -> None:
    with pytest.raises(InvalidReportError, match="must be an absolute path"):
        build_report(minimal_input(workspace={"root": "proj"}), env=env)


def test_a_workspace_root_that_is_not_a_directory_is_rejected(project: Path, env: dict[str, str]) -> None:
    with pytest.raises(InvalidReportError, match="not an existing directory"):
        build_report(minimal_input(workspace={"root": str(project / "lakefile.toml")}), env=env)


def test_a_report_without_workspace_collects_only_the_environment(env: dict[str, str]) -> None:
    result = build_report(minimal_input(include_collected=True), env=env)
    assert "workspace" not in result.to_json()
    assert result.collected is not None
    assert "workspace" not in result.collected
    assert "- Active root: none" in result.markdown


def test_a_bundle_without_a_workspace_or_output_directory_is_rejected(env: dict[str, str]) -> None:
    with pytest.raises(InvalidReportError, match="a bundle needs an output directory or a workspace root"):
        build_report(minimal_input(bundle="dir"), env=env)


def test_the_runtime_section_shows_the_caller_identity_git_state_and_tools(
    project: Path, env: dict[str, str], bin_dir: Path, git_path: str
) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True, capture_output=True)
    make_executable(bin_dir / "lake", "echo 'Lake version 5.0.0 (Lean version 4.9.0)'")
    env["PATH"] = f"{bin_dir}:{git_path}"
    identity = {"name": "lean-beam-mcp", "version": "0.2.0", "mcp_protocol": "2026-07-28"}
    markdown = build_report(minimal_input(workspace=_workspace(project)), env=env, identity=identity).markdown
    assert "- Server: `lean-beam-mcp 0.2.0`" in markdown
    assert "- MCP protocol: `2026-07-28`" in markdown
    assert "- Source: branch `main`, commit `no commits`, dirty" in markdown
    assert "- lake: `Lake version 5.0.0 (Lean version 4.9.0)`" in markdown


def test_long_inline_evidence_is_shortened_in_markdown_but_kept_whole_in_the_bundle(
    project: Path, env: dict[str, str], home: Path
) -> None:
    content = "".join(f"line {i}\n" for i in range(5000))
    data = minimal_input(
        workspace=_workspace(project), bundle="dir", evidence=[{"name": "big.log", "content": content}]
    )
    result = build_report(data, env=env)
    assert "Shown truncated to 8000 characters; a bundle holds the full text as `evidence/big.log`." in result.markdown
    assert "line 4999" not in result.markdown
    assert result.bundle_dir is not None
    bundle = Path(result.bundle_dir.replace("~", str(home), 1))
    assert (bundle / "evidence" / "big.log").read_text(encoding="utf-8") == content


def test_path_evidence_over_one_mebibyte_is_cut_with_a_warning(project: Path, env: dict[str, str]) -> None:
    (project / "huge.log").write_bytes(b"x" * (1024 * 1024 + 10))
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "huge.log", "path": "huge.log"}])
    result = build_report(data, env=env)
    assert result.collection_warnings == ["evidence 'huge.log' was cut to its first 1048576 bytes"]


def test_json_evidence_content_is_pretty_printed(project: Path, env: dict[str, str]) -> None:
    data = minimal_input(workspace=_workspace(project), evidence=[{"name": "r.json", "content": {"a": [1, 2]}}])
    markdown = build_report(data, env=env).markdown
    assert '```json\n{\n  "a": [\n    1,\n    2\n  ]\n}\n```' in markdown


def test_error_messages_are_redacted_too(project: Path, env: dict[str, str]) -> None:
    with pytest.raises(InvalidReportError) as caught:
        build_report(minimal_input(workspace={"root": str(project / "nope")}), env=env)
    assert caught.value.message == "workspace root is not an existing directory: ~/proj/nope"


def test_validation_errors_that_quote_the_input_are_redacted_too(env: dict[str, str]) -> None:
    # The model quotes a bad evidence name: the MCP tool returns that message as its result.
    env["GITHUB_TOKEN"] = SECRET
    with pytest.raises(InvalidReportError) as caught:
        build_report(minimal_input(evidence=[{"name": f"{SECRET}/x.log", "content": 1}]), env=env)
    assert SECRET not in caught.value.message
    assert "'[redacted:GITHUB_TOKEN]/x.log'" in caught.value.message
    assert caught.value.code == INVALID_INPUT


def test_read_input_reads_json_toml_or_a_stream_without_validating(tmp_path: Path) -> None:
    import io

    from beam_feedback import read_input

    (tmp_path / "a.json").write_text('{"title": "t", "extra": 1}', encoding="utf-8")
    (tmp_path / "a.toml").write_text('title = "t"\n', encoding="utf-8")
    (tmp_path / "sniffed").write_text('title = "from toml"\n', encoding="utf-8")
    assert read_input(tmp_path / "a.json") == {"title": "t", "extra": 1}
    assert read_input(str(tmp_path / "a.toml")) == {"title": "t"}
    assert read_input(tmp_path / "sniffed") == {"title": "from toml"}
    assert read_input(io.StringIO('{"title": "from a stream"}')) == {"title": "from a stream"}
    assert read_input(io.StringIO('title = "x"'), format="toml") == {"title": "x"}


def test_read_input_skips_a_byte_order_mark(tmp_path: Path) -> None:
    # Windows editors (Notepad, PowerShell's UTF-8) start a file with one; `json.loads` refuses it.
    import io

    from beam_feedback import read_input

    (tmp_path / "a.json").write_bytes(b'\xef\xbb\xbf{"title": "t"}')
    (tmp_path / "sniffed").write_bytes(b'\xef\xbb\xbf{"title": "t"}')
    (tmp_path / "a.toml").write_bytes(b'\xef\xbb\xbftitle = "t"')
    for name in ("a.json", "sniffed", "a.toml"):
        assert read_input(tmp_path / name) == {"title": "t"}
    assert read_input(io.StringIO('\ufeff{"title": "t"}')) == {"title": "t"}


def test_read_input_reports_unreadable_and_non_object_input(tmp_path: Path) -> None:
    from beam_feedback import read_input

    with pytest.raises(InvalidReportError, match=r"cannot read feedback input .*missing\.json"):
        read_input(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_bytes(b'{"title": "\xff"}')
    with pytest.raises(InvalidReportError, match="cannot read feedback input"):
        read_input(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(InvalidReportError, match="must be a JSON object"):
        read_input(tmp_path / "list.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"title": NaN}', "feedback input is not valid JSON: NaN is not valid JSON"),
        ("[" * 100_000, "feedback input is not valid JSON: nesting deeper than 512 levels"),
        ('{"a": {"b": 1, "b": 2}}', "feedback input repeats the key 'b'"),
    ],
)
def test_json_input_is_decoded_strictly(text: str, message: str) -> None:
    from beam_feedback import parse_report

    with pytest.raises(InvalidReportError) as info:
        parse_report(text, format="json")
    assert info.value.message == message and info.value.code == INVALID_INPUT


@pytest.mark.parametrize("number", ["nan", "+inf", "-inf"])
def test_toml_input_has_no_nan_or_infinity_either(number: str) -> None:
    # TOML has them, JSON does not: `request = {x = nan}` rendered `NaN` in the report's ```json block.
    from beam_feedback import parse_report

    text = 'title = "t"\nsummary = "s"\nreproduction = "r"\nexpected = "e"\nactual = "a"\n'
    with pytest.raises(InvalidReportError) as info:
        parse_report(f"{text}[request]\nx = {number}\n", format="toml")
    assert info.value.message == f"feedback input holds {number}: JSON has no NaN or Infinity"


def test_the_bundle_redacts_with_beam_lsps_rules(project: Path, env: dict[str, str]) -> None:
    # One redactor for every package: digits are segment boundaries and -D options are labelled by name.
    env.update(API_KEY2="api-key-two-value", KEYBOARD2_LAYOUT="keyboard-layout-2", XAUTHORITY2="/run/xauthority-2")
    argv = ["lean", "-Dfoo.token=dee-option-value"]
    redactor = Redactor.from_sources(env, argv, home=True)
    summary = "api-key-two-value keyboard-layout-2 /run/xauthority-2 dee-option-value"
    result = build_report(minimal_input(workspace=_workspace(project), summary=summary), env=env, redactor=redactor)
    assert "[redacted:API_KEY2] keyboard-layout-2 /run/xauthority-2 [redacted:foo.token]" in result.markdown
