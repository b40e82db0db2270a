"""Running `tools/call`: admission, the fence, the `beam.status` watchdog, and one runner per kind of tool.

This module owns what happens to an admitted tool call: the tool is looked up (unknown -> `-32602`), the call
is admitted to the dispatcher with the tool's cancellability and fence flag, its input is checked before it
waits behind a fence, its preparation notice goes out, a one-shot watchdog emits the no-token `beam.status`
notice after the configured delay, and its runner produces the `structuredContent`. Runners are looked up by
tool in one table: the process tools (`beam_version`, `beam_stats`, `beam_feedback_report`) and, for every
registry operation, `Broker.call`. Exceptions become tool errors or JSON-RPC errors through `errors.tool_failure`
only. It must not contain Lean semantics.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import math
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from beam_broker.events import CallContext, Progress
from beam_broker.workspace import resolve

from .__about__ import __version__
from ._dispatch import Channel, Dispatcher, InFlight, Outlet
from ._jsonrpc import Request
from ._notify import CallNotifier
from ._params import MRTR_REJECTED, CallParams
from ._protocol import MODERN_VERSION, SERVER_NAME, ModernContext, modern_envelope, tool_result
from ._schemas import conform
from ._tools import BEAM_FEEDBACK_REPORT, BEAM_STATS, BEAM_VERSION, Tool, ToolSet
from .errors import ToolFailure, invalid_params, tool_failure

if TYPE_CHECKING:
    from beam_broker import Broker

    from ._broker_host import BrokerHost

INVALID_INPUT = "invalidInput"
REQUEST_CANCELLED = "requestCancelled"


@dataclasses.dataclass
class CallRun:
    """One running tool call: what its runner needs."""

    call: InFlight
    tool: Tool
    arguments: dict[str, Any]
    notifier: CallNotifier
    modern: ModernContext | None


Runner = Callable[["Calls", CallRun], Awaitable[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class CallSettings:
    """What the runners need from the server's configuration."""

    status_delay: Callable[[], float]
    server_binary: str | None = None


class StatusClock:
    """Sends the one `beam.status` notice of each call still running when its delay has passed, from one task.

    A watchdog task per call (a task group, a sleeping task, its cancellation) cost about 0.15 ms of CPU per call,
    measured on the warm path; here a call records its deadline, and a call that finished first is passed over
    when its deadline comes (its notifier is closed, so `status` does nothing).
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, CallNotifier]] = []
        self._order = itertools.count()
        self._wake = anyio.Event()
        self._closed = False

    def close(self) -> None:
        """Stop: `run` returns, and no notice is sent any more."""
        self._closed = True
        self._wake.set()

    def watch(self, notifier: CallNotifier, delay: float) -> None:
        """Send `notifier`'s status notice after `delay` seconds unless it is closed by then."""
        deadline = anyio.current_time() + delay
        if not self._due or deadline < self._due[0][0]:
            self._wake.set()  # the clock sleeps until a later deadline, or for ever
        heapq.heappush(self._due, (deadline, next(self._order), notifier))

    async def run(self) -> None:
        """Send notices as their deadlines come (run it in the server's task group; it returns after `close`)."""
        while not self._closed:
            wait = self._due[0][0] - anyio.current_time() if self._due else math.inf
            if wait > 0:
                with anyio.move_on_after(wait):
                    await self._wake.wait()
                if self._wake.is_set():
                    self._wake = anyio.Event()
                continue
            heapq.heappop(self._due)[2].status()


