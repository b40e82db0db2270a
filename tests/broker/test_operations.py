"""The operation registry: public order and flags, handlers and output models, `parse`, `preparation`, cheapness."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from beam_broker import BY_NAME, BY_TOOL, OPERATIONS, BrokerError
from beam_broker import errors as codes
from beam_broker import models as m
from beam_broker._ops import models as om
from beam_broker._probes import models as pm
from beam_broker.events import Progress
from beam_broker.operations import REGISTRY, BrokerOperation, Operation, Registry, Scope, WorkspaceOperation
from beam_broker.workspace import WorkspaceDescriptor
from tests.support.projects import fake_project

SEED = [spec for spec in OPERATIONS if not spec.extension]
"""The operations of the seed's tool surface (what `lean-beam-mcp --tools beam` serves)."""


def test_the_registry_lists_upstream_tool_order_and_flags() -> None:
    names = [spec.tool for spec in SEED]
    assert names == [
        "lean_drop_workspace",
        "lean_run_at",
        "lean_run_at_handle",
        "lean_hover",
        "lean_signature_help",
        "lean_definition",
        "lean_references",
        "lean_document_symbols",
        "lean_workspace_symbols",
        "lean_goals",
        "lean_todo",
        "lean_code_action_resolve",
        "lean_run_with",
        "lean_run_with_linear",
        "lean_release",
        "lean_update",
        "lean_sync",
        "lean_refresh",
        "lean_save",
        "lean_close_save",
        "lean_close",
    ]
    assert sum(spec.read_only for spec in SEED) == 10
    assert {s.tool for s in SEED if s.destructive is False} == {"lean_run_at_handle", "lean_run_with"}
    assert {s.tool for s in SEED if s.idempotent} == {"lean_drop_workspace", "lean_close"}
    assert {s.tool for s in SEED if not s.cancellable} == {"lean_drop_workspace"}
    assert {s.tool for s in SEED if s.fence} == {"lean_drop_workspace"}
    assert {s.tool for s in SEED if s.scope is Scope.BROKER} == {"lean_drop_workspace"}
    for spec in OPERATIONS:
        assert (
            spec.description.endswith(
                "Beam never applies source edits to `.lean` files on disk; the client applies source edits."
            )
            or spec.scope is Scope.BROKER
        )
        required = [name for name, f in spec.input_model.model_fields.items() if f.is_required()]
        assert required[-1] == "workspace", spec.name
    assert BY_NAME["sync"].key == "sync_file" and BY_NAME["hover"].key == "hover"
    assert BY_TOOL["lean_sync"] is BY_NAME["sync"] and REGISTRY.operations == OPERATIONS


def test_the_operations_beyond_the_seed_follow_it_read_only_and_version_bound() -> None:
    assert OPERATIONS[: len(SEED)] == tuple(SEED), "the seed's operations come first, in the seed's order"
    added = OPERATIONS[len(SEED) :]
    assert [spec.tool for spec in added] == [
        "lean_completions", "lean_outline", "lean_attempts", "lean_axioms", "lean_profile", "lean_run_code",
        "lean_term_goal", "lean_widgets", "lean_widget_source", "lean_interactive_diagnostics",
    ]  # fmt: skip
    for spec in added[:2]:
        assert spec.extension and spec.read_only and spec.version_bound and spec.cancellable, spec.name
        assert spec.destructive is None and not spec.idempotent and not spec.fence and spec.scope is Scope.WORKSPACE
        assert spec.key == spec.name and not spec.document_progress
    assert BY_NAME["completions"].progress == Progress.PREPARATION | Progress.FILE
    assert BY_NAME["outline"].progress == Progress.PREPARATION | Progress.SETUP | Progress.FILE, "it streams the file"
    assert (BY_NAME["completions"].input_model, BY_NAME["completions"].output_model) == (
        om.CompletionsInput,
        om.CompletionsResult,
    )
    assert (BY_NAME["outline"].input_model, BY_NAME["outline"].output_model) == (om.OutlineInput, om.OutlineResult)
    assert BY_TOOL["lean_outline"].preparation("A.lean") == "lean_outline on A.lean: preparing the Lean workspace"


