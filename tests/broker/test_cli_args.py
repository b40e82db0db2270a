"""`lean-beam` subcommands from the registry: their arguments, help text, and option values read back as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from beam_broker import OPERATIONS, BrokerError
from beam_broker import cli as beam_cli
from beam_broker import errors as codes
from beam_broker._cli import args as cli_args
from beam_broker._cli import commands as cli_commands
from beam_broker._cli.args import (
    HelpFormatter,
    Inputs,
    check_file,
    commands_table,
    locate,
    operation_arguments,
    resolve_cli_path,
    split_target,
    synopsis,
)
from beam_broker._cli.commands import Command, Shape, cli_text, command_name, field_args, first_sentence, shape
from beam_broker._cli.commands import _kind_of as kind_of
from beam_broker._cli.position import Source, Target
from beam_broker.config import DEFAULT_MAX_SOURCE_BYTES
from beam_broker.operations import BY_NAME
from tests.support.projects import fake_project


def command(name: str) -> Command:
    return Command.of(BY_NAME[name])


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def action_for(parser: argparse.ArgumentParser, dest: str) -> argparse.Action:
    [action] = [a for a in parser._actions if a.dest == dest]
    return action


def parse(*argv: str, stdin: str = "") -> dict[str, Any]:
    args = beam_cli.build_parser().parse_args(argv)
    return operation_arguments(command(args.operation), args, Inputs(stdin=io.StringIO(stdin)))


def test_each_input_field_becomes_an_argument_with_its_requiredness_and_choices() -> None:
    commands = subcommands(beam_cli.build_parser())
    for spec in OPERATIONS:
        parser = commands[command_name(spec)]
        fields = spec.input_model.model_fields
        assert not [a for a in parser._actions if a.dest == "field_workspace"]
        for arg in field_args(spec):
            action = action_for(parser, arg.dest)
            if arg.name == "path":
                assert action.option_strings == []  # positional
                continue
            spelled = arg.name[:-1] if arg.name == "texts" else arg.name  # one `--text` per item of a text list
            assert action.option_strings[0] == "--" + spelled.replace("_", "-")
            prefix = arg.name.removesuffix("character").removesuffix("line")
            paired = {f"{prefix}line", f"{prefix}character"} <= set(fields)  # a position: FILE:LINE:COL fills it
            implied = arg.name == "version" or (arg.name.endswith(("line", "character")) and paired)
            assert arg.implied == implied
            assert action.required == (fields[arg.name].is_required() and arg.kind != "bool" and not implied)
            if arg.kind == "choice":
                assert action.choices == arg.choices
    goals = commands["goals"]
    assert action_for(goals, "field_mode").choices == ("before", "after")
    assert action_for(goals, "field_mode").required is True
    assert action_for(commands["todo"], "field_suggest").choices == ("none", "basic")
    assert action_for(commands["sync"], "field_diagnostic_scope").choices == ("errors", "all")
    assert "--no-include-declaration" in action_for(commands["references"], "field_include_declaration").option_strings
    assert action_for(commands["sync"], "field_diagnostics_in_result").option_strings == ["--diagnostics-in-result"]


def test_a_field_type_the_cli_cannot_express_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot express"):
        kind_of(float)
    assert kind_of(list[Literal["a", "b"]]) == ("list", ("a", "b"))
    assert kind_of(int | None) == ("int", ())


def test_omitted_options_are_left_to_the_model_defaults_and_flags_map_to_booleans() -> None:
    assert parse("sync", "A.lean") == {"path": "A.lean"}
    assert parse("sync", "A.lean", "--diagnostics-in-result", "--diagnostic-scope", "all") == {
        "path": "A.lean",
        "diagnostics_in_result": True,
        "diagnostic_scope": "all",
    }
    refs = parse("references", "A.lean", "--version", "2", "--line", "0", "--character", "1")
    assert refs == {"path": "A.lean", "version": 2, "line": 0, "character": 1}
    no_decl = parse(
        "references", "A.lean", "--version", "2", "--line", "0", "--character", "1", "--no-include-declaration"
    )
    assert no_decl["include_declaration"] is False
    todo = parse("todo", "A.lean", "--version", "1", *("--start-line", "0", "--start-character", "0"),
                 *("--end-line", "9", "--end-character", "0", "--kinds", "sorry, hole"))  # fmt: skip
    assert todo["kinds"] == ["sorry", "hole"]
    assert parse("workspace-symbols", "--query", "MyNat") == {"query": "MyNat"}
    assert parse("drop-workspace") == {}


def test_text_and_json_values_come_inline_from_a_file_or_from_stdin(tmp_path: Path) -> None:
    (tmp_path / "probe.lean").write_text("#check two\n", encoding="utf-8")
    (tmp_path / "h.json").write_text('{"raw": {"value": "x"}}', encoding="utf-8")
    at = ("run-at", "A.lean", "--version", "1", "--line", "3", "--character", "0")
    assert parse(*at, "--text", "#check x")["text"] == "#check x"
    assert parse(*at, "--text", f"@{tmp_path / 'probe.lean'}")["text"] == "#check two\n"
    assert parse(*at, "--text", "-", stdin="exact h\n")["text"] == "exact h\n"
    assert parse(*at, "--text", "@@[simp] theorem t : True := trivial")["text"] == "@[simp] theorem t : True := trivial"
    h = parse("run-with", "A.lean", "--handle", f"@{tmp_path / 'h.json'}", "--text", "-", stdin="simp")
    assert h == {"path": "A.lean", "handle": {"raw": {"value": "x"}}, "text": "simp"}
    assert parse("release", "A.lean", "--handle", "-", stdin='{"a": 1}')["handle"] == {"a": 1}
    assert parse("release", "A.lean", "--handle", '{"a": [1]}')["handle"] == {"a": [1]}


@pytest.mark.parametrize(
    ("argv", "stdin", "fragment"),
    [
        (("release", "A.lean", "--handle", "{nope"), "", "not valid JSON"),
        (("release", "A.lean", "--handle", "[1]"), "", "expected a JSON object"),
        (("release", "A.lean", "--handle", '{"a": 1, "a": 2}'), "", "duplicate key"),
        (("release", "A.lean", "--handle", '{"a": NaN}'), "", "NaN"),
        (("release", "A.lean", "--handle", "@/nonexistent/h.json"), "", "cannot read"),
        (("run-with", "A.lean", "--handle", "-", "--text", "-"), "{}", "already read for --handle"),
        (("run-at", "A.lean", *("--version", "1", "--line", "0", "--character", "0"), "--text", "@[simp]"), "", "'@@'"),
    ],
)
def test_unreadable_or_malformed_values_are_invalid_input(argv: tuple[str, ...], stdin: str, fragment: str) -> None:
    with pytest.raises(BrokerError) as info:
        parse(*argv, stdin=stdin)
    assert info.value.code == codes.INVALID_INPUT and fragment in info.value.message


def test_a_file_that_is_not_utf8_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "bad.lean").write_bytes(b"\xff")
    at = ("run-at", "A.lean", "--version", "1", "--line", "0", "--character", "0")
    with pytest.raises(BrokerError, match="not UTF-8 text"):
        parse(*at, "--text", f"@{tmp_path / 'bad.lean'}")


def test_an_at_file_value_is_read_up_to_the_source_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # `@/dev/zero` was read until memory ran out; a pipe (`@/dev/stdin`, `@<(cmd)`) is still fine.
    assert cli_args.MAX_VALUE_CHARS == DEFAULT_MAX_SOURCE_BYTES
    monkeypatch.setattr(cli_args, "MAX_VALUE_CHARS", 1000)
    at = ("run-at", "A.lean", "--version", "1", "--line", "0", "--character", "0")
    with pytest.raises(BrokerError) as info:
        parse(*at, "--text", "@/dev/zero")
    assert info.value.code == codes.INVALID_INPUT and "longer than 1000 characters" in info.value.message


def test_relative_paths_follow_the_current_directory_then_the_project_root(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "", "Sub/B.lean": "", "Sub/C.lean": "", "Sub/Sub/C.lean": ""})
    sub = str(root / "Sub")
    assert resolve_cli_path("A.lean", str(root), str(root)) == "A.lean"
    assert resolve_cli_path("B.lean", str(root), sub) == "Sub/B.lean"
    assert resolve_cli_path("../A.lean", str(root), sub) == "A.lean"
    # A path Beam printed (root-relative) pasted in a subdirectory: not there, so the project root's.
    assert resolve_cli_path("Sub/B.lean", str(root), sub) == "Sub/B.lean"
    assert resolve_cli_path("A.lean", str(root), sub) == "A.lean"
    assert resolve_cli_path("Sub/C.lean", str(root), sub) == "Sub/Sub/C.lean"  # both exist: the current directory's
    assert resolve_cli_path("New.lean", str(root), sub) == "Sub/New.lean"  # neither: the current directory's
    assert resolve_cli_path("Sub/B.lean", str(root), str(tmp_path)) == "Sub/B.lean"  # outside: root-relative
    assert resolve_cli_path("/abs/X.lean", str(root), sub) == "/abs/X.lean"
    assert resolve_cli_path(str(root / "A.lean"), str(root), sub) == "A.lean"  # absolute inside: root-relative


def test_a_file_that_is_no_lean_source_or_lies_outside_the_project_is_refused_in_one_line(tmp_path: Path) -> None:
    root = str(fake_project(tmp_path / "p", {"A.lean": ""}))
    check_file("A.lean", "A.lean", root)
    for raw, path, needle in [
        ("notes.txt", "notes.txt", "notes.txt: not a Lean source file"),
        ("../lakefile.toml", "lakefile.toml", "not a Lean source file"),
        ("/tmp/X.lean", "/tmp/X.lean", f"/tmp/X.lean: outside the project {root}; "),
    ]:
        with pytest.raises(BrokerError) as info:
            check_file(raw, path, root)
        assert info.value.code == codes.INVALID_INPUT and needle in info.value.message
        assert "\n" not in info.value.message


def test_descriptions_become_cli_help() -> None:
    assert cli_text("Like lean_run_at, but see lean_nope.") == "Like `lean-beam run-at`, but see lean_nope."
    assert first_sentence("One: two. Three.") == "One" and first_sentence("no stop") == "no stop"
    assert synopsis(command("references")) == "FILE:LINE:COL [--version N] [--no-include-declaration]"
    assert synopsis(command("document_symbols")) == "PATH [--version N]"
    assert synopsis(command("todo")).startswith("FILE[:LINE:COL-LINE:COL] [--version N] [--kinds")
    assert synopsis(command("todo")).endswith(
        "[--kinds {sorry,hole,diagnostic,code_action,incomplete_proof},...] [--suggest {none,basic}]"
    )
    wrapped = HelpFormatter("lean-beam")._split_lines("use lean-beam sync   often", 12)
    assert wrapped == ["use", "lean-beam", "sync often"]


def test_the_commands_table_in_docs_is_generated_from_the_registry() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("<!-- commands:start", 1)[1].split("-->", 1)[1].split("<!-- commands:end -->", 1)[0]
    assert section.lstrip("\n") == commands_table(), "regenerate: python -m beam_broker._cli.args"


def test_the_file_argument_shape_is_derived_from_the_input_model_fields() -> None:
    shapes = {spec.name: shape(spec) for spec in OPERATIONS}
    points = {name for name, form in shapes.items() if form.point}
    with_position = {s.name for s in OPERATIONS if {"line", "character"} <= set(s.input_model.model_fields)}
    assert points == with_position
    assert {"run_at", "run_at_handle", "hover", "signature_help", "definition", "references", "goals"} <= points
    assert {name for name, form in shapes.items() if form.range} == {"todo"}
    assert shapes["todo"].fields() == ("start_line", "start_character", "end_line", "end_character")
    versioned = {name for name, form in shapes.items() if form.versioned}
    assert versioned == {spec.name for spec in OPERATIONS if "version" in spec.input_model.model_fields}
    assert versioned == {spec.name for spec in OPERATIONS if spec.version_bound}
    assert shapes["sync"] == Shape() and shapes["sync"].metavar == "PATH"


class Odd(BaseModel):
    path: str
    a_line: int
    a_character: int
    b_line: int
    b_character: int
    c_line: int
    c_character: int


def test_position_fields_that_form_neither_a_position_nor_a_range_are_refused() -> None:
    odd = dataclasses.replace(BY_NAME["hover"], input_model=Odd)
    with pytest.raises(TypeError, match="cannot take the positions"):
        shape(odd)


def test_a_lean_position_fills_the_lsp_fields_with_the_utf16_column() -> None:
    source = Source.of("prelude\n/- 𝔸𝔹 é -/ def u := x\n")
    hover, todo = command("hover"), command("todo")
    args: dict[str, Any] = {}
    locate(hover, args, split_target(hover, "A.lean:2:19"), source)
    assert args == {"line": 1, "character": 21}  # two astral characters before column 19: two more UTF-16 units
    args = {}
    locate(hover, args, split_target(hover, "A.lean:2:19"), None)  # unreadable file: the column as it is
    assert args == {"line": 1, "character": 19}
    args = {}
    locate(todo, args, split_target(todo, "A.lean:1:0-2:5"), source)
    assert args == {"start_line": 0, "start_character": 0, "end_line": 1, "end_character": 7}
    args = {}
    locate(todo, args, split_target(todo, "A.lean"), source)
    assert args == {"start_line": 0, "start_character": 0, "end_line": 2, "end_character": 0}
    args = {"line": 3, "character": 4}
    locate(hover, args, split_target(hover, "A.lean"), source)  # the flags, for scripts
    assert args == {"line": 3, "character": 4}
    sync = command("sync")
    assert split_target(sync, "A.lean:1:2") == Target("A.lean:1:2")  # a plain path for file commands
    args = {}
    locate(sync, args, Target("A.lean"), source)
    assert args == {}


@pytest.mark.parametrize(
    ("name", "raw", "given", "fragment"),
    [
        ("hover", "A.lean", {}, "needs FILE:LINE:COL"),
        ("hover", "A.lean", {"line": 1}, "needs FILE:LINE:COL"),
        ("hover", "A.lean:1:1", {"line": 1}, "not both"),
        ("todo", "A.lean", {"start_line": 0}, "needs FILE[:LINE:COL-LINE:COL]"),
    ],
)
def test_a_missing_or_doubled_position_is_invalid_input(
    name: str, raw: str, given: dict[str, int], fragment: str
) -> None:
    spec = command(name)
    with pytest.raises(BrokerError) as info:
        locate(spec, dict(given), split_target(spec, raw), Source.of("x\n"))
    assert info.value.code == codes.INVALID_INPUT and fragment in info.value.message
    with pytest.raises(BrokerError, match=r"cannot read A\.lean to cover all of it"):
        locate(command("todo"), {}, Target("A.lean"), None)  # no text to find the end of the file in


def _loads_in_a_fresh_process(cache: Path) -> dict[str, Any]:
    """What a fresh `lean-beam` process loads to build its parser, with `cache` as its cache home."""
    script = (
        "import json, sys\n"
        "from beam_broker import cli\n"
        "cli.build_parser()\n"
        "print(json.dumps({m: m in sys.modules for m in ('pydantic', 'beam_broker.models', 'beam_broker.operations')}))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def test_commands_derived_once_are_read_back_equal_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    derived = cli_commands.derive_commands()
    assert [c.name for c in derived] == [spec.name for spec in OPERATIONS]
    assert cli_commands.commands() == derived  # derived, and written
    [cached] = (tmp_path / "lean-beam").glob("commands-*.json")
    assert tuple(Command.from_json(item) for item in json.loads(cached.read_text())) == derived
    cached.write_text('[{"name": "hover"}]')  # damaged: derived again, and rewritten
    assert cli_commands.commands() == derived
    assert tuple(Command.from_json(item) for item in json.loads(cached.read_text())) == derived


def test_a_warm_cache_builds_the_parser_without_the_registry_models(tmp_path: Path) -> None:
    first = _loads_in_a_fresh_process(tmp_path)
    assert first["beam_broker.models"] is True  # nothing cached yet: derived from the registry
    again = _loads_in_a_fresh_process(tmp_path)
    assert again == {"pydantic": False, "beam_broker.models": False, "beam_broker.operations": False}


def test_an_unwritable_cache_still_gives_every_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cli_commands.commands() == cli_commands.derive_commands()
    assert blocker.read_text() == "not a directory"


def test_a_list_of_texts_is_one_repeated_option_never_split_at_commas(tmp_path: Path) -> None:
    alt = tmp_path / "alt.lean"
    alt.write_text("exact ⟨a, b⟩", encoding="utf-8")
    got = parse(
        "attempts",
        "A.lean:2:3",
        "--text",
        "constructor <;> simp [f, g]",
        "--text",
        f"@{alt}",
        "--text",
        "-",
        stdin="omega",
    )
    assert got["texts"] == ["constructor <;> simp [f, g]", "exact ⟨a, b⟩", "omega"]
    assert synopsis(command("attempts")) == "FILE:LINE:COL [--version N] --text TEXT ... [--handles]"
    with pytest.raises(SystemExit):
        parse("attempts", "A.lean:2:3", "--texts", "a")  # the field's own name is not an option
    with pytest.raises(SystemExit):
        parse("hover", "A.lean:2:3", "--vers", "1")  # nor is a prefix of an option


def test_a_position_the_model_makes_optional_may_be_left_out() -> None:
    axioms = command("axioms")
    assert axioms.shape.point and axioms.shape.optional and axioms.shape.metavar == "FILE[:LINE:COL]"
    assert not command("hover").shape.optional
    args: dict[str, Any] = {"name": "Foo.bar"}
    locate(axioms, args, split_target(axioms, "A.lean"), None)
    assert args == {"name": "Foo.bar"}
    locate(axioms, args, split_target(axioms, "A.lean:3:4"), Source.of("a\nb\nc\u00e9de\n"))
    assert args == {"name": "Foo.bar", "line": 2, "character": 4}
    with pytest.raises(BrokerError, match="needs FILE\\[:LINE:COL\\]"):
        locate(axioms, {"line": 1}, split_target(axioms, "A.lean"), None)  # half a position is still refused


def test_an_edit_in_any_subfolder_of_the_package_derives_the_commands_again(tmp_path: Path) -> None:
    package = tmp_path / "beam_broker"
    shutil.copytree(cli_commands.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = cli_commands.fingerprint(package)
    assert cli_commands.fingerprint(package) == before
    for edited in ("operations.py", "_ops/sync.py", "_probes/models.py", "_cli/args.py"):
        source = package / edited
        source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        after = cli_commands.fingerprint(package)
        assert after != before, edited
        before = after
    assert cli_commands.fingerprint() == cli_commands.fingerprint(cli_commands.PACKAGE)
