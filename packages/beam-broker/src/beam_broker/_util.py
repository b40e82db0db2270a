"""Small helpers shared by broker modules."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup


@contextlib.contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a lone exception out of a task group's exception group (task groups are internal here)."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


def loads_object(text: str | bytes) -> dict[str, Any]:
    """Parse a JSON object, rejecting duplicate keys (json keeps the last one silently).

    Raises:
        ValueError: Not UTF-8, not JSON, duplicate keys, or not an object (the message says which).
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value
