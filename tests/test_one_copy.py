"""One copy of every rule, and code that says the rule itself: source texts the packages must not (re)write.

Each rule that Beam once wrote two to five times has one owner now; the tests that pin each owner's behaviour live
beside it (`tests/lsp/test_documents.py` for lines and columns, ...). Here the sources are searched for the
spellings a second copy would need, so a copy cannot come back unnoticed. And comments and docstrings say the
rule itself: no issue numbers, no section signs of documents outside the packages, no paths of a machine.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.test_layout import MODULES

SOURCES = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}

ONE_COPY = [
    # (what the rule is, a spelling only its owner needs, the owner)
    ("split a Lean command line into argv", r"shlex\.split\(", "beam_broker.config"),
    ("kill a child's process group", r"os\.killpg\(", "beam_lsp._process"),
    ("UTF-16 units per character", r"0x[fF]{4}\b", "beam_lsp.lines"),
    ("a line without the CR of CRLF", r"""removesuffix\(["']\\r["']\)""", "beam_lsp.lines"),
    ("the toolchain file", r"""["']lean-toolchain["']""", "beam_lsp.project"),
    ("Lake's files", r"""["']lakefile\.(lean|toml)["']""", "beam_lsp.project"),
    ("elan's directory of a toolchain", r"""["']---["']""", "beam_lsp.project"),
    ("the progress sentence of every tool", r"progressToken for progress; a slow call", "beam_broker.operations"),
    (
        "the broker codes MCP answers as JSON-RPC errors",
        r"""["'](runtimeSetup|serverStarting)["']""",
        "beam_broker.errors",
    ),
    ("MCP log levels", r"""["']emergency["']""", "beam_mcp._protocol"),
    ("a stderr tail of a child", r"class \w*(Stderr|Tail)\w*", "beam_lsp._process"),
    ("a JSON parse error on the MCP stream", r"parse error: \{", "beam_mcp._jsonrpc"),
    ("feedback field descriptions", r"One-line title of the problem", "beam_feedback.models"),
    ("loading on first use (lazy package exports, handler stand-ins)", r"import_module\(", "beam_lsp.lazy"),
    # Every answer, event, error and log line (lean-beam-mcp's formatters too) maps a mirror's name with this rule.
    ("a probe mirror's name in text", r"_beamProbe\\d", "beam_broker._outbound"),
    # `--help | head -1` exits 141 quietly: argparse must let the BrokenPipeError through, and stdout then goes nowhere.
    ("argparse's printing lets a broken pipe through", r"def _print_message\(", "beam_lsp.command_line"),
    ("stdout pointed at /dev/null once its reader went away", r"os\.dup2\(", "beam_lsp.command_line"),
    ("the exit status of a broken pipe", r"=\s*141\b", "beam_lsp.command_line"),
]

KNOWN_COPIES: dict[tuple[str, str], str] = {}
"""Second copies a rule's owner cannot serve yet, each with why: a debt, not a precedent (the list may only shrink,
and an entry whose copy is gone fails the test). Empty: the broken-pipe rule, the last one kept twice, moved to
beam_lsp, the one package all three CLIs depend on."""


@pytest.mark.parametrize(("rule", "spelling", "owner"), ONE_COPY, ids=[rule for rule, _, _ in ONE_COPY])
def test_each_rule_is_written_once_by_its_owner(rule: str, spelling: str, owner: str) -> None:
    pattern = re.compile(spelling, re.MULTILINE)
    writers = sorted(name for name, text in SOURCES.items() if pattern.search(text))
    assert writers == sorted([owner, *(copy for (known, copy) in KNOWN_COPIES if known == rule)])


def test_every_known_copy_names_a_rule() -> None:
    assert {rule for rule, _ in KNOWN_COPIES} <= {rule for rule, _, _ in ONE_COPY}


WORDS = [
    r"\bissues? ?#?\d+",  # say the rule, not the ticket that asked for it
    r"§",
    r"\bDESIGN\b",
    r"\b(spec|seeds)/",
    r"\bthe seed\b|\bseed's\b",
    r"/work/|/root/|/tmp/[\w-]+/|\.cache/beam-tests",  # paths of one machine
]


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """The comment and docstring lines of a module (strings that are a statement of their own count as docs)."""
    text = path.read_text(encoding="utf-8")
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.extend((node.lineno + i, line) for i, line in enumerate(node.value.value.splitlines()))
    return found


def test_comments_and_docstrings_say_the_rule_not_where_it_was_asked_for() -> None:
    pattern = re.compile("|".join(WORDS))
    hits = [
        f"{name}:{line}: {text.strip()}"
        for name, path in MODULES.items()
        for line, text in comments_and_docstrings(path)
        if pattern.search(text)
    ]
    assert hits == []


def test_the_word_guard_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Fixed for issue 12 (DESIGN §4)."""\n\nx = 1  # see /work/shared/spec/mcp.md\n', encoding="utf-8"
    )
    pattern = re.compile("|".join(WORDS))
    assert [line for line, text in comments_and_docstrings(sample) if pattern.search(text)] == [3, 1]
