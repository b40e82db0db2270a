"""The error boundary: every beam-lsp failure has one broker code; anything else is a logged internalError."""

from __future__ import annotations

import logging
import sys

import anyio
import pytest

from beam_broker import errors
from beam_broker.errors import BrokerError, lean_errors, translate
from beam_lsp import Redactor
from beam_lsp import errors as lsp

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (lsp.ServerExited("gone", returncode=1, stderr_tail="PANIC"), errors.WORKER_EXITED),
        (lsp.WorkerCrashed(lsp.WORKER_CRASHED, "worker died"), errors.WORKER_EXITED),
        (lsp.TransportError("bad frame"), errors.WORKER_EXITED),
        (lsp.MessageTooLarge("body", 10, 5), errors.WORKER_EXITED),
        (anyio.BrokenResourceError(), errors.WORKER_EXITED),
        (anyio.ClosedResourceError(), errors.WORKER_EXITED),
        (BrokenPipeError(), errors.WORKER_EXITED),
        (ConnectionResetError(), errors.WORKER_EXITED),
        (OSError(5, "Input/output error"), errors.INTERNAL_ERROR),  # a disk, not the Lean server's pipe
        (lsp.ContentModified(lsp.CONTENT_MODIFIED, "File changed."), errors.CONTENT_MODIFIED),
        (lsp.RequestCancelled(lsp.REQUEST_CANCELLED, ""), errors.REQUEST_CANCELLED),
        (lsp.RpcNeedsReconnect(lsp.RPC_NEEDS_RECONNECT, "outdated"), errors.RPC_NEEDS_RECONNECT),
        (lsp.ResponseError(lsp.METHOD_NOT_FOUND, "no handler"), errors.METHOD_NOT_FOUND),
        (lsp.ResponseError(-1, "odd"), "unknownErrorCode"),
        (lsp.InvalidPosition("line 9 is past the end"), errors.INVALID_PARAMS),
        (lsp.DocumentNotOpen("file:///x.lean"), errors.CONTENT_MODIFIED),
        (RuntimeError("a bug"), errors.INTERNAL_ERROR),
    ],
)
def test_every_failure_has_one_broker_code(exc: Exception, code: str) -> None:
    assert translate(exc).code == code


def test_a_dead_server_keeps_its_stderr_tail_and_lean_errors_keep_their_lsp_code() -> None:
    exited = translate(lsp.ServerExited("gone", stderr_tail="INTERNAL PANIC"))
    assert exited.data == {"stderrTail": "INTERNAL PANIC"}
    answered = translate(lsp.ContentModified(lsp.CONTENT_MODIFIED, "File changed.", {"x": 1}))
    assert (answered.message, answered.data) == (
        "File changed.",
        {"lspCode": lsp.CONTENT_MODIFIED, "lspData": {"x": 1}},
    )
    closed = translate(lsp.DocumentNotOpen("file:///x.lean"))
    assert closed.data == {"reason": "documentClosed"}


def test_a_lone_exception_in_a_group_is_translated_as_itself() -> None:
    group = ExceptionGroup("task group", [lsp.ServerExited("gone")])
    assert translate(group).code == errors.WORKER_EXITED
    pair = ExceptionGroup("task group", [ValueError("a"), ValueError("b")])
    assert translate(pair).code == errors.INTERNAL_ERROR


def test_the_boundary_raises_broker_errors_unchanged_and_logs_unexpected_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = errors.invalid_params("bad position")
    with pytest.raises(BrokerError) as same, lean_errors():
        raise original
    assert same.value is original
    redactor = Redactor({"API_TOKEN": "tok-0123456789"})
    with caplog.at_level(logging.ERROR, logger="beam_broker"), pytest.raises(BrokerError) as bug, lean_errors(redactor):
        raise KeyError("missing tok-0123456789")
    assert bug.value.code == errors.INTERNAL_ERROR and "KeyError" in bug.value.message
    assert isinstance(bug.value.__cause__, KeyError)
    # The traceback is logged as redacted text (the standard exc_info path would format the secret).
    assert "Traceback" in caplog.text and "KeyError: 'missing [redacted:API_TOKEN]'" in caplog.text
    assert "tok-0123456789" not in caplog.text and not any(record.exc_info for record in caplog.records)


def test_a_redacted_error_is_a_new_error_only_when_something_changed() -> None:
    redactor = Redactor({"API_TOKEN": "tok-0123456789"})
    clean = errors.invalid_params("bad position", {"line": 3})
    assert clean.redacted(redactor) is clean
    leaky = errors.invalid_params("token tok-0123456789", {"argv": ["--token", "tok-0123456789"]})
    redacted = leaky.redacted(redactor)
    assert redacted.wire() == {
        "code": errors.INVALID_PARAMS,
        "message": "token [redacted:API_TOKEN]",
        "data": {"argv": ["--token", "[redacted:API_TOKEN]"]},
    }


@pytest.mark.anyio
async def test_cancellation_passes_through_the_boundary() -> None:
    with anyio.move_on_after(0) as scope, lean_errors():
        await anyio.sleep_forever()
    assert scope.cancelled_caught


def test_the_wire_form_omits_absent_data() -> None:
    assert BrokerError("x", "m").wire() == {"code": "x", "message": "m"}
    assert errors.invalid_input("m", {"fields": ["a"]}).wire() == {
        "code": errors.INVALID_INPUT,
        "message": "m",
        "data": {"fields": ["a"]},
    }
