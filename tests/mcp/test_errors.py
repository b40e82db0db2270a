"""The one exception boundary (`errors.to_wire`, `errors.tool_failure`): JSON-RPC errors and tool errors.

The server-level consequences (a broker error is a tool result, a runtime setup failure is `-32600`) are checked
end to end in `test_calls`; here each kind of exception is mapped directly, including the ones the real broker
never lets through.
"""

from __future__ import annotations

import json
import logging

import pytest

from beam_broker import BrokerError
from beam_feedback import FeedbackError
from beam_mcp._protocol import tool_result
from beam_mcp.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RUNTIME_SETUP_PREFIX,
    JsonRpcError,
    ToolFailure,
    to_wire,
    tool_failure,
)


def test_a_json_rpc_error_is_itself() -> None:
    error = JsonRpcError(INVALID_PARAMS, "bad", {"x": 1})
    assert to_wire(error) is error
    assert error.wire() == {"code": INVALID_PARAMS, "message": "bad", "data": {"x": 1}}


def test_broker_errors_are_tool_errors_with_their_code_message_and_data() -> None:
    failure = tool_failure(BrokerError("contentModified", "stale", {"reason": "documentVersionMismatch"}))
    assert failure == {"code": "contentModified", "message": "stale", "data": {"reason": "documentVersionMismatch"}}
    assert tool_failure(BrokerError("internalError", "kaput")) == {"code": "internalError", "message": "kaput"}


@pytest.mark.parametrize("message", ["no Lean server command", RUNTIME_SETUP_PREFIX + "no Lean server command"])
def test_a_runtime_setup_failure_is_the_seeds_invalid_request(message: str) -> None:
    wire = to_wire(BrokerError("runtimeSetup", message))
    assert isinstance(wire, JsonRpcError) and wire.code == INVALID_REQUEST
    assert wire.message == RUNTIME_SETUP_PREFIX + "no Lean server command"  # the prefix is never doubled


def test_feedback_and_process_tool_failures_are_tool_errors() -> None:
    feedback = tool_failure(FeedbackError("title must not be blank"))
    assert feedback == {"code": "invalidInput", "message": "title must not be blank"}
    failure = tool_failure(
        ToolFailure("invalidInput", "beam_version accepts no undeclared input fields: x", {"fields": ["x"]})
    )
    assert failure == {
        "code": "invalidInput",
        "message": "beam_version accepts no undeclared input fields: x",
        "data": {"fields": ["x"]},
    }


def test_inside_a_tool_call_a_json_rpc_error_or_a_bug_is_raised_as_the_json_rpc_error_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    given = JsonRpcError(INVALID_PARAMS, "bad")
    with pytest.raises(JsonRpcError) as raised:
        tool_failure(given)
    assert raised.value is given
    with caplog.at_level(logging.ERROR, logger="beam_mcp"), pytest.raises(JsonRpcError) as raised:
        tool_failure(RuntimeError("kaput"))
    assert raised.value.code == INTERNAL_ERROR


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
    failed = tool_result({"code": "x", "message": "y"}, is_error=True)
    assert failed["isError"] is True and json.loads(failed["content"][0]["text"]) == {"code": "x", "message": "y"}


def test_outside_a_tool_call_a_starting_server_is_32051_and_other_broker_errors_are_internal() -> None:
    starting = to_wire(BrokerError("serverStarting", "Lean is starting"))
    assert isinstance(starting, JsonRpcError) and starting.code == -32051
    other = to_wire(BrokerError("contentModified", "stale"))
    assert isinstance(other, JsonRpcError) and other.code == -32603
    with pytest.raises(JsonRpcError) as raised:
        tool_failure(BrokerError("runtimeSetup", "no lake"))  # a JSON-RPC error even inside a tool call
    assert raised.value.message.startswith("could not set up Lean Beam MCP runtime: ")
    with pytest.raises(JsonRpcError) as raised:
        tool_failure(BrokerError("serverStarting", "Lean is starting"))
    assert raised.value.code == -32051
