"""`lean-beam` subcommands from the operations' commands, and their arguments turned back into JSON.

Owns: one argparse subparser per operation (`commands.Command`: arguments generated from the input model's
fields, help text adapted from the registry's descriptions), reading option values (`@FILE`, `-` for stdin, JSON
objects, comma lists) into the `arguments` object of `Broker.call`, and a position in the file argument turned
into the operation's LSP fields. It lists no operation by hand and never validates what the input model
validates: bad values reach the broker and come back as `invalidInput`.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from beam_broker.config import DEFAULT_MAX_SOURCE_BYTES
from beam_broker.errors import invalid_input
from beam_lsp.strict_json import loads_object

from .commands import VERSION, Command, command_name, derive_commands, first_sentence
from .position import PositionError, Source, Target, parse_target

MAX_VALUE_CHARS = DEFAULT_MAX_SOURCE_BYTES
"""Longest `@FILE` value read (characters): a text or JSON argument is never bigger than a source file."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without breaking lines at hyphens (`lean-beam sync` stays on one line)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


def add_operation(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    command: Command,
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the subcommand of one operation; its namespace carries `operation = command.name`."""
    description = command.description
    parser = subparsers.add_parser(
        command_name(command),
        help=first_sentence(description).replace("%", "%%"),
        description=description.replace("%", "%%"),
        parents=parents,
        formatter_class=HelpFormatter,
        allow_abbrev=False,  # `--text` must never be read as a prefix of another option
    )
    form = command.shape
    for arg in command.args:
        text = arg.help
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
            elif arg.kind == "texts":
                kwargs.update(action="append", metavar="TEXT")
            elif arg.kind == "json":
                kwargs.update(metavar="JSON")
            else:
                kwargs.update(metavar=arg.name.upper())
            parser.add_argument(arg.flag, **kwargs)
    parser.set_defaults(operation=command.name)
    return parser


def add_operations(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    found: Sequence[Command],
) -> None:
    """One subcommand per command, in registry order."""
    for command in found:
        add_operation(subparsers, command, parents)


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


def operation_arguments(command: Command, namespace: argparse.Namespace, inputs: Inputs) -> dict[str, Any]:
    """The `arguments` object for `Broker.call` (without the workspace); omitted options are left out.

    Raises:
        BrokerError: `invalidInput` for unreadable `@FILE`/stdin values or malformed JSON objects.
    """
    values: Mapping[str, Any] = vars(namespace)
    out: dict[str, Any] = {}
    for arg in command.args:
        raw = values.get(arg.dest)
        if raw is None:
            continue
        if arg.kind == "text":
            out[arg.name] = inputs.source(raw, arg.flag, escape=True)
        elif arg.kind == "texts":
            out[arg.name] = [inputs.source(item, arg.flag, escape=True) for item in raw]
        elif arg.kind == "json":
            out[arg.name] = _object(inputs.source(raw, arg.flag, escape=False), arg.flag)
        elif arg.kind == "list":
            out[arg.name] = [item.strip() for item in raw.split(",") if item.strip()]
        else:
            out[arg.name] = raw
    return out


def resolve_cli_path(path: str, root: str, cwd: str) -> str:
    """A file argument as the broker expects it: root-relative inside the project, else absolute.

    A relative path is looked up against the current directory first (as a shell completes it), then against the
    project root (so a path Beam printed, which is root-relative, can be pasted back from any subdirectory). From
    outside the project (`--root`) the root comes first. When neither exists, the first reading is kept, so the
    error names the file the user meant.
    """
    real_root = os.path.realpath(root)
    if os.path.isabs(path):
        full = os.path.realpath(path)
    else:
        here = os.path.realpath(os.path.join(cwd, path))
        there = os.path.realpath(os.path.join(real_root, path))
        real_cwd = os.path.realpath(cwd)
        cwd_inside = real_cwd == real_root or real_cwd.startswith(real_root.rstrip(os.sep) + os.sep)
        if os.path.exists(here) and (cwd_inside or not os.path.exists(there)):
            full = here
        elif os.path.exists(there) or not cwd_inside:
            full = there
        else:
            full = here
    inside = full == real_root or full.startswith(real_root.rstrip(os.sep) + os.sep)
    return os.path.relpath(full, real_root) if inside else full


def check_file(raw: str, path: str, root: str) -> None:
    """Refuse, before anything runs, a file argument that is no Lean source or lies outside the project.

    Args:
        raw: The file as the user wrote it (named in the message).
        path: `resolve_cli_path`'s answer: root-relative, or absolute when outside the project.
        root: The project root.

    Raises:
        BrokerError: `invalidInput` (exit status 2) with a one-line reason.
    """
    if not path.endswith(".lean") or os.path.basename(path) == ".lean":
        raise invalid_input(f"{raw}: not a Lean source file (Beam works only on `.lean` files)")
    if os.path.isabs(path):
        raise invalid_input(
            f"{raw}: outside the project {root}; run lean-beam from the file's own project, or pass --root DIR"
        )


def split_target(spec: Command, raw: str) -> Target:
    """The file argument of an operation split into file and position (a plain path for other operations).

    Raises:
        BrokerError: `invalidInput` for a line 0, or a range given to an operation that takes one position.
    """
    form = spec.shape
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


def locate(spec: Command, arguments: dict[str, Any], target: Target, source: Source | None) -> None:
    """Fill the operation's LSP position fields from the target's position (converted with the file's text).

    Without a position in the target the flags must give all of them; a range operation with neither covers the
    whole file, and an operation whose position is optional (`axioms`, which also takes a name) goes without.

    Raises:
        BrokerError: `invalidInput` when the position is missing, incomplete, or given twice.
    """
    form = spec.shape
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
    if not given and form.optional:
        return
    if not given and form.range:
        if source is None:
            raise invalid_input(f"{usage}: cannot read {target.path} to cover all of it")
        end_line, end_character = source.end()
        arguments.update(dict(zip(names, (0, 0, end_line, end_character), strict=True)))
        return
    raise invalid_input(usage)


def synopsis(spec: Command) -> str:
    """The arguments of a subcommand in usage style (`FILE:LINE:COL [--version N] [--no-include-declaration]`).

    The LSP position flags, which a position in the file argument replaces, are left out.
    """
    form = spec.shape
    parts = []
    for arg in spec.args:
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
        elif arg.kind == "texts":
            value = "TEXT ..."
        text = f"{arg.flag} {value or arg.name.upper()}"
        parts.append(text if arg.mandatory else f"[{text}]")
    return " ".join(parts)


def commands_table() -> str:
    """The Markdown table of registry subcommands in docs/cli.md (`python -m beam_broker._cli.args`)."""
    lines = ["| command | arguments | what it does |", "| --- | --- | --- |"]
    for command in derive_commands():
        args = synopsis(command).replace("|", "\\|")
        shown = f"`{args}`" if args else "(none)"
        lines.append(f"| `{command_name(command)}` | {shown} | {first_sentence(command.description)}. |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(commands_table())