def test_the_term_goal_and_widget_operations_read_one_document_version() -> None:
    lean = [BY_NAME[name] for name in ("term_goal", "widgets", "widget_source", "interactive_diagnostics")]
    for spec in lean:
        assert spec.extension and spec.read_only and spec.version_bound and spec.cancellable, spec.name
        assert spec.destructive is None and not spec.idempotent and not spec.fence and spec.scope is Scope.WORKSPACE
        assert spec.key == spec.name and not spec.document_progress, spec.name
    assert [spec.input_model for spec in lean] == [
        m.PositionInput,
        m.PositionInput,
        om.WidgetSourceInput,
        om.InteractiveDiagnosticsInput,
    ]
    assert BY_NAME["term_goal"].progress == BY_NAME["widgets"].progress == Progress.PREPARATION | Progress.FILE
    full = Progress.PREPARATION | Progress.SETUP | Progress.FILE
    assert BY_NAME["interactive_diagnostics"].progress == full, "it waits for the whole file"


def test_the_probe_operations_beyond_the_seed_tell_the_truth_about_what_they_keep() -> None:
    probes = [BY_NAME[name] for name in ("attempts", "axioms", "profile", "run_code")]
    for spec in probes:
        assert spec.extension and spec.cancellable and not spec.idempotent and not spec.fence, spec.name
        assert spec.scope is Scope.WORKSPACE and spec.key == spec.name and not spec.document_progress, spec.name
        assert spec.progress == Progress.PREPARATION | Progress.SETUP | Progress.FILE, spec.name
    attempts, axioms, profile, run_code = probes
    # attempts may mint handles (state that outlives the call), like run_at_handle: not read-only, not destructive
    assert (attempts.read_only, attempts.destructive) == (False, False)
    assert all(spec.read_only and spec.destructive is None for spec in (axioms, profile, run_code))
    assert attempts.version_bound and axioms.version_bound and profile.version_bound
    assert not run_code.version_bound, "a scratch text belongs to no document version"
    assert [(s.input_model, s.output_model) for s in probes] == [
        (pm.AttemptsInput, pm.AttemptsResult),
        (pm.AxiomsInput, pm.AxiomsResult),
        (pm.ProfileInput, pm.ProfileResult),
        (pm.RunCodeInput, pm.RunCodeResult),
    ]
    assert run_code.preparation(None) == "lean_run_code: preparing the Lean workspace"


@pytest.mark.parametrize(
    ("limit", "accepted"),
    [(1, True), (50, True), (500, True), (0, False), (501, False), ("5", False), (2.0, False), (True, False)],
)
def test_the_completion_limit_is_a_strict_bounded_integer(tmp_path: Path, limit: object, accepted: bool) -> None:
    root = fake_project(tmp_path / "p")
    arguments = {
        "path": "A.lean",
        "version": 1,
        "line": 0,
        "character": 0,
        "limit": limit,
        "workspace": {"root": str(root)},
    }
    if accepted:
        parsed = BY_NAME["completions"].parse(arguments)
        assert isinstance(parsed, om.CompletionsInput) and parsed.limit == limit
    else:
        with pytest.raises(BrokerError) as info:
            BY_NAME["completions"].parse(arguments)
        assert info.value.code == codes.INVALID_INPUT and "limit" in info.value.message
    default = BY_NAME["completions"].parse({k: v for k, v in arguments.items() if k != "limit"})
    assert isinstance(default, om.CompletionsInput) and default.limit == om.COMPLETIONS_LIMIT == 50


def test_every_entry_carries_its_handler_and_models() -> None:
    for spec in OPERATIONS:
        assert inspect.iscoroutinefunction(spec.handler), spec.name
        assert spec.handler.__module__.startswith("beam_broker._"), spec.name
        assert issubclass(spec.input_model, BaseModel) and issubclass(spec.output_model, BaseModel)
        assert "workspace" in spec.input_model.model_fields
    assert not hasattr(OPERATIONS[0], "method") and not hasattr(OPERATIONS[0], "options")
    handlers = [spec.handler for spec in OPERATIONS]
    assert len(set(handlers)) == len(handlers), "each operation has a handler of its own"


