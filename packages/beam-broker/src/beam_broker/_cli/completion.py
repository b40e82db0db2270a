"""Shell completion scripts for `lean-beam` (bash, zsh, fish), generated from its argparse parser.

Owns: reading the parser (commands, their options, which options take values and which values, the file
argument) into a small neutral `Command` tree, and writing that tree as a static script per shell. Since the
parser is generated from the operation registry, so are the scripts: a new operation or field needs nothing here.

Static scripts rather than a completion library: `shtab` writes no fish, and `argcomplete` runs `lean-beam` (a
Python start plus the registry import, about 0.3 s) on every Tab press. These scripts answer from the shell
itself; regenerate them after upgrading (`lean-beam completion SHELL`). Option values: choices are offered,
`--root` completes directories, a FILE argument completes `*.lean` files and directories, free values (numbers,
Lean text) nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Final, Literal

Values = Literal["none", "free", "choices", "dir", "lean"]
NAME: Final = "lean-beam"
_FUNC: Final = "_lean_beam"


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its spellings, help, and what its value is."""

    flags: tuple[str, ...]
    help: str
    values: Values = "none"
    choices: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Command:
    """A command (or the program itself): options, the file argument, subcommands."""

    name: str
    help: str
    options: tuple[Option, ...]
    argument: Values = "none"
    choices: tuple[str, ...] = ()
    commands: tuple[Command, ...] = ()


def _short(text: str | None) -> str:
    text = " ".join((text or "").replace("%%", "%").split())
    end = re.search(r"[.;](\s|$)", text)
    return (text[: end.start()] if end else text)[:80]


def _option(action: argparse.Action) -> Option | None:
    if action.help == argparse.SUPPRESS:
        return None
    flags = tuple(action.option_strings)
    if action.nargs == 0:
        return Option(flags, _short(action.help))
    if action.choices is not None:
        return Option(flags, _short(action.help), "choices", tuple(str(c) for c in action.choices))
    if action.metavar is not None and "{" in str(action.metavar):  # a comma list of choices: offer the choices
        return Option(flags, _short(action.help), "choices", tuple(re.findall(r"\w+", str(action.metavar))))
    return Option(flags, _short(action.help), "dir" if action.dest == "root" else "free")


