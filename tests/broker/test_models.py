"""Operation models: strict closed inputs, and outputs whose schema is exactly the reply."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel, ValidationError

from beam_broker import OPERATIONS
from beam_broker import models as m
from beam_broker._probes import models as pm
from beam_broker.workspace import WorkspaceDescriptor

WS = {"root": "/r"}


@pytest.mark.parametrize(
    ("model", "arguments"),
    [
        (m.PositionInput, {"path": "A.lean", "version": "1", "line": 0, "character": 0, "workspace": WS}),
        (m.PositionInput, {"path": "A.lean", "version": 1.0, "line": 0, "character": 0, "workspace": WS}),
        (m.PositionInput, {"path": "A.lean", "version": True, "line": 0, "character": 0, "workspace": WS}),
        (m.SyncInput, {"path": "A.lean", "diagnostics_in_result": "true", "workspace": WS}),
        (m.SyncInput, {"path": "A.lean", "diagnostics_in_result": 1, "workspace": WS}),
        (m.FileInput, {"path": 3, "workspace": WS}),
        (m.FileInput, {"path": "A.lean", "workspace": {"root": 3}}),
        (m.FileInput, {"path": "A.lean", "workspace": WS, "extra": 1}),
        (m.PositionInput, {"path": "A.lean", "version": -1, "line": 0, "character": 0, "workspace": WS}),
    ],
)
def test_inputs_are_closed_and_strict(model: type[BaseModel], arguments: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(arguments)


def test_inputs_accept_exact_json_types() -> None:
    inp = m.TodoInput.model_validate(
        {
            "path": "A.lean",
            "version": 1,
            "start_line": 0,
            "start_character": 0,
            "end_line": 2,
            "end_character": 0,
            "kinds": ["sorry"],
            "workspace": WS,
        }
    )
    assert inp.kinds == ["sorry"] and inp.suggest == "basic" and inp.workspace.root == "/r"


def test_optional_none_fields_are_omitted_but_required_nullable_ones_stay() -> None:
    item = m.DiagItem(
        path="A.lean", uri="file:///A.lean", severity="error", range={}, message="x", completion_blocking=False
    )
    assert "save_blocking" not in item.dump() and "version" not in item.dump()
    run = pm.RunResult(workspace=WorkspaceDescriptor(root="/r"), success=True, proof_state=None, next_handle=None)
    assert run.dump() == {
        "workspace": WS,
        "success": True,
        "messages": [],
        "traces": [],
        "proof_state": None,
        "next_handle": None,
    }
    nested = m.GoalsResult(workspace=WorkspaceDescriptor(root="/r"), goals=[m.Goal(target="p")])
    assert nested.dump() == {"workspace": WS, "goals": [{"goalPrefix": "⊢ ", "target": "p", "hyps": []}]}


def test_lsp_passthrough_replies_are_lean_json_or_a_null_result() -> None:
    ws = WorkspaceDescriptor(root="/r")
    found = m.HoverResult(m.Hover(workspace=ws, contents={"kind": "markdown", "value": "x"}))
    assert found.model_dump(mode="json") == {"workspace": WS, "contents": {"kind": "markdown", "value": "x"}}
    none = m.HoverResult(m.NullResult(workspace=ws, result=None))
    assert none.model_dump(mode="json") == {"workspace": WS, "result": None}
    assert m.HoverResult.model_validate({"workspace": WS, "result": None}).root == none.root


def test_replies_put_the_workspace_first() -> None:
    for spec in OPERATIONS:
        schema = spec.output_model.model_json_schema(mode="serialization")
        if "properties" in schema:
            assert next(iter(schema["properties"])) == "workspace", spec.name


@pytest.mark.parametrize("spec", OPERATIONS, ids=lambda spec: spec.name)
def test_every_output_schema_is_a_root_object_that_requires_the_workspace(spec: Any) -> None:
    schema = spec.output_model.model_json_schema(mode="serialization")
    assert schema["type"] == "object"
    branches = (
        [schema]
        if "properties" in schema
        else [schema["$defs"][ref["$ref"].rsplit("/", 1)[-1]] for ref in schema["anyOf"]]
    )
    for branch in branches:
        assert "workspace" in branch["required"] and branch["additionalProperties"] is False


def test_a_sample_reply_validates_against_its_schema_and_a_wrong_one_does_not() -> None:
    schema = m.SyncReply.model_json_schema(mode="serialization")
    reply = m.SyncReply(
        workspace=WorkspaceDescriptor(root="/r"),
        path="A.lean",
        version=1,
        snapshot="s/1",
        diagnostics=m.Diagnostics(counts=m.DiagnosticCounts()),
        readiness=m.Readiness(
            save_ready=True, reason="ok", blocking_error_count=0, blocking_diagnostics=[], blocking_messages=[]
        ),
        document_progress=m.DocumentProgress(updates=2, done=True),
    ).dump()
    jsonschema.validate(reply, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**reply, "extra": 1}, schema)
    hover = m.HoverResult.model_json_schema(mode="serialization")
    jsonschema.validate({"workspace": WS, "result": None}, hover)
    jsonschema.validate({"workspace": WS, "contents": "x", "range": {}}, hover)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"workspace": WS}, hover)
