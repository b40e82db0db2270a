"""The error tree (`errors`): codes to exception types, and unwrapping a lone exception out of a task group."""

from __future__ import annotations

import sys

import anyio
import pytest

from beam_lsp import errors

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio


def test_response_errors_get_the_most_specific_type_by_code() -> None:
    assert type(errors.response_error(errors.CONTENT_MODIFIED, "x")) is errors.ContentModified
    assert type(errors.response_error(errors.WORKER_EXITED, "x")) is errors.WorkerCrashed
    assert type(errors.response_error(12345, "x")) is errors.ResponseError


async def test_a_lone_exception_leaves_a_task_group_unwrapped() -> None:
    async def fail() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError), errors.unwrap_group():
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)


def test_a_group_of_several_exceptions_is_left_as_it_is() -> None:
    with pytest.raises(ExceptionGroup), errors.unwrap_group():
        raise ExceptionGroup("two", [KeyError("a"), ValueError("b")])
