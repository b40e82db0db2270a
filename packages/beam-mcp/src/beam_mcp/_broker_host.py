"""Hosting the broker inside the MCP server: its lifetime, and the one import that runs off the event loop.

The broker's light modules (errors, events, the operation registry and its models) are ordinary imports of the
modules that use them; only `Broker` (the runtime and the Lean client stack behind it, the slow import) loads
here, on a worker thread, so the server answers discovery, `initialize` and `tools/list` meanwhile. lsprotocol (the
standard LSP types, about half of that stack's import) is left out of it, and loads on another worker thread once
the broker is open, while the first call's Lean starts and elaborates (`_import_lsp_types`). A server that
knows its project at start-up (`prewarm`) starts that workspace's Lean server as soon as the broker is open,
beside that import, and the server holds its `initialize` answer until both are over (`started`), so that its
first call finds Lean started and competes with no import; a failure there is only logged (the first call starts
Lean again and answers with its own error). Importing on
two threads at once is safe because no import cycle exists in the packages (`tests/test_layout.py`): a thread
that needs a module another thread is importing waits for it. This module must not know tools or MCP methods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from beam_broker.config import BrokerConfig
from beam_broker.operations import REGISTRY, Registry
from beam_broker.workspace import resolve

from .errors import INTERNAL_ERROR, JsonRpcError

if TYPE_CHECKING:
    from beam_broker import Broker

log = logging.getLogger("beam_mcp")


def _import_broker() -> None:
    from beam_broker import broker  # the runtime and the Lean client stack

    assert broker.Broker is not None


def _import_lsp_types() -> None:
    # beam-lsp reads the standard LSP answers (hover, locations, symbols) into lsprotocol's types and loads it
    # with the first one; a server loads it ahead, beside Lean's start, so no answer waits for it.
    from beam_lsp import load_lsp_types

    load_lsp_types()


class BrokerHost:
    """Opens one `beam_broker.Broker` in the background and keeps it until `stop`.

    Args:
        lean_cmd: Lean server command for every workspace (None: the broker's default).
        env: Environment for Lean processes (None: this process's).
        on_change: The diagnostics listener to register once the broker is open.
        on_open: Called once the broker is open and the listener registered.
        config: More `BrokerConfig` settings.
        registry: The operations the broker serves.
        prewarm: Returns the canonical root of the workspace whose Lean server starts as soon as the broker is
            open, with the files to `sync` there then, in the background (None: no workspace); called once the
            broker is open, so that it may import what it needs then.
    """

    def __init__(
        self,
        *,
        lean_cmd: Sequence[str] | None,
        env: Mapping[str, str] | None,
        on_change: Callable[[str], None],
        on_open: Callable[[], None] = lambda: None,
        config: Mapping[str, Any] | None = None,
        registry: Registry = REGISTRY,
        prewarm: Callable[[], tuple[str, Sequence[str]] | None] | None = None,
    ) -> None:
        self._lean_cmd = lean_cmd
        self._env = env
        self._extra = dict(config or {})
        self._on_change = on_change
        self._on_open = on_open
        self._broker: Broker | None = None
        self._error: BaseException | None = None
        self._registry = registry
        self._prewarm_root = prewarm
        self.prewarmed = anyio.Event()
        """Set once the start-up prewarm is over: Lean started, failed to start, or nothing to start."""
        self._lean_started = anyio.Event()  # the prewarmed Lean answered its handshake, failed, or nothing to start
        self._types_loaded = anyio.Event()  # lsprotocol loaded ahead, failed to, or the broker never opened
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    async def run(self) -> None:
        """Import, open the broker, and keep it open until `stop` (run it in the server's task group)."""
        try:
            await anyio.to_thread.run_sync(_import_broker)
            from beam_broker.broker import Broker  # imported by now

            config = BrokerConfig(lean_cmd=self._lean_cmd, env=self._env, **self._extra)
            async with Broker.open(config, registry=self._registry) as broker:
                self._broker = broker
                self._ready.set()
                remove = broker.add_diagnostics_listener(self._on_change)
                self._on_open()
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._prewarm, broker)  # first: Lean's process starts before the import
                        tg.start_soon(self._preload)
                        await self._stop.wait()
                        tg.cancel_scope.cancel()
                finally:
                    remove()
        except Exception as exc:
            log.exception("could not open the Beam broker")
            self._error = exc
        finally:
            self._broker = None
            self._ready.set()
            self._lean_started.set()
            self._types_loaded.set()
            self.prewarmed.set()
            self._stopped.set()

    async def _prewarm(self, broker: Broker) -> None:
        try:
            found = self._prewarm_root() if self._prewarm_root is not None else None
            if found is not None:
                root, files = found
                await broker.prewarm(resolve({"root": root}))
                self._lean_started.set()  # the files below are elaborated in the background: nothing waits for them
                async with anyio.create_task_group() as tg:
                    for path in files:
                        tg.start_soon(self._prewarm_file, broker, root, path)
        except Exception as exc:  # the first call starts Lean again and answers with its own, structured, error
            log.warning("could not start the Lean server ahead of the first call: %s", getattr(exc, "message", exc))
        finally:
            self._lean_started.set()
            self.prewarmed.set()

    @property
    def prewarms(self) -> bool:
        """Whether this host starts a workspace's Lean server at start-up (`prewarm` given)."""
        return self._prewarm_root is not None

    async def started(self) -> None:
        """Wait until the start-up work a first call would otherwise wait for is over.

        That is: the prewarmed workspace's Lean server answered its handshake (or failed to start, or there is
        none) and lsprotocol is loaded (or failed to load). The files `prewarm` names are not waited for.
        """
        await self._lean_started.wait()
        await self._types_loaded.wait()

    @staticmethod
    async def _prewarm_file(broker: Broker, root: str, path: str) -> None:
        """Elaborate one file ahead of the first call (a failure is only logged: the call that names it says why)."""
        from beam_broker.events import CallContext  # imported with the broker by now

        try:
            await broker.call("sync", {"workspace": {"root": root}, "path": path}, CallContext())
        except Exception as exc:
            log.warning("could not elaborate %s ahead of the first call: %s", path, getattr(exc, "message", exc))

    async def _preload(self) -> None:
        try:  # abandoned when the broker closes first: the import goes on in its thread, and nothing waits for it
            await anyio.to_thread.run_sync(_import_lsp_types, abandon_on_cancel=True)
        except Exception:
            log.exception("could not load lsprotocol ahead (the first answer that needs it loads it)")
        finally:
            self._types_loaded.set()

    async def stop(self) -> None:
        """Close the broker (every Lean server stops) and wait until it is closed."""
        self._stop.set()
        await self._stopped.wait()

    def _unavailable(self) -> JsonRpcError:
        return JsonRpcError(INTERNAL_ERROR, f"the Beam broker is unavailable: {type(self._error).__name__}")

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

    def command_words(self) -> list[str]:
        """The words of the Lean server command, whose secret flags the broker's redactor hides (never fails).

        Known without the broker, from the two settings they depend on (not the others, which may be what kept
        it from opening): a report made because it could not open hides them too.
        """
        from beam_broker.config import command_words

        config = BrokerConfig(lean_cmd=self._lean_cmd, env=self._env)
        return command_words(config, config.environment())

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
