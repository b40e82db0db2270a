"""What a broker operation is: its spec (generic in its input and output models), its two kinds, and a registry.

An operation is declared once (in `operations`) with its name, models, handler and flags; everything else (the MCP
tools, the `lean-beam` commands, `Broker.call`) reads those declarations. `WorkspaceOperation` runs its handler on
one workspace's runtime, `BrokerOperation` on the broker's table of runtimes; both check at run time what mypy
checks statically (the handler takes the input model and answers the output model). A `Registry` is the ordered
set of operations a broker serves. Light to import: the models and handlers come from whoever declares operations.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from .events import Progress
from .models import parse_input

if TYPE_CHECKING:
    from ._call import Call
    from ._ops.workspaces import Runtimes

PREPARING = "preparing the Lean workspace"
"""What an operation's preparation event says it is doing, unless it says more precisely."""

InputT = TypeVar("InputT", bound=BaseModel, covariant=True)
OutputT = TypeVar("OutputT", bound=BaseModel, covariant=True)


class Scope(enum.Enum):
    """What an operation acts on.

    `WORKSPACE`: one workspace's runtime (created on demand); the root must be an existing Lean/Lake project,
    and the call is counted in that workspace's metrics. `BROKER`: the broker's table of runtimes; no runtime is
    created, and the descriptor may name a root that has since vanished (it is normalized lexically).
    """

    WORKSPACE = "workspace"
    BROKER = "broker"


@dataclasses.dataclass(frozen=True)
class OperationSpec(Generic[InputT, OutputT]):
    """One broker operation and everything derived from it; its handler is on its kind's class.

    `WorkspaceOperation` (a handler given the call on one workspace's runtime) and `BrokerOperation` (a handler
    given the broker's table of runtimes) are the two kinds; code that only describes operations (tools, CLI
    commands) takes this class.

    Attributes:
        name: Operation key; the MCP tool is `lean_<name>` (`drop_workspace` -> `lean_drop_workspace`).
        input_model: Closed, strict pydantic model of its arguments.
        output_model: Pydantic model of the exact JSON `Broker.call` returns (`workspace` included).
        description: Tool description (contract sentences included).
        scope: What the handler acts on (`Scope`; the kind's class decides it).
        read_only: Advertises `readOnlyHint: true`.
        destructive: `False` advertises `destructiveHint: false`; None keeps the protocol default.
        idempotent: Advertises `idempotentHint: true`.
        version_bound: Answers only for the caller's document version.
        cancellable: A cancel request aborts it (drop is not: partial eviction cannot be rolled back).
        fence: A stream-order fence: calls sent before it finish first, calls sent after it wait for it.
        progress: Progress kinds it reports.
        document_progress: Its final result carries `document_progress`.
        metrics_key: Key in per-workspace op metrics (upstream's broker op names; default: `name`).
        preparing: What its preparation event says it is doing.
        extension: Beyond upstream Beam's 24 tools (listed after them); `lean-beam-mcp --tools beam` leaves it out.
        extension_fields: Input and output fields beyond upstream Beam's; `--tools beam` leaves them out of the
            tool's schemas (so a call naming one is refused like any undeclared field).
        heavy: Expensive (a whole-file barrier, a Lake build, a batch of probes): admitted in a lane of its own,
            so queued heavy calls never take the slots of cheap ones (hover, goals, a probe).
    """

    name: str
    input_model: type[InputT]
    output_model: type[OutputT]
    _: dataclasses.KW_ONLY
    description: str
    read_only: bool = False
    destructive: bool | None = None
    idempotent: bool = False
    version_bound: bool = False
    cancellable: bool = True
    fence: bool = False
    progress: Progress = Progress.PREPARATION | Progress.FILE
    document_progress: bool = False
    metrics_key: str = ""
    preparing: str = PREPARING
    extension: bool = False
    extension_fields: frozenset[str] = frozenset()
    heavy: bool = False
    scope: ClassVar[Scope] = Scope.WORKSPACE

    @property
    def tool(self) -> str:
        """The MCP tool name."""
        return f"lean_{self.name}"

    @property
    def key(self) -> str:
        """The metrics key."""
        return self.metrics_key or self.name

    def preparation(self, path: str | None) -> str:
        """The one preparation message (`lean_sync on A.lean: preparing the Lean workspace`)."""
        where = f" on {path}" if path else ""
        return f"{self.tool}{where}: {self.preparing}"

    def parse(self, arguments: Mapping[str, Any]) -> InputT:
        """Validate JSON arguments exactly as `Broker.call` does, without Lean (`models.parse_input`).

        Raises:
            BrokerError: `invalidInput` (see `models.parse_input`).
        """
        return parse_input(self.input_model, arguments, self.tool, allow_vanished=self.scope is Scope.BROKER)

    def _input(self, inp: BaseModel) -> InputT:
        if not isinstance(inp, self.input_model):
            raise TypeError(f"{self.name} takes {self.input_model.__name__}, not {type(inp).__name__}")
        return inp

    def _output(self, result: object) -> OutputT:
        if not isinstance(result, self.output_model):
            raise TypeError(f"{self.name} returned {type(result).__name__}, not {self.output_model.__name__}")
        return result


