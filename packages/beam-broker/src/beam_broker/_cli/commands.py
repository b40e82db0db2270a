"""What `lean-beam` needs of each registry operation, as plain data derived once and cached.

Owns: `Command` (an operation's name, CLI description, output model name, file-argument `Shape` and its
arguments as `FieldArg`s with their help text), deriving it from the registry (`shape`, `field_args`: the rules
that turn input-model fields into command-line arguments), and the cache that keeps the derived commands in the
user's cache directory (`commands`). A warm call should cost little more than Python's start: with the cache, a
command builds its parser without importing the registry, its models or pydantic. The parser itself, and reading
option values back, are `args`'.

An operation whose model has position fields (`line` and `character`, or `start_line` ... `end_character`) takes
its position in the file argument, as Lean prints it (`Demo/Proofs.lean:4:31`, or a range `FILE:4:0-9:0`; see
`position`), and its LSP flags become optional. An operation whose model has a `version` field may omit
`--version`: the command then reads the file first (the `update` step) and answers for that version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from beam_broker.__about__ import __version__

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    from beam_broker.operations import OperationSpec

Kind = Literal["str", "text", "texts", "int", "bool", "choice", "list", "json"]

_SKIPPED = frozenset({"workspace", "snapshot"})
"""Fields no option sets: the workspace is `--root`'s, and the document state is the version (or the update step's)."""
_POSITIONAL = "path"
_TEXT_FIELDS = frozenset({"text"})
_TEXTS_FIELDS = frozenset({"texts"})
"""Lists of Lean texts: one repeatable option per item (`--text A --text B`), never split at commas."""
_DEST_PREFIX = "field_"
VERSION = "version"
"""The document-version field: optional on the command line (the `update` step supplies it)."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def command_name(spec: _Named) -> str:
    """The subcommand of an operation (or `Command`): its name with dashes (`run_at_handle` -> `run-at-handle`)."""
    return spec.name.replace("_", "-")


def cli_text(text: str) -> str:
    """A registry description as CLI help: MCP-only advice dropped, tool names spelled as commands."""
    from beam_broker.operations import BY_NAME, NO_SOURCE_EDITS, PROGRESS_SENTENCE

    text = text.replace(PROGRESS_SENTENCE, "").replace(NO_SOURCE_EDITS, "")

    def command(match: re.Match[str]) -> str:
        spec = BY_NAME.get(match.group(1))
        return f"`lean-beam {command_name(spec)}`" if spec is not None else match.group(0)

    text = re.sub(r"\blean_([a-z_]+)", command, text)
    return re.sub(r"\s{2,}", " ", text).strip()


def first_sentence(text: str) -> str:
    """The first sentence of a description (for the command list)."""
    end = re.search(r"[.:;](\s|$)", text)
    return text[: end.start()] if end else text


@dataclasses.dataclass(frozen=True)
class FieldArg:
    """How one input-model field appears on the command line."""

    name: str
    kind: Kind
    required: bool
    default: Any
    choices: tuple[str, ...] = ()
    implied: bool = False
    """Required by the model, but the command line can supply it (a position in FILE:LINE:COL, the version)."""
    help: str = ""
    """The option's help text (`_help`)."""

    @property
    def dest(self) -> str:
        """The argparse destination (prefixed so fields never collide with global options)."""
        return _DEST_PREFIX + self.name

    @property
    def flag(self) -> str:
        """The option spelling (`diagnostic_scope` -> `--diagnostic-scope`; a list of texts `texts` -> `--text`)."""
        name = self.name[:-1] if self.kind == "texts" else self.name
        return "--" + name.replace("_", "-")

    @property
    def positional(self) -> bool:
        """Whether the field is the positional argument."""
        return self.name == _POSITIONAL

    @property
    def mandatory(self) -> bool:
        """Whether argparse insists on it (required by the model and not supplied otherwise)."""
        return self.required and not self.implied and self.kind != "bool"


