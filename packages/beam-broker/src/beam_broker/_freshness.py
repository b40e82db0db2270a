"""Freshness of imports: whether a Lean worker's imports are what a fresh build of the sources would give.

A verdict about a file is also a verdict about what it imports. For each module of the workspace a document
imports (directly or through other workspace modules), Beam knows:

- what its build artifacts were made from (`Built`: the source's hash and the `.olean` files of its own imports),
  learnt from Lake (`lake build --no-build`, which applies Lake's own trace rules) or recorded when Beam's save
  built it; a record holds only while the `.olean` it describes is the one on disk;
- what the source is now: the file on disk (its hash, read again only when the file's `stat` changes, and never
  trusted from a `stat` taken within `RACY_NS` of the file's last change) and any text Beam holds for it;
- what the document's worker loaded (`Loaded`): the `.olean` files of its imports when it processed its header.

An import is stale when its artifacts were not made from its current source (or from its imports' current
artifacts), or when the document's worker loaded artifacts that were replaced since. Whoever changed the file
(Beam, the agent's own file tool, git, an editor), the next check sees it: nothing depends on watching files or
on modification times alone. This module never talks to Lean; it reads files and asks Lake.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from beam_lsp.project import is_module_name

from ._documents import FileKey, Loaded, header_imports, read_source, text_hash
from ._lake import Layout
from .errors import BrokerError

log = logging.getLogger("beam_broker")


RACY_NS = 2_000_000_000
"""A file read less than this long after its last change (its mtime or, when that was set back, its ctime) is read
again next time: a later write in the same timestamp tick would leave its `stat` unchanged (git's "racily clean"
rule; 2 s covers the coarsest filesystems)."""

MAX_SOURCES = 20_000
"""Source files whose hash and imports are kept (far more than a project's own modules); beyond it all are
forgotten and read again when needed."""

LAKE_OUT_OF_DATE = 3
"""`lake build --no-build`'s exit code when something would need to be built."""

LakeCheck = Callable[[list[str]], Awaitable[int | None]]
"""Runs `lake build --no-build MODULES...`: its exit code (0: every module and its imports are up to date; any
other: Lake cannot confirm it), or None when there is no Lake to ask."""


def _stat(path: str) -> FileKey | None:
    """The file's `stat` key, or None when it does not exist (or cannot be reached)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


@dataclasses.dataclass(frozen=True)
class Source:
    """A module's source as last read: hash (None: unreadable) and header imports, valid while `key` holds."""

    key: FileKey
    hash: str | None
    imports: tuple[str, ...]
    racy: bool


class _Unread(Exception):
    """A source the walk needs that was never read, or may have changed since (its `stat` differs, or is racy)."""

    def __init__(self, path: str, key: FileKey) -> None:
        self.path, self.key = path, key


@dataclasses.dataclass(frozen=True)
class Node:
    """One workspace module in a document's import closure."""

    name: str
    path: Path
    source: Source | None
    """None: the file is gone."""
    imports: tuple[str, ...]
    """Its imports that are workspace modules."""


@dataclasses.dataclass(frozen=True)
class Built:
    """What one `.olean` of a module was built from: its source's hash and its workspace imports' `.olean` files."""

    olean: FileKey | None
    source: str
    deps: tuple[tuple[str, FileKey | None], ...]


@dataclasses.dataclass(frozen=True)
class BuildStart:
    """A module's import closure and its `.olean` files as they were before a build."""

    nodes: list[Node]
    oleans: dict[str, FileKey | None]


@dataclasses.dataclass(frozen=True)
class Stale:
    """One stale import of a document (a `staleDirectDeps` item)."""

    module: str
    path: str
    needs_save: bool
    """Its artifacts are not made from its current source: it must be built again (saved) first."""
    direct: bool

    def wire(self) -> dict[str, Any]:
        """The `staleDirectDeps` item."""
        return {"module": self.module, "path": self.path, "needsSave": self.needs_save, "direct": self.direct}


class Freshness:
    """The freshness of one workspace's modules, shared by its documents and probe mirrors."""

    def __init__(
        self,
        root: str,
        display: Callable[[Path], str],
        lake_check: LakeCheck,
        *,
        max_source_bytes: int,
        layout: Callable[[], Layout] | None = None,
    ) -> None:
        """Knowledge about the workspace at `root`, learnt from Lake through `lake_check` when needed.

        `layout` gives where modules' sources and `.olean` files are (the lakefile's; Lake's defaults without it).
        """
        self.root = root
        self._layout_of = layout if layout is not None else (lambda: Layout.default(root))
        self._layout = self._layout_of()
        self.display = display
        self._lake_check = lake_check
        self._max_source_bytes = max_source_bytes
        self._sources: dict[str, Source] = {}
        self._path_cache: dict[str, tuple[str, str] | None] = {}
        self._nodes: dict[str, Node] = {}
        """The last `Node` of each module (reused while its source and local imports are the same)."""
        self._built: dict[str, Built] = {}
        self._stale: dict[str, tuple[Any, ...]] = {}
        """Modules Lake called out of date, with the state it judged (valid while that state holds)."""
        self._asking = anyio.Lock()
        self._seen: dict[str, FileKey | None] = {}
        """The `.olean` of each module as last seen (a new one means Lake rebuilt it, and its `.ilean` too)."""
        self._rebuilt: list[str] = []
        self.lake_checks = 0
        """How many times Lake was asked (for tests and stats)."""

    # ---- sources ------------------------------------------------------------------------------------
    def _paths(self, name: str) -> tuple[str, str] | None:
        """A module's source file and `.olean` (None for a name that is no module name); kept, as strings.

        Not kept with several source directories: which one holds the module's file is asked each time.
        """
        try:
            return self._path_cache[name]
        except KeyError:
            pass
        paths = None
        if is_module_name(name):
            layout = self._layout
            paths = (str(layout.source_path(name)), str(layout.olean_path(name)))
            if len(layout.source_dirs) > 1:
                return paths
        if len(self._path_cache) >= MAX_SOURCES:
            self._path_cache.clear()
        self._path_cache[name] = paths
        return paths

    async def _source(self, path: str, key: FileKey | None) -> Source | None:
        """The source at `path` whose `stat` is `key` now: as last read, or read again when it may have changed."""
        if key is None:
            self._sources.pop(path, None)
            return None
        hit = self._sources.get(path)
        if hit is not None and hit.key == key and not hit.racy:
            return hit
        now = time.time_ns()
        try:
            text = await read_source(Path(path), limit=self._max_source_bytes)
        except (BrokerError, OSError):  # not readable as Lean source: Lean cannot build it either
            source = Source(key, None, (), racy=True)
        else:
            # The ctime too: a tool that sets the mtime back (`cp -p`, `tar x`) leaves the write's time only there.
            source = Source(key, text_hash(text), header_imports(text), racy=now - max(key[0], key[1]) < RACY_NS)
        if len(self._sources) >= MAX_SOURCES:
            self._sources.clear()
        self._sources[path] = source
        return source

    async def closure(self, imports: Iterable[str]) -> list[Node]:
        """The workspace modules `imports` reach, each after its own imports (a cycle is cut where it closes).

        A workspace module is one whose source is under the root, or whose source is gone while its `.olean` is
        still in the build (Lean would load that build; a fresh check cannot build it). The walk itself reads
        nothing but `stat`s; a source that changed is read, and the walk starts again.
        """
        names = tuple(imports)
        layout = self._layout_of()
        if layout != self._layout:  # the lakefile moved the sources or the build: every path is another
            self._layout = layout
            self._path_cache.clear()
        just_read: set[str] = set()
        while True:
            try:
                return self._walk(names, just_read)
            except _Unread as need:
                await self._source(need.path, need.key)
                just_read.add(need.path)

    def _walk(self, imports: tuple[str, ...], just_read: set[str]) -> list[Node]:
        order: list[Node] = []
        state: dict[str, bool] = {}  # False: being visited, True: done

        def visit(name: str) -> None:
            if name in state:
                return
            paths = self._paths(name)
            if paths is None:
                return
            key = _stat(paths[0])
            if key is None:
                if _stat(paths[1]) is None:
                    return  # not a module of this workspace
                self._sources.pop(paths[0], None)
                source = None
            else:
                source = self._sources.get(paths[0])
                if source is None or source.key != key or (source.racy and paths[0] not in just_read):
                    raise _Unread(paths[0], key)
            state[name] = False
            local: list[str] = []
            for dep in source.imports if source is not None else ():
                visit(dep)
                if state.get(dep) is True:
                    local.append(dep)
            state[name] = True
            deps = tuple(local)
            node = self._nodes.get(name)
            if node is None or node.source is not source or node.imports != deps:
                node = Node(name, Path(paths[0]), source, deps)
                if len(self._nodes) >= MAX_SOURCES:
                    self._nodes.clear()
                self._nodes[name] = node
            order.append(node)

        for name in imports:
            visit(name)
        return order

    # ---- what workers loaded ------------------------------------------------------------------------
    async def loading(self, imports: tuple[str, ...]) -> Loaded:
        """What a worker opened now (or restarted by a header change) will load for `imports`."""
        return Loaded(imports, self._olean_keys(await self.closure(imports)))

    def on_disk(self, loaded: Loaded | None) -> dict[str, FileKey | None] | None:
        """The `.olean` files of `loaded`'s modules as they are now (None when `loaded` is unknown)."""
        return None if loaded is None else {name: _stat(self._olean(name)) for name in loaded.oleans}

    def outdated(self, loaded: Loaded | None, imports: tuple[str, ...]) -> bool:
        """Whether a worker that loaded `loaded` no longer has the artifacts on disk (or other imports now)."""
        if loaded is None or loaded.imports != imports:
            return True
        return any(_stat(self._olean(name)) != key for name, key in loaded.oleans.items())

    # ---- the check ----------------------------------------------------------------------------------
    async def stale(
        self,
        imports: tuple[str, ...],
        loaded: Loaded | None,
        held: Mapping[str, str],
        *,
        settle: bool = False,
        rebuilt_at_setup: Mapping[str, FileKey | None] | None = None,
    ) -> list[Stale]:
        """The stale imports of a Lean document, imports first (the order to save them in).

        Args:
            imports: The document's header imports.
            loaded: What its worker loaded (None: unknown, every workspace import counts as reloaded).
            held: Text hashes Beam holds for modules (open documents): one that is not what the module's
                artifacts were made from makes it stale as its file would.
            settle: A barrier of this worker just completed: the first one confirms `loaded`.
            rebuilt_at_setup: Lake's setup for this worker built imports (its setup lines said so): the worker
                loaded what Lake built, the `.olean` files as they were when the setup said so (`on_disk` then),
                and an unconfirmed `loaded` is taken from them. Not from the disk as it is now: a build since
                (another `lake build` while the worker elaborated) is not what the worker loaded.
        """
        nodes = await self.closure(imports)
        oleans = self._oleans(nodes)
        if loaded is not None and settle and not loaded.confirmed:
            if rebuilt_at_setup is not None and loaded.imports == imports:
                loaded.oleans = dict(rebuilt_at_setup)
            loaded.confirmed = True
        out = self._verdicts(nodes, oleans, held, loaded, imports, first_sight=False)
        if out is None:
            await self._learn(nodes, held)
            out = self._verdicts(nodes, self._oleans(nodes), held, loaded, imports, first_sight=True)
            assert out is not None
        return out

    def _verdicts(
        self,
        nodes: list[Node],
        oleans: Mapping[str, FileKey | None],
        held: Mapping[str, str],
        loaded: Loaded | None,
        imports: tuple[str, ...],
        *,
        first_sight: bool,
    ) -> list[Stale] | None:
        """The stale imports, or None when Beam does not know what a module was built from (ask Lake first).

        With `first_sight`, such a module (Lake could not tell) is taken as built from its source as it is now.
        """
        verdicts: dict[str, bool] = {}
        out: list[Stale] = []
        for node in nodes:
            needs_save = self._judge(node, oleans, held, verdicts)
            if needs_save is None:
                if not first_sight:
                    return None
                self._record(node, oleans)
                needs_save = False
            verdicts[node.name] = needs_save
            reloaded = loaded is None or loaded.oleans.get(node.name, ()) != oleans[node.name]
            if needs_save or reloaded:
                out.append(Stale(node.name, self.display(node.path), needs_save, node.name in imports))
        return out

    def _olean(self, name: str) -> str:
        paths = self._paths(name)
        assert paths is not None  # only names of a closure's nodes get here
        return paths[1]

    def _olean_keys(self, nodes: Iterable[Node]) -> dict[str, FileKey | None]:
        return {n.name: _stat(self._olean(n.name)) for n in nodes}

    def _oleans(self, nodes: Iterable[Node]) -> dict[str, FileKey | None]:
        """The `.olean` keys of `nodes`; one that changed since last seen is noted as rebuilt (`take_rebuilt`)."""
        oleans = self._olean_keys(nodes)
        for name, key in oleans.items():
            if self._seen.setdefault(name, key) != key:
                self._seen[name] = key
                self._rebuilt.append(self._olean(name).removesuffix(".olean") + ".ilean")
        return oleans

    def take_rebuilt(self) -> list[str]:
        """The `.ilean` files of the modules seen rebuilt since the last call (by Beam's save or anyone else).

        Lean's watchdog indexes references, definitions and workspace symbols of closed modules from them: it
        must be told (`LeanClient.files_changed`), or it answers from the old build.
        """
        out, self._rebuilt = list(dict.fromkeys(self._rebuilt)), []
        return out

    def _judge(
        self, node: Node, oleans: Mapping[str, FileKey | None], held: Mapping[str, str], verdicts: Mapping[str, bool]
    ) -> bool | None:
        """True when the module must be built again, False when its artifacts are current, None when unknown.

        `verdicts` holds the judgements of its imports (a module over a stale import is stale too).
        """
        source = node.source
        if source is None or source.hash is None:
            return True
        if any(verdicts.get(dep) for dep in node.imports):
            return True
        if node.name in self._stale and self._stale[node.name] == self._state(node, oleans):
            return True
        built = self._built.get(node.name)
        if built is None or built.olean is None or built.olean != oleans.get(node.name):
            return None
        if built.source != source.hash or held.get(node.name, built.source) != built.source:
            return True
        deps = built.deps
        return len(deps) != len(node.imports) or any(
            name != dep or oleans.get(dep) != key for (name, key), dep in zip(deps, node.imports, strict=True)
        )

    def _state(self, node: Node, oleans: Mapping[str, FileKey | None]) -> tuple[Any, ...]:
        """What Lake judged a module by: its source and `.olean`, its imports' `.olean` files, and more.

        The sources of its whole import closure too: Lake calls a module out of date over an import edited since
        it was built, and an edit back makes it current again with nothing of its own changed.
        """
        deps = tuple((dep, oleans.get(dep)) for dep in node.imports)
        below: dict[str, str | None] = {}
        todo = list(node.imports)
        while todo:
            name = todo.pop()
            if name not in below:
                dep_node = self._nodes.get(name)  # the closure just walked put each one's current node there
                below[name] = dep_node.source.hash if dep_node and dep_node.source else None
                todo.extend(dep_node.imports if dep_node else ())
        return (node.source.hash if node.source else None, oleans.get(node.name), deps, tuple(sorted(below.items())))

    def _record(self, node: Node, oleans: Mapping[str, FileKey | None]) -> None:
        if node.source is None or node.source.hash is None:
            return
        deps = tuple((dep, oleans.get(dep)) for dep in node.imports)
        self._built[node.name] = Built(oleans.get(node.name), node.source.hash, deps)
        self._stale.pop(node.name, None)

    async def learn(self, imports: tuple[str, ...], held: Mapping[str, str]) -> None:
        """Ask Lake now about the imports Beam knows nothing of (a later `stale` then needs no Lake run)."""
        nodes = await self.closure(imports)
        oleans = self._oleans(nodes)
        if any(self._judge(n, oleans, held, {}) is None for n in nodes):
            await self._learn(nodes, held)

    async def _learn(self, nodes: list[Node], held: Mapping[str, str]) -> None:
        """Ask Lake whether the artifacts of `nodes` (a closure, in import order) are current; remember its answers.

        One question for all the modules Beam knows nothing about; when Lake says something is out of date, one
        question per module, imports first (a module over a stale import is stale without asking).
        """
        async with self._asking:
            oleans = self._oleans(nodes)
            unknown = [n for n in nodes if self._judge(n, oleans, held, {}) is None]
            if not unknown:
                return  # another call learnt it meanwhile
            code = await self._ask([n.name for n in unknown])
            if code == 0:  # about these (and their imports); a module over them may still be built over old ones
                await self._trust(unknown, nodes, oleans)
                return
            if code is None:
                return  # no Lake: the caller takes the artifacts as they are
            # Out of date (3), or Lake could not even tell (a missing import, a broken configuration): either way it
            # cannot confirm the build, so it is not current.
            out_of_date: set[str] = set()
            for node in unknown:
                if any(dep in out_of_date for dep in node.imports):
                    code = LAKE_OUT_OF_DATE
                else:
                    code = await self._ask([node.name])
                if code == 0:
                    await self._trust(
                        [n for n in nodes if n.name == node.name or n.name in node.imports], nodes, oleans
                    )
                elif code is not None:
                    out_of_date.add(node.name)
                    self._stale[node.name] = self._state(node, oleans)

    async def _ask(self, names: list[str]) -> int | None:
        self.lake_checks += 1
        return await self._lake_check(names)

    async def _trust(self, nodes: list[Node], closure: list[Node], oleans: Mapping[str, FileKey | None]) -> None:
        """Lake found `nodes` (of `closure`) current: record them, unless a file changed while Lake looked."""
        now_oleans = self._oleans(closure)
        for node in nodes:
            now = await self._source(str(node.path), _stat(str(node.path)))
            same_source = now is not None and node.source is not None and now.hash == node.source.hash
            if same_source and now_oleans[node.name] == oleans.get(node.name):
                self._record(node, now_oleans)

    async def before_build(self, module: str) -> BuildStart:
        """What the disk holds for `module` and its imports before Lake builds it (for `built`)."""
        nodes = await self.closure([module])
        return BuildStart(nodes, self._oleans(nodes))

    async def built(self, start: BuildStart) -> None:
        """Lake just built the module of `start` (a save): record it and its imports as made from their sources.

        A module whose source changed while Lake ran is not recorded (Lake will be asked about it next time). The
        modules Lake rebuilt are in the next `take_rebuilt`.
        """
        oleans = self._oleans(start.nodes)
        for node in start.nodes:
            now = await self._source(str(node.path), _stat(str(node.path)))
            if now is not None and node.source is not None and now.hash == node.source.hash:
                self._record(node, oleans)