@dataclasses.dataclass(frozen=True)
class WorkspaceOperation(OperationSpec[InputT, OutputT]):
    """An operation on one workspace's runtime: `handler(call, inp) -> output`, given the call (`_call.Call`).

    The handler is reached through `run` only: the registry holds specs as `OperationSpec[BaseModel, BaseModel]`,
    so only `run`, which checks it, knows the input is of the right model.
    """

    handler: Callable[[Call, InputT], Awaitable[OutputT]]

    async def run(self, call: Call, inp: BaseModel) -> OutputT:
        """Run the handler.

        Raises:
            TypeError: The input is not an `input_model`, or the handler's answer not an `output_model` (a bug:
                the broker's boundary makes it `internalError`).
        """
        return self._output(await self.handler(call, self._input(inp)))


@dataclasses.dataclass(frozen=True)
class BrokerOperation(OperationSpec[InputT, OutputT]):
    """An operation on the broker's table of runtimes: `handler(runtimes, inp) -> output` (see `WorkspaceOperation`)."""

    handler: Callable[[Runtimes, InputT], Awaitable[OutputT]]
    scope: ClassVar[Scope] = Scope.BROKER

    async def run(self, runtimes: Runtimes, inp: BaseModel) -> OutputT:
        """Run the handler (see `WorkspaceOperation.run`)."""
        return self._output(await self.handler(runtimes, self._input(inp)))


Operation = WorkspaceOperation[BaseModel, BaseModel] | BrokerOperation[BaseModel, BaseModel]
"""An operation of a registry, whatever its models."""


@dataclasses.dataclass(frozen=True)
class Registry:
    """The operations a broker serves, in public tool order, by name and by MCP tool name.

    Raises:
        ValueError: Two operations have one name.
    """

    operations: tuple[Operation, ...]
    by_name: Mapping[str, Operation] = dataclasses.field(init=False, repr=False, compare=False)
    by_tool: Mapping[str, Operation] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {spec.name: spec for spec in self.operations}
        if len(by_name) != len(self.operations):
            raise ValueError("two operations have one name")
        object.__setattr__(self, "by_name", by_name)
        object.__setattr__(self, "by_tool", {spec.tool: spec for spec in self.operations})

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.operations)

    def __len__(self) -> int:
        return len(self.operations)

    def replacing(self, *specs: Operation) -> Registry:
        """This registry with some operations replaced by others of the same name (in place in the order)."""
        new = {spec.name: spec for spec in specs}
        unknown = sorted(set(new) - set(self.by_name))
        if unknown:
            raise ValueError(f"no operation named {', '.join(unknown)}")
        return Registry(tuple(new.get(spec.name, spec) for spec in self.operations))