@dataclasses.dataclass(frozen=True)
class Shape:
    """How an operation's file argument reads: a plain file, a position, or a range (derived from its model).

    Attributes:
        positions: The prefixes of its `<prefix>line`/`<prefix>character` field pairs, in model order: `()` for
            none, `("",)` for a position, `("start_", "end_")` for a range.
        versioned: It has a `version` field.
        optional: Its position fields are optional in the model (`axioms` takes a name instead).
    """

    positions: tuple[str, ...] = ()
    versioned: bool = False
    optional: bool = False

    @property
    def point(self) -> bool:
        """It takes one position (`FILE:LINE:COL`)."""
        return len(self.positions) == 1

    @property
    def range(self) -> bool:
        """It takes a range (`FILE:LINE:COL-LINE:COL`, or the whole file)."""
        return len(self.positions) == 2

    def fields(self) -> tuple[str, ...]:
        """The LSP fields its positions fill, in order (`line`, `character`, or the four range fields)."""
        return tuple(f"{prefix}{part}" for prefix in self.positions for part in ("line", "character"))

    @property
    def metavar(self) -> str:
        """How the file argument is shown in usage lines."""
        if self.point:
            return "FILE[:LINE:COL]" if self.optional else "FILE:LINE:COL"
        if self.range:
            return "FILE[:LINE:COL-LINE:COL]"
        return "PATH"


def shape(spec: OperationSpec[BaseModel, BaseModel]) -> Shape:
    """The file-argument shape of an operation, from its input model's field names.

    Raises:
        TypeError: Position fields that form neither one position nor one range.
    """
    fields = spec.input_model.model_fields
    prefixes = tuple(n[:-4] for n in fields if n.endswith("line") and f"{n[:-4]}character" in fields)
    if _POSITIONAL not in fields:
        prefixes = ()
    if len(prefixes) > 2 or (len(prefixes) == 2 and "" in prefixes):
        raise TypeError(f"lean-beam cannot take the positions {prefixes!r} of {spec.name} from a file argument")
    form = Shape(prefixes, VERSION in fields and _POSITIONAL in fields)
    optional = bool(prefixes) and not any(fields[name].is_required() for name in form.fields())
    return dataclasses.replace(form, optional=optional)


def field_args(spec: OperationSpec[BaseModel, BaseModel]) -> list[FieldArg]:
    """The command-line arguments of an operation, in input-model order (the workspace is implied).

    Raises:
        TypeError: A field type the CLI cannot express (a new model field needs a rule here).
    """
    out = []
    form = shape(spec)
    implied = {*form.fields(), *((VERSION,) if form.versioned else ())}
    for name, info in spec.input_model.model_fields.items():
        if name in _SKIPPED:
            continue
        kind, choices = _kind_of(info.annotation)
        if kind == "str" and name in _TEXT_FIELDS:
            kind = "text"
        elif kind == "list" and not choices and name in _TEXTS_FIELDS:
            kind = "texts"
        required = info.is_required()
        default = None if required else json.loads(json.dumps(info.default))  # as the cache gives it back
        arg = FieldArg(name, kind, required, default, choices, name in implied)
        out.append(dataclasses.replace(arg, help=_help(info, arg, form)))
    return out


def _kind_of(annotation: Any) -> tuple[Kind, tuple[str, ...]]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _kind_of(members[0])
    elif origin is Literal:
        return "choice", tuple(str(a) for a in typing.get_args(annotation))
    elif origin is list:
        (item,) = typing.get_args(annotation)
        item_kind, choices = _kind_of(item)
        if item_kind in ("str", "choice"):
            return "list", choices
    elif origin is dict or annotation is dict:
        return "json", ()
    elif annotation is bool:
        return "bool", ()
    elif annotation is int:
        return "int", ()
    elif annotation is str:
        return "str", ()
    raise TypeError(f"lean-beam cannot express an input field of type {annotation!r}")


PATH_HELP = (
    "Lean source file (.lean) of the project: looked up in the current directory, then in the project root; "
    "or absolute."
)
POINT_HELP = (
    "LINE counts from 1 and COL from 0 in characters (code points), exactly as Lean prints positions in "
    "its messages (`Demo/Proofs.lean:4:31`); FILE:LINE means column 0."
)
RANGE_HELP = "FILE alone means the whole file; a range is FILE:LINE:COL-LINE:COL, positions as Lean prints them."
VERSION_HELP = (
    "Default: read the file from disk first (as `lean-beam update`) and answer for that version. A version "
    "from an earlier `lean-beam update`/`sync` is only meaningful through the same daemon."
)
FLAG_HELP = "For scripts, instead of the position in the file argument."


