"""The one exception boundary (`errors.to_wire`): which failures are JSON-RPC errors and which are tool results.

The server-level consequences (a broker error is a tool result, a runtime setup failure is `-32600`) are checked
end to end in `test_calls`; here each kind of exception is mapped directly, including the ones the real broker
never lets through.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from beam_broker import BrokerError
from beam_feedback import FeedbackError
from beam_mcp.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RUNTIME_SETUP_PREFIX,
    JsonRpcError,
    ToolFailure,
    to_wire,
    tool_error,
    tool_result,
)


def is_tool_error(wire: Any, error: dict[str, Any]) -> None:
    assert isinstance(wire, dict) and wire["isError"] is True
    assert wire["structuredContent"] == error
    assert json.loads(wire["content"][0]["text"]) == error


def test_a_json_rpc_error_is_itself() -> None:
    error = JsonRpcError(INVALID_PARAMS, "bad", {"x": 1})
    assert to_wire(error) is error
    assert error.wire() == {"code": INVALID_PARAMS, "message": "bad", "data": {"x": 1}}


def test_broker_errors_are_tool_errors_with_their_code_message_and_data() -> None:
    wire = to_wire(BrokerError("contentModified", "stale", {"reason": "documentVersionMismatch"}), tool=True)
    is_tool_error(wire, {"code": "contentModified", "message": "stale", "data": {"reason": "documentVersionMismatch"}})
    is_tool_error(
        to_wire(BrokerError("internalError", "kaput"), tool=True), {"code": "internalError", "message": "kaput"}
    )


@pytest.mark.parametrize("message", ["no Lean server command", RUNTIME_SETUP_PREFIX + "no Lean server command"])
def test_a_runtime_setup_failure_is_the_seeds_invalid_request(message: str) -> None:
    wire = to_wire(BrokerError("runtimeSetup", message))
    assert isinstance(wire, JsonRpcError) and wire.code == INVALID_REQUEST
    assert wire.message == RUNTIME_SETUP_PREFIX + "no Lean server command"  # the prefix is never doubled


def test_feedback_and_process_tool_failures_are_tool_errors() -> None:
    is_tool_error(
        to_wire(FeedbackError("title must not be blank"), tool=True),
        {"code": "invalidInput", "message": "title must not be blank"},
    )
    wire = to_wire(
        ToolFailure("invalidInput", "beam_version accepts no undeclared input fields: x", {"fields": ["x"]}), tool=True
    )
    is_tool_error(
        wire,
        {
            "code": "invalidInput",
            "message": "beam_version accepts no undeclared input fields: x",
            "data": {"fields": ["x"]},
        },
    )


def test_anything_else_is_a_logged_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="beam_mcp"):
        wire = to_wire(RuntimeError("kaput"))
    assert isinstance(wire, JsonRpcError) and wire.code == INTERNAL_ERROR
    assert "kaput" not in wire.message  # the details go to the log, not to the client
    logged = [record.exc_info[1] for record in caplog.records if record.exc_info]
    assert any(isinstance(exc, RuntimeError) and exc.args == ("kaput",) for exc in logged)


def test_tool_results_carry_the_same_json_twice() -> None:
    assert tool_result({"a": 1}) == {
        "content": [{"type": "text", "text": '{"a":1}'}],
        "structuredContent": {"a": 1},
        "isError": False,
    }
    assert tool_result([1, 2])["structuredContent"] == {"result": [1, 2]}  # structured content is an object
    assert tool_error("x", "y")["structuredContent"] == {"code": "x", "message": "y"}


def test_outside_a_tool_call_a_starting_server_is_32051_and_other_broker_errors_are_internal() -> None:
    starting = to_wire(BrokerError("serverStarting", "Lean is starting"))
    assert isinstance(starting, JsonRpcError) and starting.code == -32051
    other = to_wire(BrokerError("contentModified", "stale"))
    assert isinstance(other, JsonRpcError) and other.code == -32603
    setup = to_wire(BrokerError("runtimeSetup", "no lake"), tool=True)
    assert isinstance(setup, JsonRpcError) and setup.message.startswith("could not set up Lean Beam MCP runtime: ")
