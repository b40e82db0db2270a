"""The operation registry: public order and flags, handlers and output models, `parse`, `preparation`, cheapness."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from beam_broker import BY_NAME, BY_TOOL, OPERATIONS, BrokerError
from beam_broker import errors as codes
from beam_broker import models as m
from beam_broker.operations import Scope, implemented
from tests.support.projects import fake_project


def test_the_registry_lists_upstream_tool_order_and_flags() -> None:
    names = [spec.tool for spec in OPERATIONS]
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
    assert sum(spec.read_only for spec in OPERATIONS) == 10
    assert {s.tool for s in OPERATIONS if s.destructive is False} == {"lean_run_at_handle", "lean_run_with"}
    assert {s.tool for s in OPERATIONS if s.idempotent} == {"lean_drop_workspace", "lean_close"}
    assert {s.tool for s in OPERATIONS if not s.cancellable} == {"lean_drop_workspace"}
    assert {s.tool for s in OPERATIONS if s.fence} == {"lean_drop_workspace"}
    assert {s.tool for s in OPERATIONS if s.scope is Scope.BROKER} == {"lean_drop_workspace"}
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
    assert BY_TOOL["lean_sync"] is BY_NAME["sync"] and implemented() == OPERATIONS


def test_every_entry_carries_its_handler_and_models() -> None:
    for spec in OPERATIONS:
        assert inspect.iscoroutinefunction(spec.handler), spec.name
        assert spec.handler.__module__.startswith("beam_broker._"), spec.name
        assert issubclass(spec.input_model, BaseModel) and issubclass(spec.output_model, BaseModel)
        assert "workspace" in spec.input_model.model_fields
    assert not hasattr(OPERATIONS[0], "method") and not hasattr(OPERATIONS[0], "options")
    handlers = [spec.handler for spec in OPERATIONS]
    assert len(set(handlers)) == len(handlers), "each operation has a handler of its own"


def test_importing_the_registry_loads_no_lean_client_stack() -> None:
    code = (
        "import json, sys, beam_broker.operations, beam_broker;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('lsprotocol', 'cattrs', 'beam_lsp.client',"
        " 'beam_broker.runtime', 'beam_broker.broker')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


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
        ({"path": 3}, "lean_sync: path: Input should be a valid string", None),
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
    assert [p.split(":")[0] for p in info.value.data["errors"]] == ["version", "line"]
