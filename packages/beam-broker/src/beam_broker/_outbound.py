"""What leaves the broker: text and JSON with no secret and no probe mirror in them, and the broker's log output.

Two rules meet here, because every answer, event, error and log line passes both.

**Mirrors are invisible.** Probe mirrors (`_mirrors`) are documents Lean's watchdog indexes like any open file,
so its answers name them: a workspace symbol or a reference in `Demo/Proofs_beamProbe1.lean`, a file that does
not exist, or a private name `_private.«external:file:///…/Proofs_beamProbe1.lean».0.x` in a probe's message.

- Dropped: a location-like object in a list whose `uri`, `targetUri`, `path`, `location.uri` or
  `textDocument.uri` names a mirror (LSP `Location`, `LocationLink`, `SymbolInformation`/`WorkspaceSymbol`,
  `CallHierarchyItem`, a diagnostic's related information, a diagnostic item, a document edit), an object key
  naming a mirror (a `WorkspaceEdit.changes` entry), and an event whose payload is such an object. What exists
  only in a probe is never returned, and a copy of the source in a mirror never answers twice.
- Mapped, in any other text: a mirror's name becomes its source document's name of the same kind
  (`Demo/Proofs_beamProbe1.lean` -> `Demo/Proofs.lean`, the URI likewise, the module `Demo.Proofs_beamProbe1` ->
  `Demo.Proofs`, the scratch run's `_beamScratch_beamProbe1` -> `_beamScratch`), and Lean's name for a module it could
  not place, `«external:<mirror URI>»`, becomes the source's module name under the workspace's source directory
  (`Demo.Proofs`, what Lean calls the source itself; the lakefile's `srcDir`, `_lake.Layout`). This is truthful: a
  mirror's text before the probe is a copy of the source, so what Lean says there it says of the source with the probe
  inserted. A source whose file stem holds a dot (its mirrors replace it with `_`) is named with `_` there.

The broker applies it at its boundary only (`Broker.call`: results, errors and events of every operation;
`stats`, `runtime_snapshot`, `diagnostics`), and to log text; handlers never call it. It must stay cheap: an
answer that mentions no mirror is one substring test of its `repr`.

**Log output is redacted.** `log_failure` logs an exception with its traceback, the whole text redacted first
(the standard `exc_info` path would format the exception's text unredacted), and `RedactingFormatter` is the
formatter the `lean-beam` CLI and daemon install; `redact_log_text` is the rule for one line, which
lean-beam-mcp's formatters apply too. So no log line Beam writes carries a secret or names a mirror.
Which values are secret is the configuration's business (`BrokerConfig.redactor`); how they are replaced is
beam-lsp's `Redactor`.

Standard library, `beam_lsp.project` and the redactor only at import (the error boundary and the CLI's start-up
import it); `_lake`'s layout rules are imported when a text names a mirror's module as Lean could not place it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import traceback
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from beam_lsp.project import is_module_name
from beam_lsp.redaction import Redactor

if TYPE_CHECKING:
    from ._lake import Layout
    from .events import BrokerEvent, CallContext

Root: TypeAlias = "str | Callable[[], Layout] | None"
"""Where a text's `«external:…»` names are placed: the canonical workspace root (its lakefile read once per text),
or the workspace's layout (`WorkspaceRuntime.layout`: read again only when a lakefile changes), or None."""

MARK: Final = "_beamProbe"
"""What every mirror's name holds (`<Stem>_beamProbe<k>.lean`, see `MirrorPool.mirror_uri`)."""

_MIRROR: Final = re.compile(r"_beamProbe\d+\.lean$")
# The mirror suffix of a file, URI or module name: after the source's stem (which may end in any character of a
# Lean name: `Foo'`, `Is?`), before `.lean`, a `.`, `»` or the end.
_SUFFIX: Final = re.compile(r"(?<=[\w'!?])_beamProbe\d+(?![\w'!?])")
# Lean names the module of a file it cannot place (a mirror is never on disk) by its URI.
_EXTERNAL: Final = re.compile(r"«external:([^«»]*?)_beamProbe\d+\.lean»")
_LOCATION_KEYS: Final = ("uri", "targetUri", "path")
_NESTED_KEYS: Final = ("location", "textDocument")


def names_mirror(value: str) -> bool:
    """Whether a path or URI names a private probe mirror (the one test: `_mirrors.is_mirror_path` is this)."""
    return bool(_MIRROR.search(value))


def text(value: str, root: Root = None) -> str:
    """`value` with every mirror name replaced by its source's name (see the module docstring).

    Args:
        value: Any text (a Lean message, a log line, an error message).
        root: The workspace (`Root`), to name a source module as Lean does; without it an `«external:…»` name
            keeps its form with the source's URI.
    """
    if MARK not in value:
        return value
    # One layout for the whole text, however many names it maps (a read parses the lakefile), and only if one does.
    layout = None if root is None else cache(partial(_read_layout, root) if isinstance(root, str) else root)
    value = _EXTERNAL.sub(lambda match: _module(match.group(1) + ".lean", layout), value)
    return _SUFFIX.sub("", value)