def _help(info: FieldInfo, arg: FieldArg, form: Shape) -> str:
    description = PATH_HELP if arg.positional else cli_text(info.description or "")
    parts = [description]
    if arg.positional and form.point:
        parts.append(POINT_HELP + (" The position is optional." if form.optional else ""))
    elif arg.positional and form.range:
        parts.append(RANGE_HELP)
    elif arg.implied and arg.name == VERSION:
        parts.append(VERSION_HELP)
    elif arg.implied:
        parts.append(FLAG_HELP)
    if arg.kind == "text":
        parts.append("Literal text, @FILE to read a file, or - for standard input (@@ starts a literal '@').")
    elif arg.kind == "texts":
        parts.append(
            "Repeat the option once per text, in order. Each is literal text, @FILE to read a file, or - for "
            "standard input (@@ starts a literal '@')."
        )
    elif arg.kind == "json":
        parts.append("A JSON object: inline text, @FILE, or - for standard input.")
    elif arg.kind == "list":
        parts.append("Comma-separated" + (f" ({', '.join(arg.choices)})." if arg.choices else "."))
    if arg.mandatory and not arg.positional:
        parts.append("Required.")
    elif arg.implied or "default" in description.lower():
        pass
    elif arg.kind == "bool" or (not arg.required and arg.default is not None and arg.kind not in ("list", "texts")):
        shown = json.dumps(arg.default) if arg.kind == "bool" else arg.default
        parts.append(f"Default: {shown}.")
    return " ".join(p for p in parts if p).replace("%", "%%")


@dataclasses.dataclass(frozen=True)
class Command:
    """One registry operation as `lean-beam` needs it, as plain data (so it can be cached as JSON).

    Attributes:
        name: The operation (`run_at`); `command_name` gives the subcommand.
        description: The registry description as CLI help (`cli_text`).
        output: The name of the operation's output model (what `human.render` draws).
        shape: How the file argument reads.
        args: The command-line arguments, in input-model order.
    """

    name: str
    description: str
    output: str
    shape: Shape
    args: tuple[FieldArg, ...]

    @classmethod
    def of(cls, spec: OperationSpec[BaseModel, BaseModel]) -> Command:
        """Derive the command of a registry entry."""
        return cls(
            spec.name, cli_text(spec.description), spec.output_model.__name__, shape(spec), tuple(field_args(spec))
        )

    def takes(self, name: str) -> bool:
        """Whether the operation has an input field `name`."""
        return any(arg.name == name for arg in self.args)

    def to_json(self) -> dict[str, Any]:
        """The command as JSON (`from_json` reads it back equal)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Command:
        """Read a command written by `to_json`.

        Raises:
            KeyError, TypeError, ValueError: Not what `to_json` writes.
        """
        form = data["shape"]
        args = tuple(FieldArg(**{**arg, "choices": tuple(arg["choices"])}) for arg in data["args"])
        shape_ = Shape(tuple(form["positions"]), bool(form["versioned"]), bool(form["optional"]))
        return cls(str(data["name"]), str(data["description"]), str(data["output"]), shape_, args)


def derive_commands() -> tuple[Command, ...]:
    """Every registry operation's command, in registry order (imports the registry and its models)."""
    from beam_broker.operations import OPERATIONS

    return tuple(Command.of(spec) for spec in OPERATIONS)


CACHE_ENV = "XDG_CACHE_HOME"


PACKAGE: Final = Path(__file__).resolve().parent.parent
"""The `beam_broker` folder: every source under it (in any room) can change what the commands are."""


def fingerprint(package: Path = PACKAGE) -> str:
    """A digest of what the derived commands depend on.

    That is beam-lsp's and Python's versions and every source file under `package`, in every subfolder: an edit
    in a room (`_ops/`, `_probes/`, `_cli/`) must derive the commands again.

    Raises:
        OSError: A source file cannot be read.
    """
    import beam_lsp

    digest = hashlib.sha256(f"{__version__} {beam_lsp.__version__} {sys.version}".encode())
    for source in sorted(package.rglob("*.py")):
        digest.update(source.relative_to(package).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:24]


def cache_dir() -> Path:
    """Where `lean-beam` keeps its derived commands: `$XDG_CACHE_HOME/lean-beam`, else `~/.cache/lean-beam`."""
    base = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lean-beam"


def commands() -> tuple[Command, ...]:
    """The commands of every registry operation: from the cache when it matches this installation, else derived.

    The cache file is named by a digest of the package's sources, so an upgrade or an edit derives them again; a
    file that cannot be read or written is ignored (the commands are then derived on every run).
    """
    try:
        path = cache_dir() / f"commands-{fingerprint()}.json"
    except OSError:
        return derive_commands()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple(Command.from_json(item) for item in data)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = derive_commands()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp") as f:
            json.dump([command.to_json() for command in found], f)
        os.replace(f.name, path)
    except OSError:
        pass
    return found
