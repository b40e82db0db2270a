"""Hosting the broker inside the MCP server: background import, lifetime, and who may touch `beam_broker`.

The Lean stack takes a moment to import, so the server answers discovery and `initialize` while it loads. The
import runs off the event loop in two steps — the light operation registry first (all `tools/list` needs),
then the runtime behind `Broker` — on ONE worker thread. Everything else in beam-mcp that needs `beam_broker`
(or beam-feedback, which shares beam-lsp with it) waits for the step it needs through this host instead of
importing it itself: two threads must never initialize one package at once (a partially initialized module
would be seen). This module must not know tools or MCP methods.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio

from .errors import INTERNAL_ERROR, JsonRpcError

if TYPE_CHECKING:
    from beam_broker import Broker
    from beam_broker.operations import Operation

log = logging.getLogger("beam_mcp")

_REGISTRY_MODULES = ("beam_broker", "beam_broker.operations", "beam_feedback")


def _import_all(names: Sequence[str]) -> list[ModuleType]:
    return [importlib.import_module(name) for name in names]


def _import_runtime() -> None:
    from beam_broker import Broker  # `beam_broker` loads its runtime lazily, on this first use

    assert Broker is not None


class BrokerHost:
    """Opens one `beam_broker.Broker` in the background and keeps it until `stop`.

    Args:
        lean_cmd: Lean server command for every workspace (None: the broker's default).
        env: Environment for Lean processes (None: this process's).
        on_change: The diagnostics listener to register once the broker is open.
        on_open: Called once the broker is open and the listener registered.
        config: More `BrokerConfig` settings.
    """

    def __init__(
        self,
        *,
        lean_cmd: Sequence[str] | None,
        env: Mapping[str, str] | None,
        on_change: Callable[[str], None],
        on_open: Callable[[], None] = lambda: None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self._lean_cmd = lean_cmd
        self._env = env
        self._extra = dict(config or {})
        self._on_change = on_change
        self._on_open = on_open
        self._broker: Broker | None = None
        self._error: BaseException | None = None
        self._registry: tuple[Operation, ...] | None = None
        self._registry_ready = anyio.Event()
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    async def run(self) -> None:
        """Import, open the broker, and keep it open until `stop` (run it in the server's task group)."""
        try:
            await anyio.to_thread.run_sync(_import_all, _REGISTRY_MODULES)
            from beam_broker.operations import OPERATIONS

            self._registry = OPERATIONS
            self._registry_ready.set()
            await anyio.to_thread.run_sync(_import_runtime)
            from beam_broker import Broker, BrokerConfig

            config = BrokerConfig(lean_cmd=self._lean_cmd, env=self._env, **self._extra)
            async with Broker.open(config) as broker:
                self._broker = broker
                self._ready.set()
                remove = broker.add_diagnostics_listener(self._on_change)
                self._on_open()
                try:
                    await self._stop.wait()
                finally:
                    remove()
        except Exception as exc:
            log.exception("could not open the Beam broker")
            self._error = exc
        finally:
            self._broker = None
            self._registry_ready.set()
            self._ready.set()
            self._stopped.set()

    async def stop(self) -> None:
        """Close the broker (every Lean server stops) and wait until it is closed."""
        self._stop.set()
        await self._stopped.wait()

    def _unavailable(self) -> JsonRpcError:
        return JsonRpcError(INTERNAL_ERROR, f"the Beam broker is unavailable: {type(self._error).__name__}")

    async def registry(self) -> tuple[Operation, ...]:
        """The operation registry, once imported (before the Lean stack is).

        Raises:
            JsonRpcError: `-32603` when it could not be imported.
        """
        await self._registry_ready.wait()
        if self._registry is None:
            raise self._unavailable()
        return self._registry

    async def broker(self) -> Broker:
        """The broker, once open.

        Raises:
            JsonRpcError: `-32603` when it could not be opened.
        """
        await self._ready.wait()
        if self._broker is None:
            raise self._unavailable()
        return self._broker

    @property
    def loaded(self) -> bool:
        """Whether loading finished (successfully or not)."""
        return self._ready.is_set()

    def current(self) -> Broker | None:
        """The broker if it is open now; None while it loads or when it could not be opened (never waits)."""
        return self._broker

    def check(self) -> Broker | None:
        """`current()`, but a broker that could not be opened is an error rather than None.

        Raises:
            JsonRpcError: `-32603` when it could not be opened.
        """
        if self._ready.is_set() and self._broker is None:
            raise self._unavailable()
        return self._broker