def _read_layout(root: str) -> Layout:
    from ._lake import read_layout  # Lake's layout rules have one home; read only when a mirror is named

    return read_layout(root)


def _module(source: str, layout: Callable[[], Layout] | None) -> str:
    """Lean's name for the module of a source file (its URI or path), else `«external:…»`.

    The name is relative to the source directory of the workspace holding the file (`layout`: the lakefile's
    `srcDir`, read on this rare path only).
    """
    if layout is not None:
        path: Path | None = None
        if source.startswith("file:"):
            from beam_lsp.documents import uri_to_path  # the pydantic-backed module, on this rare path only

            path = uri_to_path(source)
        elif source.startswith("/"):
            path = Path(source)
        name = layout().module_of(path) if path is not None else None
        if name is not None and is_module_name(name):
            return name
    return f"«external:{source}»"


def mentions(value: Any) -> bool:
    """Whether a JSON value holds a mirror's name anywhere (a string or an object key)."""
    if isinstance(value, str):
        return MARK in value
    if isinstance(value, dict):
        return any((isinstance(k, str) and MARK in k) or mentions(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(mentions(v) for v in value)
    return False


def located_in_mirror(value: Any) -> bool:
    """Whether a JSON value is a location-like object in a mirror (see the module docstring)."""
    if not isinstance(value, dict):
        return False
    for key in _LOCATION_KEYS:
        where = value.get(key)
        if isinstance(where, str) and names_mirror(where):
            return True
    for key in _NESTED_KEYS:
        nested = value.get(key)
        if isinstance(nested, dict):
            where = nested.get("uri")
            if isinstance(where, str) and names_mirror(where):
                return True
    return False


def scrub(value: Any, root: Root = None) -> Any:
    """A JSON value with mirrors dropped and mapped (the module docstring's rule); `value` itself when none shows.

    Args:
        value: A JSON value (dicts, lists, strings, numbers, booleans, None); it is never modified.
        root: The workspace (`Root`, see `text`).
    """
    if MARK not in repr(value):  # a JSON value's repr shows every key and string as it is (MARK needs no escape)
        return value
    return _walk(value, root)


def _walk(value: Any, root: Root) -> Any:
    if isinstance(value, str):
        return text(value, root)
    if isinstance(value, list | tuple):
        return [_walk(v, root) for v in value if not located_in_mirror(v)]
    if isinstance(value, dict):
        return {
            (text(k, root) if isinstance(k, str) else k): _walk(v, root)
            for k, v in value.items()
            if not (isinstance(k, str) and names_mirror(k))
        }
    return value


def event(ev: BrokerEvent, root: Root = None) -> BrokerEvent | None:
    """An event with mirrors mapped, or None when its payload is a location-like object in a mirror."""
    if MARK not in repr(ev):  # a dataclass's repr shows its fields' values
        return ev
    values = {field.name: getattr(ev, field.name) for field in dataclasses.fields(ev)}
    if any(located_in_mirror(v) for v in values.values()):
        return None
    return dataclasses.replace(ev, **{k: _walk(v, root) for k, v in values.items()})


def context(ctx: CallContext, root: Root = None) -> CallContext:
    """A call context whose events pass through `event` before they reach `ctx.emit`."""
    sink = ctx.emit

    def emit(ev: BrokerEvent) -> None:
        clean = event(ev, root)
        if clean is not None:
            sink(clean)

    return dataclasses.replace(ctx, emit=emit)


# ---- log output ------------------------------------------------------------------------------------------
def log_failure(logger: logging.Logger, redactor: Redactor, exc: BaseException, message: str, *args: Any) -> None:
    """Log `message % args` and the traceback of `exc` at ERROR level, both redacted."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    logger.error(
        "%s\n%s", redact_log_text(redactor, message % args if args else message), redact_log_text(redactor, trace)
    )


class RedactingFormatter(logging.Formatter):
    """A `logging.Formatter` whose whole output (message, arguments, traceback) goes through a redactor."""

    def __init__(self, redactor: Redactor, fmt: str | None = None) -> None:
        """Format like `logging.Formatter(fmt)`, then redact."""
        super().__init__(fmt)
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, redacted, naming no probe mirror."""
        return redact_log_text(self._redactor, super().format(record))


def redact_log_text(redactor: Redactor, value: str) -> str:
    """A log line's text as it may leave Beam: probe mirrors named as their sources (`text`), then redacted.

    Every log writer of Beam's packages uses it (the broker's formatter and `log_failure`, lean-beam-mcp's text
    and JSON lines), so a log line hides what an answer hides.
    """
    # Mirrors first: the redactor may shorten a home directory inside a mirror's URI.
    return redactor.redact(text(value))