def read(parser: argparse.ArgumentParser, name: str = NAME, help: str = "") -> Command:
    """The completion tree of a parser."""
    options: list[Option] = []
    commands: list[Command] = []
    argument: Values = "none"
    choices: tuple[str, ...] = ()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for sub_name, sub in action.choices.items():
                commands.append(read(sub, sub_name, _short(helps.get(sub_name))))
        elif action.option_strings:
            option = _option(action)
            if option is not None:
                options.append(option)
        elif action.choices is not None:
            argument, choices = "choices", tuple(str(c) for c in action.choices)
        else:
            argument = "lean"
    return Command(name, help, tuple(options), argument, choices, tuple(commands))


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell` (`bash`, `zsh` or `fish`).

    Raises:
        ValueError: Another shell.
    """
    tree = read(parser)
    writers = {"bash": bash, "zsh": zsh, "fish": fish}
    if shell not in writers:
        raise ValueError(f"no completion for {shell!r}")
    return writers[shell](tree)


def _value_flags(tree: Command) -> list[str]:
    """Every option that takes a separate value word, in any command (for skipping those words)."""
    found: dict[str, None] = {}
    stack = [tree]
    while stack:
        cmd = stack.pop()
        for opt in cmd.options:
            if opt.values != "none":
                found.update(dict.fromkeys(f for f in opt.flags if f != "--version"))
        stack.extend(cmd.commands)
    return sorted(found)


# ---- bash ---------------------------------------------------------------------------------------------
def _bash_words(words: list[str] | tuple[str, ...]) -> str:
    return " ".join(words).replace('"', "")


def _bash_options(cmd: Command, indent: str) -> list[str]:
    out = [f'{indent}case "$prev" in']
    for opt in cmd.options:
        if opt.values == "none":
            continue
        if opt.values == "choices":
            action = f'COMPREPLY=($(compgen -W "{_bash_words(opt.choices)}" -- "$cur"))'
        elif opt.values == "dir":
            action = 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
        else:
            action = ":"
        out.append(f"{indent}    {'|'.join(opt.flags)}) {action}; return ;;")
    out.append(f"{indent}esac")
    flags = _bash_words([f for opt in cmd.options for f in opt.flags])
    out.append(f'{indent}if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{flags}" -- "$cur")); return; fi')
    return out


def _bash_command(cmd: Command, depth: int, indent: str) -> list[str]:
    if not cmd.commands:
        out = _bash_options(cmd, indent)
        if cmd.argument == "lean":
            out.append(f"{indent}compopt -o filenames 2>/dev/null")
            out.append(f'{indent}COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X \'!*.lean\' -- "$cur"))')
        elif cmd.argument == "choices":
            out.append(f'{indent}COMPREPLY=($(compgen -W "{_bash_words(cmd.choices)}" -- "$cur"))')
        return out
    out = [f'{indent}case "${{cmds[{depth}]}}" in', f'{indent}    "")']
    out.extend(_bash_options(cmd, indent + "        "))
    names = _bash_words([c.name for c in cmd.commands])
    out.append(f'{indent}        COMPREPLY=($(compgen -W "{names}" -- "$cur"))')
    out.append(f"{indent}        ;;")
    for sub in cmd.commands:
        out.append(f"{indent}    {sub.name})")
        out.extend(_bash_command(sub, depth + 1, indent + "        "))
        out.append(f"{indent}        ;;")
    out.append(f"{indent}esac")
    return out


def bash(tree: Command) -> str:
    """A bash completion script (`complete -F`)."""
    skip = "|".join(_value_flags(tree))
    lines = [
        f"# bash completion for {NAME} (generated by `{NAME} completion bash`; regenerate after upgrading)",
        f"{_FUNC}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    local -a cmds=()",
        "    local i w skip=0",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        w="${COMP_WORDS[i]}"',
        "        if ((skip)); then skip=0; continue; fi",
        '        case "$w" in',
        f"            {skip}) skip=1 ;;",
        "            --version) ((${#cmds[@]})) && skip=1 ;;",
        "            -*|:|=) ;;",
        '            *) cmds+=("$w") ;;',
        "        esac",
        "    done",
        *_bash_command(tree, 0, "    "),
        "}",
        f"complete -F {_FUNC} {NAME}",
        "",
    ]
    return "\n".join(lines)


# ---- zsh ----------------------------------------------------------------------------------------------
def _zq(text: str) -> str:
    """Text for inside a single-quoted zsh word: no quotes, brackets or colons to confuse `_arguments`."""
    return re.sub(r"[\[\]:'\\`$]", "", text)


def _zsh_options(cmd: Command) -> list[str]:
    specs: list[str] = []
    for opt in cmd.options:
        if opt.values == "none":
            action = ""
        elif opt.values == "choices":
            action = f":value:({' '.join(opt.choices)})"
        elif opt.values == "dir":
            action = ":directory:_files -/"
        else:
            action = ":value: "
        equals = "=" if opt.values != "none" and opt.flags[0].startswith("--") else ""
        specs.extend(f"'{flag}{equals}[{_zq(opt.help)}]{action}'" for flag in opt.flags)
    return specs


def _zsh_function(cmd: Command, func: str, out: list[str]) -> None:
    specs = _zsh_options(cmd)
    if cmd.commands:
        for sub in cmd.commands:
            _zsh_function(sub, f"{func}_{sub.name.replace('-', '_')}", out)
        described = " ".join(f"'{sub.name}:{_zq(sub.help)}'" for sub in cmd.commands)
        out.append(f"{func}() {{")
        out.append('    local curcontext="$curcontext" state line')
        out.append("    _arguments -C \\")
        out.extend(f"        {spec} \\" for spec in specs)
        out.append("        '1: :->command' '*:: :->args'")
        out.append('    case "$state" in')
        out.append(f"        command) local -a commands; commands=({described}); _describe command commands ;;")
        out.append('        args) case "$line[1]" in')
        out.extend(f"            {sub.name}) {func}_{sub.name.replace('-', '_')} ;;" for sub in cmd.commands)
        out.append("        esac ;;")
        out.append("    esac")
        out.append("}")
        return
    if cmd.argument == "lean":
        specs.append("'1:Lean file:_files -g \"*.lean(-.)\"'")
    elif cmd.argument == "choices":
        specs.append(f"'1:value:({' '.join(cmd.choices)})'")
    out.append(f"{func}() {{")
    out.append("    _arguments \\")
    out.extend(f"        {spec} \\" for spec in specs)
    out.append("        && return 0")
    out.append("}")


