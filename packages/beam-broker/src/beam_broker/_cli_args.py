"""`lean-beam` subcommands derived from the operation registry, and their arguments turned back into JSON.

Owns: one argparse subparser per `OPERATIONS` entry (arguments generated from the input model's fields),
help text adapted from the registry's descriptions, and reading option values (`@FILE`, `-` for stdin, JSON
objects, comma lists) into the `arguments` object of `Broker.call`. It lists no operation by hand and never
validates what the input model validates: bad values reach the broker and come back as `invalidInput`.

Two conveniences are derived from the input models too. An operation whose model has position fields (`line` and
`character`, or `start_line` ... `end_character`) takes its position in the file argument, as Lean prints it
(`Demo/Proofs.lean:4:31`, or a range `FILE:4:0-9:0`; see `_position`), and its LSP flags become optional. An
operation whose model has a `version` field may omit `--version`: the command then reads the file first (the
`update` step) and answers for that version.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import re
import sys
import textwrap
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TextIO

from pydantic.fields import FieldInfo

from beam_lsp.strict_json import loads_object

from ._position import PositionError, Source, Target, parse_target
from .config import DEFAULT_MAX_SOURCE_BYTES
from .errors import invalid_input
from .operations import BY_NAME, OPERATIONS, PROGRESS, OperationSpec

Kind = Literal["str", "text", "int", "bool", "choice", "list", "json"]

_SKIPPED = frozenset({"workspace"})
_POSITIONAL = "path"
_TEXT_FIELDS = frozenset({"text"})
_DEST_PREFIX = "field_"
VERSION = "version"
"""The document-version field: optional on the command line (the `update` step supplies it)."""
MAX_VALUE_CHARS = DEFAULT_MAX_SOURCE_BYTES
"""Longest `@FILE` value read (characters): a text or JSON argument is never bigger than a source file."""


def command_name(spec: OperationSpec) -> str:
    """The subcommand of an operation: its name with dashes (`run_at_handle` -> `run-at-handle`)."""
    return spec.name.replace("_", "-")


def cli_text(text: str) -> str:
    """A registry description as CLI help: MCP-only advice dropped, tool names spelled as commands."""
    text = text.replace(PROGRESS, "")

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

    @property
    def dest(self) -> str:
        """The argparse destination (prefixed so fields never collide with global options)."""
        return _DEST_PREFIX + self.name

    @property
    def flag(self) -> str:
        """The option spelling (`diagnostic_scope` -> `--diagnostic-scope`)."""
        return "--" + self.name.replace("_", "-")

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
    """

    positions: tuple[str, ...] = ()
    versioned: bool = False

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
            return "FILE:LINE:COL"
        if self.range:
            return "FILE[:LINE:COL-LINE:COL]"
        return "PATH"


def shape(spec: OperationSpec) -> Shape:
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
    return Shape(prefixes, VERSION in fields and _POSITIONAL in fields)


def field_args(spec: OperationSpec) -> list[FieldArg]:
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
        required = info.is_required()
        out.append(FieldArg(name, kind, required, None if required else info.default, choices, name in implied))
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
    "Lean source file: relative to the current directory when that is inside the project, else to the "
    "project root; or absolute."
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


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without breaking lines at hyphens (`lean-beam sync` stays on one line)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


def _help(info: FieldInfo, arg: FieldArg, form: Shape) -> str:
    description = PATH_HELP if arg.positional else cli_text(info.description or "")
    parts = [description]
    if arg.positional and form.point:
        parts.append(POINT_HELP)
    elif arg.positional and form.range:
        parts.append(RANGE_HELP)
    elif arg.implied and arg.name == VERSION:
        parts.append(VERSION_HELP)
    elif arg.implied:
        parts.append(FLAG_HELP)
    if arg.kind == "text":
        parts.append("Literal text, @FILE to read a file, or - for standard input (@@ starts a literal '@').")
    elif arg.kind == "json":
        parts.append("A JSON object: inline text, @FILE, or - for standard input.")
    elif arg.kind == "list":
        parts.append("Comma-separated" + (f" ({', '.join(arg.choices)})." if arg.choices else "."))
    if arg.mandatory and not arg.positional:
        parts.append("Required.")
    elif arg.implied or "default" in description.lower():
        pass
    elif arg.kind == "bool" or (not arg.required and arg.default is not None and arg.kind != "list"):
        shown = json.dumps(arg.default) if arg.kind == "bool" else arg.default
        parts.append(f"Default: {shown}.")
    return " ".join(p for p in parts if p).replace("%", "%%")