def test_importing_the_registry_loads_no_handler_module_and_no_lean_client_stack() -> None:
    code = (
        "import json, sys, beam_broker.operations, beam_broker;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('lsprotocol', 'cattrs', 'beam_lsp.client',"
        " 'beam_broker.runtime', 'beam_broker.broker', 'beam_broker._call', 'beam_broker._ops.',"
        " 'beam_broker._probes.run', 'beam_broker._probes.attempts')) and m != 'beam_broker._ops.models')))"
    )  # the models of the operations beyond upstream's 24 tools are models, not handlers
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


class Table:
    """A broker's table of runtimes, as a broker-scoped handler sees it."""

    def __init__(self) -> None:
        self.dropped: list[WorkspaceDescriptor] = []

    async def drop(self, descriptor: WorkspaceDescriptor) -> bool:
        self.dropped.append(descriptor)
        return False


@pytest.mark.anyio
async def test_a_handler_loads_its_module_when_it_first_runs_and_checks_both_types(tmp_path: Path) -> None:
    spec = BY_NAME["drop_workspace"]
    assert isinstance(spec, BrokerOperation) and spec.scope is Scope.BROKER
    table = Table()
    inp = spec.parse({"workspace": {"root": str(tmp_path)}})
    assert isinstance(inp, m.WorkspaceInput)
    assert await spec.run(table, inp) == m.DropResult(
        workspace=inp.workspace, dropped=False, invalidated_handles=False, reason="notFound"
    )
    assert table.dropped == [inp.workspace]
    with pytest.raises(TypeError, match="drop_workspace takes WorkspaceInput, not FileInput"):
        await spec.run(table, m.FileInput(path="A.lean", workspace=inp.workspace))

    async def wrong(runtimes: Any, inp: Any) -> Any:
        return m.CloseResult(workspace=inp.workspace, closed=True)

    broken = dataclasses.replace(spec, handler=wrong)
    with pytest.raises(TypeError, match="drop_workspace returned CloseResult, not DropResult"):
        await broken.run(table, inp)


def test_a_registry_replaces_operations_by_name_and_refuses_two_of_one_name() -> None:
    sync = BY_NAME["sync"]
    assert isinstance(sync, WorkspaceOperation)
    quiet = dataclasses.replace(sync, description="quiet")
    replaced = REGISTRY.replacing(quiet)
    assert replaced.by_name["sync"] is quiet and replaced.by_tool["lean_sync"] is quiet
    assert [spec.name for spec in replaced] == [spec.name for spec in REGISTRY] and len(replaced) == len(REGISTRY)
    assert REGISTRY.by_name["sync"] is sync, "the built-in registry is unchanged"
    with pytest.raises(ValueError, match="no operation named nope"):
        REGISTRY.replacing(dataclasses.replace(sync, name="nope"))
    with pytest.raises(ValueError, match="two operations have one name"):
        Registry((sync, quiet))


def test_preparation_messages_name_the_tool_and_the_path() -> None:
    assert BY_NAME["sync"].preparation("A.lean") == "lean_sync on A.lean: preparing the Lean workspace"
    assert BY_NAME["workspace_symbols"].preparation(None) == "lean_workspace_symbols: preparing the Lean workspace"
    assert BY_NAME["drop_workspace"].preparation(None) == "lean_drop_workspace: preparing workspace eviction"


