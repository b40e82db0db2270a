"""Small helpers shared by broker modules."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

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