def add_operation(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    spec: OperationSpec,
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the subcommand of one operation; its namespace carries `operation = spec.name`."""
    description = cli_text(spec.description)
    parser = subparsers.add_parser(
        command_name(spec),
        help=first_sentence(description).replace("%", "%%"),
        description=description.replace("%", "%%"),
        parents=parents,
        formatter_class=HelpFormatter,
    )
    fields = spec.input_model.model_fields
    form = shape(spec)
    for arg in field_args(spec):
        text = _help(fields[arg.name], arg, form)
        if arg.positional:
            parser.add_argument(arg.dest, metavar=form.metavar, help=text)
        elif arg.kind == "bool":
            action: Any = argparse.BooleanOptionalAction if arg.default is True else "store_true"
            parser.add_argument(arg.flag, dest=arg.dest, action=action, default=None, help=text)
        else:
            kwargs: dict[str, Any] = {"dest": arg.dest, "required": arg.mandatory, "help": text}
            if arg.kind == "int":
                kwargs.update(type=int, metavar="N")
            elif arg.kind == "choice":
                kwargs.update(choices=arg.choices)
            elif arg.kind == "list":
                kwargs.update(metavar="A,B" if not arg.choices else "{" + ",".join(arg.choices) + "}[,...]")
            elif arg.kind == "json":
                kwargs.update(metavar="JSON")
            else:
                kwargs.update(metavar=arg.name.upper())
            parser.add_argument(arg.flag, **kwargs)
    parser.set_defaults(operation=spec.name)
    return parser


def add_operations(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], parents: list[argparse.ArgumentParser]
) -> None:
    """One subcommand per registry entry, in registry order."""
    for spec in OPERATIONS:
        add_operation(subparsers, spec, parents)


@dataclasses.dataclass
class Inputs:
    """Where option values are read from; standard input may be consumed once per invocation."""

    stdin: TextIO = dataclasses.field(default_factory=lambda: sys.stdin)
    _stdin_used_by: str | None = None

    def source(self, raw: str, flag: str, *, escape: bool) -> str:
        """Resolve `-` (stdin) and `@FILE`; with `escape`, `@@x` is the literal `@x`.

        Raises:
            BrokerError: `invalidInput` when stdin was already used or the file cannot be read.
        """
        if raw == "-":
            if self._stdin_used_by is not None:
                raise invalid_input(f"{flag}: standard input was already read for {self._stdin_used_by}")
            self._stdin_used_by = flag
            return self.stdin.read()
        if escape and raw.startswith("@@"):
            return raw[1:]
        if raw.startswith("@"):
            try:
                return _read_file(raw[1:])
            except (OSError, UnicodeDecodeError) as exc:
                hint = " (to pass text that starts with '@', write '@@')" if escape else ""
                raise invalid_input(f"{flag}: cannot read {raw[1:]!r}: {_reason(exc)}{hint}") from None
        return raw


def _reason(exc: OSError | UnicodeDecodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return exc.strerror or str(exc)


def _read_file(path: str) -> str:
    # A pipe is fine here (`@/dev/stdin`, `@<(cmd)`): this is the user's own process. Only the size is bounded.
    with open(path, encoding="utf-8") as f:
        text = f.read(MAX_VALUE_CHARS + 1)
    if len(text) > MAX_VALUE_CHARS:
        raise OSError(errno.EFBIG, f"longer than {MAX_VALUE_CHARS} characters")
    return text


def _object(text: str, flag: str) -> dict[str, Any]:
    try:
        return loads_object(text)
    except ValueError as exc:
        raise invalid_input(f"{flag}: {exc}") from None


def operation_arguments(spec: OperationSpec, namespace: argparse.Namespace, inputs: Inputs) -> dict[str, Any]:
    """The `arguments` object for `Broker.call` (without the workspace); omitted options are left out.

    Raises:
        BrokerError: `invalidInput` for unreadable `@FILE`/stdin values or malformed JSON objects.
    """
    values: Mapping[str, Any] = vars(namespace)
    out: dict[str, Any] = {}
    for arg in field_args(spec):
        raw = values.get(arg.dest)
        if raw is None:
            continue
        if arg.kind == "text":
            out[arg.name] = inputs.source(raw, arg.flag, escape=True)
        elif arg.kind == "json":
            out[arg.name] = _object(inputs.source(raw, arg.flag, escape=False), arg.flag)
        elif arg.kind == "list":
            out[arg.name] = [item.strip() for item in raw.split(",") if item.strip()]
        else:
            out[arg.name] = raw
    return out


def resolve_cli_path(path: str, root: str, cwd: str) -> str:
    """A relative `path` as the broker expects it (root-relative).

    Inside the project a relative path is relative to the current directory, as a shell completes it; from
    outside the project it is relative to the root.
    """
    if os.path.isabs(path):
        return path
    real_root, real_cwd = os.path.realpath(root), os.path.realpath(cwd)
    if real_cwd != real_root and real_cwd.startswith(real_root.rstrip(os.sep) + os.sep):
        return os.path.relpath(os.path.join(real_cwd, path), real_root)
    return path


def split_target(spec: OperationSpec, raw: str) -> Target:
    """The file argument of an operation split into file and position (a plain path for other operations).

    Raises:
        BrokerError: `invalidInput` for a line 0, or a range given to an operation that takes one position.
    """
    form = shape(spec)
    if not form.positions:
        return Target(raw)
    try:
        target = parse_target(raw)
    except PositionError as exc:
        raise invalid_input(f"{raw}: {exc}") from None
    if target.end is not None and not form.range:
        raise invalid_input(f"{raw}: `lean-beam {command_name(spec)}` takes one position FILE:LINE:COL, not a range")
    if target.start is not None and target.end is None and form.range:
        raise invalid_input(
            f"{raw}: `lean-beam {command_name(spec)}` takes a range FILE:LINE:COL-LINE:COL, or FILE for all of it"
        )
    return target


def locate(spec: OperationSpec, arguments: dict[str, Any], target: Target, source: Source | None) -> None:
    """Fill the operation's LSP position fields from the target's position (converted with the file's text).

    Without a position in the target the flags must give all of them; a range operation with neither covers the
    whole file.

    Raises:
        BrokerError: `invalidInput` when the position is missing, incomplete, or given twice.
    """
    form = shape(spec)
    names = form.fields()
    if not names:
        return
    given = [n for n in names if n in arguments]
    flags = " ".join(f"--{n.replace('_', '-')} N" for n in names)
    usage = f"`lean-beam {command_name(spec)}` needs {form.metavar} (or {flags})"
    if target.start is not None:
        if given:
            raise invalid_input(f"{usage}, not both")
        ends = [target.start] if target.end is None else [target.start, target.end]
        for prefix, pos in zip(form.positions, ends, strict=True):
            line, character = source.to_lsp(pos) if source is not None else (pos.line - 1, pos.column)
            arguments[f"{prefix}line"], arguments[f"{prefix}character"] = line, character
        return
    if len(given) == len(names):
        return
    if not given and form.range:
        if source is None:
            raise invalid_input(f"{usage}: cannot read {target.path} to cover all of it")
        end_line, end_character = source.end()
        arguments.update(dict(zip(names, (0, 0, end_line, end_character), strict=True)))
        return
    raise invalid_input(usage)


def synopsis(spec: OperationSpec) -> str:
    """The arguments of a subcommand in usage style (`FILE:LINE:COL [--version N] [--no-include-declaration]`).

    The LSP position flags, which a position in the file argument replaces, are left out.
    """
    form = shape(spec)
    parts = []
    for arg in field_args(spec):
        if arg.positional:
            parts.append(form.metavar)
            continue
        if arg.implied and arg.name != VERSION:
            continue
        if arg.kind == "bool":
            flag = arg.flag if arg.default is not True else "--no-" + arg.flag[2:]
            parts.append(f"[{flag}]")
            continue
        value = {"int": "N", "json": "JSON", "choice": "{" + ",".join(arg.choices) + "}"}.get(arg.kind)
        if arg.kind == "list":
            value = "{" + ",".join(arg.choices) + "},..." if arg.choices else "A,B,..."
        text = f"{arg.flag} {value or arg.name.upper()}"
        parts.append(text if arg.mandatory else f"[{text}]")
    return " ".join(parts)


def commands_table() -> str:
    """The Markdown table of registry subcommands in docs/cli.md (`python -m beam_broker._cli_args`)."""
    lines = ["| command | arguments | what it does |", "| --- | --- | --- |"]
    for spec in OPERATIONS:
        args = synopsis(spec).replace("|", "\\|")
        shown = f"`{args}`" if args else "(none)"
        lines.append(f"| `{command_name(spec)}` | {shown} | {first_sentence(cli_text(spec.description))}. |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(commands_table())