def test_parse_resolves_the_workspace_and_returns_the_input_model(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p")
    (tmp_path / "alias").symlink_to(root)
    inp = BY_NAME["hover"].parse(
        {"path": "A.lean", "version": 1, "line": 0, "character": 2, "workspace": {"root": str(tmp_path / "alias")}}
    )
    assert isinstance(inp, m.PositionInput) and inp.workspace.root == str(root)
    gone = BY_NAME["drop_workspace"].parse({"workspace": {"root": "/gone/x/.."}})
    assert isinstance(gone, m.WorkspaceInput) and gone.workspace.root == "/gone"


@pytest.mark.parametrize(
    ("arguments", "needle", "data"),
    [
        ([], "lean_sync arguments must be an object", None),
        (
            {"path": "A.lean", "b": 1, "a": 2},
            "lean_sync accepts no undeclared input fields: a, b",
            {"fields": ["a", "b"]},
        ),
        ({"path": "A.lean"}, "workspace is required", None),
        ({"path": "A.lean", "diagnostics_in_result": "true", "WS": None}, "undeclared", None),
        ({"path": "A.lean", "diagnostics_in_result": "true"}, "diagnostics_in_result", None),
        ({"path": 3}, "lean_sync: path must be a string (got 3)", None),
    ],
)
def test_parse_rejects_bad_arguments_as_invalid_input(
    tmp_path: Path, arguments: object, needle: str, data: dict[str, object] | None
) -> None:
    root = fake_project(tmp_path / "p")
    if (
        isinstance(arguments, dict)
        and "path" in arguments
        and "WS" not in arguments
        and needle != "workspace is required"
    ):
        arguments = {**arguments, "workspace": {"root": str(root)}}
    with pytest.raises(BrokerError) as info:
        BY_NAME["sync"].parse(arguments)  # type: ignore[arg-type]
    assert info.value.code == codes.INVALID_INPUT and needle in info.value.message
    if data is not None:
        assert info.value.data == data


def test_parse_errors_list_every_problem(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p")
    with pytest.raises(BrokerError) as info:
        BY_NAME["hover"].parse(
            {"path": "A.lean", "version": "1", "line": -1, "character": 0, "workspace": {"root": str(root)}}
        )
    assert info.value.data is not None
    assert [re.split(r"[ :\[]", p)[0] for p in info.value.data["errors"]] == ["version", "line"]


# ---- tables over every operation's fields -------------------------------------------------------------
def _valid(annotation: Any, root: str) -> Any:
    """A valid value of an input field's type (so that only the field under test is wrong)."""
    if annotation is WorkspaceDescriptor:
        return {"root": root}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return _valid(next(a for a in args if a is not type(None)), root)
    if origin is list:
        return [_valid(args[0], root)]
    if annotation is dict or origin is dict:
        return {"k": "v"}
    return {str: "A.lean", int: 0, bool: True}[annotation]


def _arguments(spec: Operation, root: str) -> dict[str, Any]:
    """Valid arguments: each field's default when it has one (a bounded `limit`), else a value of its type.

    A document state is named by its version (a pinned input takes a version or a snapshot, never both).
    """
    return {
        name: field.default if field.default not in (None, PydanticUndefined) else _valid(field.annotation, root)
        for name, field in spec.input_model.model_fields.items()
        if name != "snapshot"
    }


def _text_slots(spec: Operation, bad: str) -> list[tuple[str, str, Any]]:
    """(field, path of the bad string, the field's value holding it) for every place a string can go."""
    slots: list[tuple[str, str, Any]] = []
    for name, field in spec.input_model.model_fields.items():
        value = _valid(field.annotation, "/r")
        if isinstance(value, str):
            slots.append((name, name, bad))
        elif isinstance(value, list):
            slots.append((name, f"{name}[0]", [bad]))
        elif name == "workspace":
            slots.append((name, "workspace.root", {"root": bad}))
        elif isinstance(value, dict):
            slots.append((name, f"{name}.k", {"k": bad}))
            slots.append((name, f"{name}.nested[1]", {"nested": ["ok", bad]}))
    return slots


TEXT_CASES = [
    pytest.param(spec, field, where, value, reason, id=f"{spec.name}-{where}-{label}")
    for bad, reason, label in [
        ("a\x00b", "contains a NUL character", "nul"),
        ("a\ud800b", "contains a lone surrogate (U+D800)", "surrogate"),
    ]
    for spec in OPERATIONS
    for field, where, value in _text_slots(spec, bad)
]


@pytest.mark.parametrize(("spec", "field", "where", "value", "reason"), TEXT_CASES)
def test_nul_or_a_lone_surrogate_in_any_string_argument_is_invalid_input_naming_the_field(
    tmp_path: Path, spec: Operation, field: str, where: str, value: Any, reason: str
) -> None:
    # Finding 3: such text gave -32603 and a traceback for most tools. The check comes before any filesystem
    # work: the workspace root here does not exist, and it is not what the error is about.
    arguments = {**_arguments(spec, str(tmp_path / "no-such-root")), field: value}
    with pytest.raises(BrokerError) as info:
        spec.parse(arguments)
    assert info.value.code == codes.INVALID_INPUT
    assert info.value.data == {"field": where, "reason": reason}
    assert info.value.message == f"{spec.tool}: {where} {reason}"
    info.value.message.encode("utf-8")  # the answer itself can always be sent


def test_an_object_key_that_cannot_go_on_is_named_before_undeclared_fields_are(tmp_path: Path) -> None:
    with pytest.raises(BrokerError) as info:
        BY_NAME["sync"].parse({"path": "A.lean", "\ud800": 1, "workspace": {"root": str(tmp_path)}})
    assert info.value.data == {"field": '["\\ud800"]', "reason": "object key contains a lone surrogate (U+D800)"}
    info.value.message.encode("utf-8")


def _typed_fields(kind: type) -> list[tuple[Operation, str]]:
    return [
        (spec, name)
        for spec in OPERATIONS
        for name, field in spec.input_model.model_fields.items()
        if field.annotation is kind or (kind is int and name == "version")  # optional beside a snapshot
    ]


STRICT_CASES = [
    pytest.param(spec, name, value, id=f"{spec.name}-{name}-{value!r}")
    for kind, values in [(int, ["3", 3.0, True, None]), (bool, ["true", 1, "false", 0, None])]
    for spec, name in _typed_fields(kind)
    for value in values
    if not (name == "version" and value is None)  # no version: a snapshot is required (the one-pin tests)
]


def test_the_strict_tables_cover_every_integer_and_boolean_field() -> None:
    ints = {name for _, name in _typed_fields(int)}
    bools = {name for _, name in _typed_fields(bool)}
    assert ints == {
        "version", "line", "character", "start_line", "start_character", "end_line", "end_character", "limit",
        "threshold_ms",
    }  # fmt: skip
    assert bools == {"diagnostics_in_result", "include_declaration", "handles", "rebuild_imports", "exact"}
    versions = sum(name == "version" for _, name in _typed_fields(int))
    assert len(STRICT_CASES) == 4 * len(_typed_fields(int)) - versions + 5 * len(_typed_fields(bool))


@pytest.mark.parametrize(("spec", "field", "value"), STRICT_CASES)
def test_integer_and_boolean_fields_refuse_strings_and_other_types(
    tmp_path: Path, spec: Operation, field: str, value: Any
) -> None:
    # Finding 10: "line": "3" and "diagnostics_in_result": "true" were accepted although the schema says
    # integer/boolean. Every such field of every operation refuses them (and floats, bools as ints, 0/1 as bools).
    root = fake_project(tmp_path / "p")
    arguments = _arguments(spec, str(root))
    spec.parse(arguments)  # the base arguments are valid
    with pytest.raises(BrokerError) as info:
        spec.parse({**arguments, field: value})
    assert info.value.code == codes.INVALID_INPUT and info.value.data is not None
    assert [re.split(r"[ :\[]", problem)[0] for problem in info.value.data["errors"]] == [field]


def test_validation_problems_are_said_in_plain_words_never_the_validation_library_s(tmp_path: Path) -> None:
    # Finding: `Value error, ...` and `kinds.0: Input should be ...` reached people and agents.
    root = {"root": str(fake_project(tmp_path / "p"))}
    with pytest.raises(BrokerError) as info:
        BY_NAME["todo"].parse(
            {"workspace": root, "path": "A.lean", "version": 1, "kinds": ["nope"]}
            | dict.fromkeys(["start_line", "start_character", "end_line", "end_character"], 0)
        )
    message = info.value.message
    assert message.startswith("lean_todo: kinds[0] must be ") and message.endswith(' (got "nope")'), message
    with pytest.raises(BrokerError) as missing:
        BY_NAME["axioms"].parse({"workspace": root, "path": "A.lean", "version": 1})
    assert missing.value.message == "lean_axioms: name, or line and character, is required"