def zsh(tree: Command) -> str:
    """A zsh completion function (`#compdef`; works from `fpath` or `source`)."""
    out = [f"#compdef {NAME}", f"# zsh completion for {NAME} (generated by `{NAME} completion zsh`)"]
    _zsh_function(tree, _FUNC, out)
    out.append('if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then')
    out.append(f'    {_FUNC} "$@"')
    out.append("else")
    out.append(f"    compdef {_FUNC} {NAME}")
    out.append("fi")
    return "\n".join(out) + "\n"


# ---- fish ---------------------------------------------------------------------------------------------
def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_command(cmd: Command, path: tuple[str, ...], out: list[str]) -> None:
    condition = f"__lean_beam_at {' '.join(path)}".rstrip()
    for opt in cmd.options:
        parts = [f"complete -c {NAME} -n {_fq(condition)}"]
        parts.extend(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}" for flag in opt.flags)
        if opt.values == "choices":
            parts.append(f"-x -a {_fq(' '.join(opt.choices))}")
        elif opt.values == "dir":
            parts.append("-x -a '(__fish_complete_directories)'")
        elif opt.values == "free":
            parts.append("-x")
        parts.append(f"-d {_fq(opt.help)}")
        out.append(" ".join(parts))
    for sub in cmd.commands:
        out.append(f"complete -c {NAME} -n {_fq(condition)} -a {sub.name} -d {_fq(sub.help)}")
        _fish_command(sub, (*path, sub.name), out)
    if not cmd.commands and cmd.argument == "lean":
        out.append(f"complete -c {NAME} -n {_fq(condition)} -a '(__lean_beam_files)'")
    elif not cmd.commands and cmd.argument == "choices":
        out.append(f"complete -c {NAME} -n {_fq(condition)} -a {_fq(' '.join(cmd.choices))}")


def fish(tree: Command) -> str:
    """A fish completion script."""
    out = [
        f"# fish completion for {NAME} (generated by `{NAME} completion fish`; regenerate after upgrading)",
        f"set -g __lean_beam_leaves {' '.join(_leaves(tree))}",
        "function __lean_beam_at --description 'the command words typed so far are $argv (then a file may follow)'",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l cmds",
        "    set -l skip 0",
        "    for w in $words",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $w",
        f"            case {' '.join(_value_flags(tree))}",
        "                set skip 1",
        "            case --version",
        "                test (count $cmds) -gt 0; and set skip 1",
        "            case '-*'",
        "            case '*'",
        "                set -a cmds $w",
        "        end",
        "    end",
        "    set -l depth (count $argv)",
        "    if test $depth -eq 0",
        "        test (count $cmds) -eq 0",
        "        return",
        "    end",
        "    test (count $cmds) -ge $depth; or return 1",
        '    test "$cmds[1..$depth]" = "$argv"; or return 1',
        "    test (count $cmds) -eq $depth; or contains -- $argv[-1] $__lean_beam_leaves",
        "end",
        "function __lean_beam_files --description 'directories and *.lean files starting with the current token'",
        "    for f in (commandline -ct)*",
        "        if test -d $f",
        "            echo $f/",
        "        else if string match -q -- '*.lean' $f",
        "            echo $f",
        "        end",
        "    end",
        "end",
        f"complete -c {NAME} -f",
    ]
    _fish_command(tree, (), out)
    return "\n".join(out) + "\n"


def _leaves(tree: Command) -> list[str]:
    """Names of commands that take no further command word (their FILE argument follows instead)."""
    out: list[str] = []
    stack = list(tree.commands)
    while stack:
        cmd = stack.pop()
        if cmd.commands:
            stack.extend(cmd.commands)
        else:
            out.append(cmd.name)
    return sorted(set(out))
