"""Events a broker operation streams while it runs (the MCP layer turns them into notifications).

Events are delivered through `CallContext.emit`, a synchronous callback that must not block.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any


class Progress(enum.Flag):
    """Which progress an operation reports (the MCP display matrix; its registry entry says)."""

    NONE = 0
    PREPARATION = enum.auto()
    """The one `PreparationEvent`."""
    SETUP = enum.auto()
    """`SetupEvent`s: Lake's setup lines."""
    FILE = enum.auto()
    """`FileProgressEvent`s: Lean's progress on the call's document."""


@dataclasses.dataclass(frozen=True)
class PreparationEvent:
    """The one contextual update sent when a call starts work (e.g. "lean_sync on Main.lean").

    Attributes:
        message: For an agent: the tool, the file and what it does (`lean_sync on A.lean: preparing ...`).
        path: The call's file, if it has one.
        doing: For a person: what it does without the tool's name (`preparing the Lean workspace`); empty from
            a daemon older than this field.
    """

    message: str
    path: str | None = None
    doing: str = ""


@dataclasses.dataclass(frozen=True)
class SetupEvent:
    """A Lake setup line Lean reported while preparing the file's imports."""

    message: str
    path: str | None = None


@dataclasses.dataclass(frozen=True)
class FileProgressEvent:
    """Lean file progress for the call's document (`document_progress` shape)."""

    path: str
    progress: dict[str, Any]

    @property
    def done(self) -> bool:
        """Whether elaboration of the tracked version finished."""
        return bool(self.progress.get("done"))


@dataclasses.dataclass(frozen=True)
class DiagnosticEvent:
    """One diagnostic of the call's document, first time seen, filtered by the call's scope.

    `item` has the `DiagItem` JSON shape; `severity` is its effective severity name.
    """

    item: dict[str, Any]


BrokerEvent = PreparationEvent | SetupEvent | FileProgressEvent | DiagnosticEvent


def _discard(_event: BrokerEvent) -> None:
    return None


@dataclasses.dataclass
class CallContext:
    """Per-call context: where events go. Cancellation is the caller's anyio cancel scope."""

    emit: Callable[[BrokerEvent], None] = _discard
    request_id: str | int | None = None