class Calls:
    """Admits and runs tool calls for one server.

    Args:
        dispatcher: Owns ids, cancel scopes and the fence.
        host: The broker host (the registry, the broker, beam-feedback).
        tools: Returns the tool set once the registry is loaded.
        settings: The status delay and the server binary.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        host: BrokerHost,
        tools: Callable[[], Awaitable[ToolSet]],
        settings: CallSettings,
    ) -> None:
        self._dispatcher = dispatcher
        self._host = host
        self._tools = tools
        self._settings = settings
        self.clock = StatusClock()
        """Sends the `beam.status` notices (`run` it in the server's task group)."""

    async def start(
        self, channel: Channel, req: Request, params: CallParams, modern: ModernContext | None, outlet: Outlet
    ) -> None:
        """Admit one `tools/call` (its response follows on `outlet`).

        Raises:
            JsonRpcError: `-32602` for MRTR continuation fields or an unknown tool.
        """
        if params.continuation():
            raise invalid_params(MRTR_REJECTED.format(method="tools/call"))
        tool = (await self._tools()).by_name.get(params.name)
        if tool is None:
            raise invalid_params(f"Unknown tool: {params.name}")
        token = params.meta.progressToken if params.meta is not None else None
        body = functools.partial(self._body, tool, params.arguments, token, modern)
        self._dispatcher.admit(channel, req.id, outlet, body, cancellable=tool.cancellable, fence=tool.fence)

    async def _body(
        self, tool: Tool, arguments: dict[str, Any], token: Any, modern: ModernContext | None, call: InFlight
    ) -> dict[str, Any]:
        notifier = self._notifier(call, tool, arguments, token, modern)
        run = CallRun(call, tool, arguments, notifier, modern)
        result: dict[str, Any] | None = None
        try:
            with call.interruption:
                try:
                    if tool.answer is not None:  # another server's surface answers the whole result
                        result = await tool.answer(self, run)
                    else:
                        result = tool_result(await RUNNERS.get(tool.name, Calls._operation)(self, run))
                except Exception as exc:
                    result = tool_result(tool_failure(exc), is_error=True)  # or the JSON-RPC error it is
            if result is None:  # the server interrupted the call
                interrupted = {"code": REQUEST_CANCELLED, "message": f"{tool.name} was {call.interrupted}"}
                result = tool_result(interrupted, is_error=True)
            return modern_envelope(result) if modern is not None else result
        finally:
            notifier.close()

    def _notifier(
        self, call: InFlight, tool: Tool, arguments: dict[str, Any], token: Any, modern: ModernContext | None
    ) -> CallNotifier:
        if tool.spec is not None:
            kinds = tool.spec.progress
        else:
            kinds = Progress.PREPARATION if tool.name == BEAM_FEEDBACK_REPORT else Progress.NONE
        channel = call.channel
        level: Callable[[], str | None] = (
            (lambda: modern.log_level) if modern is not None else (lambda: channel.log_level)
        )
        path = arguments.get("path")
        return CallNotifier(
            send=call.outlet.message,
            tool=tool.name,
            request_id=call.rid,
            token=token,
            path=path if isinstance(path, str) else None,
            kinds=kinds,
            log_level=level,
            status=tool.name not in (BEAM_VERSION, BEAM_STATS),
        )

    async def _watched(self, run: CallRun, work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run `work` with its one-shot `beam.status` notice due after the status delay (`StatusClock`)."""
        # Modern requests without a log level get no logs, so their notice is not even scheduled.
        if run.notifier.status_enabled and (run.modern is None or run.modern.log_level is not None):
            self.clock.watch(run.notifier, self._settings.status_delay())
        return await work()

    @staticmethod
    def _undeclared(run: CallRun) -> None:
        undeclared = sorted(k for k in run.arguments if k not in run.tool.properties)
        if undeclared:
            raise ToolFailure(
                INVALID_INPUT,
                f"{run.tool.name} accepts no undeclared input fields: {', '.join(undeclared)}",
                {"fields": undeclared},
            )

    # ---- runners (one per kind of tool; see RUNNERS) ----------------------------------------------------------
    async def _operation(self, run: CallRun) -> dict[str, Any]:
        spec = run.tool.spec
        assert spec is not None
        self._undeclared(run)  # the listed schema may declare fewer fields than the operation (`--tools beam`)
        inp = spec.parse(run.arguments)  # invalid input is answered before waiting behind a fence
        path = run.arguments.get("path")
        run.notifier.preparation(spec.preparation(path if isinstance(path, str) else None))

        async def work() -> dict[str, Any]:
            await run.call.wait_turn()
            broker = await self._host.broker()
            ctx = CallContext(emit=run.notifier.on_event, request_id=run.call.rid.value)
            result = await broker.call(spec.name, inp, ctx)
            if run.tool.conform:  # the listed outputSchema leaves fields out (`--tools beam`, `--contract`)
                cut: dict[str, Any] = conform(result, run.tool.descriptor["outputSchema"])
                return cut
            return result

        return await self._watched(run, work)

    async def broker_call(self, run: CallRun, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one broker operation for `run` (its events go to the call's notifier); for the `_compat` surface.

        Raises:
            BrokerError: As `Broker.call` does.
            JsonRpcError: `-32603` when the broker could not be opened.
        """
        broker = await self._host.broker()
        ctx = CallContext(emit=run.notifier.on_event, request_id=run.call.rid.value)
        return await broker.call(name, arguments, ctx)

    async def broker(self) -> Broker:
        """The open broker (for reads that are no operation, such as a file's cached diagnostics).

        Raises:
            JsonRpcError: `-32603` when it could not be opened.
        """
        return await self._host.broker()

    def identity(self) -> dict[str, Any]:
        """`beam_version`'s result."""
        broker = self._host.current()
        out: dict[str, Any] = {
            "name": SERVER_NAME,
            "version": __version__,
            "mcp_protocol": MODERN_VERSION,
            "runtime_active": bool(broker is not None and broker.active),
        }
        if self._settings.server_binary:
            out["server_binary"] = self._settings.server_binary
        return out

    async def _version(self, run: CallRun) -> dict[str, Any]:
        self._undeclared(run)
        await run.call.wait_turn()
        return self.identity()

    async def _stats(self, run: CallRun) -> dict[str, Any]:
        self._undeclared(run)
        await run.call.wait_turn()
        broker = self._host.current()
        return broker.stats() if broker is not None else {"uptimeMs": 0, "workspaces": {}}

    async def _feedback(self, run: CallRun) -> dict[str, Any]:
        from beam_feedback import build_report  # the report machinery loads with the first report

        self._undeclared(run)
        descriptor = resolve(run.arguments.get("workspace"))
        confidential = run.arguments.get("confidential") is True
        run.notifier.preparation(
            "preparing confidential beam_feedback_report" if confidential else "collecting beam_feedback_report context"
        )

        async def work() -> dict[str, Any]:
            await run.call.wait_turn()
            snapshot = None
            broker = self._host.current()
            if not confidential and broker is not None:
                snapshot = await broker.runtime_snapshot(descriptor.root)
            identity = {k: v for k, v in self.identity().items() if k != "server_binary"}
            report = {**run.arguments, "workspace": {"root": descriptor.root}}
            build = functools.partial(
                build_report,
                report,
                runtime_stats=snapshot.get("stats") if snapshot else None,
                open_files=snapshot.get("open_files") if snapshot else None,
                identity=identity,
                argv=[*sys.argv, *self._host.command_words()],  # the secrets the server's own redactor hides
            )
            result = await anyio.to_thread.run_sync(build)
            return result.to_json()

        return await self._watched(run, work)


RUNNERS: dict[str, Runner] = {
    BEAM_VERSION: Calls._version,
    BEAM_STATS: Calls._stats,
    BEAM_FEEDBACK_REPORT: Calls._feedback,
}
"""The runner of each process tool; every other tool is a registry operation (`Calls._operation`)."""
