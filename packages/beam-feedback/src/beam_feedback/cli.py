"""The ``beam-feedback`` command: build a feedback report from flags, an input file, or the user.

This module owns argument parsing, merging flags over an input file, asking a person for what is
still missing (in a terminal: ``$VISUAL``/``$EDITOR`` on a template, as ``git commit`` does, or a
prompt per field when no editor is set; never with ``--no-input`` or without a terminal), and turning
errors into exit codes and stderr lines. It must stay thin: every decision about the report itself is made by
:func:`beam_feedback.build_report`, the input is read by :func:`beam_feedback.read_input`, and the
default workspace is beam-lsp's project-root rule (``beam_lsp.project``).

Exit codes: 0 success; 2 usage error or invalid input (bad flags, unreadable or invalid input
file, invalid report fields, a workspace root that is not a directory); 1 any other failure
(the bundle could not be written, output could not be printed); 130 interrupted (Ctrl-C), as
``lean-beam``; 141 the reader of stdout went away (``beam-feedback --help | head -1``), as for a
process killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from beam_feedback.__about__ import __version__
from beam_feedback.errors import FeedbackError, InvalidReportError
from beam_feedback.report import build_report, read_input
from beam_lsp.command_line import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE  # the exit codes this module lists
from beam_lsp.command_line import PipeParser, say, stdout_gone
from beam_lsp.project import find_project_root

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK: Final = 0
"""The report was built (and the bundle written, if asked for)."""
EXIT_FAILURE: Final = 1
"""Something other than the input failed, e.g. the bundle output directory is not writable."""
EXIT_USAGE: Final = 2
"""Bad flags or bad input: nothing was collected or written."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (at a prompt, in the editor, while collecting): nothing was written, as ``lean-beam``'s 130."""

_PROG: Final = "beam-feedback"
_TEXT_FIELDS: Final = ("title", "summary", "reproduction", "expected", "actual", "impact", "workaround")
_REQUIRED: Final = _TEXT_FIELDS[:5]
_HINTS: Final = {
    "title": "one line",
    "summary": "what went wrong, in a few sentences",
    "reproduction": "the steps, commands and files that show it",
    "expected": "what you expected",
    "actual": "what happened instead",
    "impact": "optional: what it keeps you from doing",
    "workaround": "optional: how you got around it",
}
_CONFIDENTIAL_DROPS: Final = ("evidence", "request", "response", "client_request_id")
"""What a confidential report leaves out (see ``build_report``): asking for both is refused here."""
# The same cap the library puts on path evidence: a report is for reading, not for whole logs.
_MAX_EVIDENCE_BYTES: Final = 1024 * 1024

_EPILOG: Final = """\
asking:
  In a terminal, the required fields that no flag or file gives are asked for: $VISUAL or $EDITOR
  opens on a template (as git commit does; lines starting with '# ' are dropped, an empty required
  section cancels), or, without an editor, one prompt per field. --no-input never asks (scripts).

input file (--input FILE, JSON or TOML; '-' reads standard input):
  required strings: title, summary, reproduction, expected, actual
  optional: kind (bug|ux|perf|docs|question), severity (low|medium|high|critical),
            impact, workaround, tags [str], client_request_id, request {..}, response {..},
            evidence [{name, content (any JSON) | path (inside the workspace)}],
            bundle (none|dir|zip), redact (true), confidential (false),
            include_collected (true here), workspace {root}
  Unknown fields are rejected. Flags override the file's fields; --tag and --evidence add to them.

output:
  Without a bundle, prints the Markdown report (review it before posting anywhere).
  With --bundle dir|zip (or --out), writes the bundle (a folder, or a zip alone) and prints its path.
  --json prints the whole result as JSON instead. Beam never uploads anything.

exit codes:
  0 ok, 2 usage error or invalid input, 1 other failure (e.g. unwritable output directory),
  130 interrupted (Ctrl-C), 141 the reader of stdout went away (| head)

example:
  beam-feedback --title "hover hangs" --summary "..." --reproduction "..." \\
      --expected "an answer" --actual "no answer after 60 s" --kind bug --bundle zip
"""


class _UsageError(Exception):
    """A problem with the flags themselves, reported like an argparse error."""


def _parser() -> argparse.ArgumentParser:
    parser = PipeParser(
        prog=_PROG,
        description=(
            "Build a Beam feedback report: your narrative plus local debug context (versions, "
            "toolchain, lakefile, manifest packages, git state), redacted. Nothing is uploaded."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--input", metavar="FILE", help="JSON or TOML file with report fields ('-' = stdin)")
    narrative = parser.add_argument_group("report fields")
    for field in _TEXT_FIELDS:
        narrative.add_argument(f"--{field}", metavar="TEXT")
    narrative.add_argument("--kind", choices=("bug", "ux", "perf", "docs", "question"))
    narrative.add_argument("--severity", choices=("low", "medium", "high", "critical"))
    narrative.add_argument("--tag", action="append", default=[], metavar="TAG", help="repeatable")
    narrative.add_argument("--client-request-id", metavar="ID")
    narrative.add_argument(
        "--evidence",
        action="append",
        default=[],
        metavar="FILE",
        help="attach a text file as evidence named after it (repeatable)",
    )
    mode = parser.add_argument_group("mode and output")
    mode.add_argument("--workspace", metavar="ROOT", help="Lean project root (default: found from the cwd)")
    mode.add_argument("--confidential", action="store_true", default=None, help="collect no project context")
    mode.add_argument("--no-redact", action="store_true", help="do not hide secrets and the home directory")
    mode.add_argument("--bundle", choices=("none", "dir", "zip"), help="write an evidence bundle")
    mode.add_argument("--out", metavar="DIR", help="bundle parent directory (default: ROOT/.beam/feedback)")
    mode.add_argument(
        "--collected",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="include the collected context in the report (default: yes)",
    )
    mode.add_argument("--json", action="store_true", help="print the full result as JSON")
    mode.add_argument(
        "--no-input", action="store_true", help="never ask (no editor, no prompts): missing fields are an error"
    )
    return parser


def _load_input(source: str | None, stdin: TextIO) -> dict[str, object]:
    if source is None:
        return {}
    return read_input(stdin if source == "-" else source)


def _evidence_entry(path_text: str, stderr: TextIO) -> dict[str, object]:
    path = Path(path_text)
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise InvalidReportError(f"cannot read evidence file {path_text}: {exc.strerror or exc}") from exc
    if len(data) > _MAX_EVIDENCE_BYTES:
        say(stderr, f"{_PROG}: note: evidence {path.name} was cut to its first {_MAX_EVIDENCE_BYTES} bytes\n")
    text = data[:_MAX_EVIDENCE_BYTES].decode("utf-8", errors="replace")
    # NUL can cross no wire, so the model refuses it; a log cut short by a crash is often padded with it.
    return {"name": path.name, "content": text.replace("\x00", "\ufffd")}


def _merge(args: argparse.Namespace, data: dict[str, object], cwd: Path, stderr: TextIO) -> dict[str, object]:
    """Flags over file fields; the CLI defaults that differ from the library's."""
    for field in _TEXT_FIELDS:
        value = getattr(args, field)
        if value is not None:
            data[field] = value
    for field in ("kind", "severity", "client_request_id", "bundle"):
        value = getattr(args, field)
        if value is not None:
            data[field] = value
    if args.tag:
        tags = data.get("tags", [])
        data["tags"] = [*tags, *args.tag] if isinstance(tags, list) else tags
    if args.evidence:
        evidence = data.get("evidence", [])
        extra = [_evidence_entry(path, stderr) for path in args.evidence]
        data["evidence"] = [*evidence, *extra] if isinstance(evidence, list) else evidence
    if args.confidential:
        data["confidential"] = True
    if data.get("confidential") is True:
        kept = [name for name in _CONFIDENTIAL_DROPS if data.get(name) not in (None, [], {})]
        if kept:
            flags = ", ".join(f"--{name.replace('_', '-')}" if name in ("evidence", "client_request_id") else name
                              for name in kept)  # fmt: skip
            raise _UsageError(
                f"a confidential report carries no {flags} (nothing of the project leaves with it): "
                "drop them, or drop --confidential"
            )
    if args.no_redact:
        if data.get("confidential") is True:
            raise _UsageError("'confidential' cannot be combined with --no-redact")
        data["redact"] = False
    if args.collected is not None:
        data["include_collected"] = args.collected
    else:
        data.setdefault("include_collected", True)
    if args.out is not None:
        if data.get("bundle") == "none":
            raise _UsageError("--out needs --bundle dir or zip")
        data.setdefault("bundle", "dir")
    given = data.get("workspace")
    if args.workspace is not None:
        data["workspace"] = {"root": str(cwd / Path(args.workspace).expanduser())}
    elif isinstance(given, dict):
        # A relative root in an input file means relative to where the command runs; `~` is the home, as in
        # build_report (joined to the cwd first, `~/proj` would be a directory named `~` there). build_report
        # resolves it, and says so when it cannot (a symlink loop).
        workspace = dict(given)
        if isinstance(workspace.get("root"), str) and workspace["root"]:
            workspace["root"] = str(cwd / Path(workspace["root"]).expanduser())
        data["workspace"] = workspace
    elif given is None:
        data["workspace"] = {"root": str(find_project_root(cwd) or cwd)}
    return data


def _missing(data: dict[str, object]) -> list[str]:
    return [name for name in _REQUIRED if not (isinstance(data.get(name), str) and str(data[name]).strip())]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


TEMPLATE_HEADER: Final = """\
# Describe what went wrong under each heading, then save and close the editor.
# Lines starting with '# ' are dropped. Leave a required section empty to cancel.
# Nothing is uploaded: the report is printed (or bundled) for you to review first.
"""


def template(data: dict[str, object]) -> str:
    """The editor's text: one `## field` section per text field, holding what is known already."""
    parts = [TEMPLATE_HEADER]
    for name in _TEXT_FIELDS:
        required = "required" if name in _REQUIRED else "optional"
        hint = _HINTS[name].removeprefix("optional: ")
        value = data.get(name)
        parts.append(f"\n## {name} ({required}: {hint})\n{value if isinstance(value, str) else ''}\n")
    return "".join(parts)


_SECTION: Final = re.compile(r"^## ([a-z]+)\b")


def parse_template(text: str) -> dict[str, str]:
    """The sections of an edited template (`## field` headings; `# ` comment lines dropped), stripped."""
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("# ") or line == "#":
            continue
        heading = _SECTION.match(line)
        if heading is not None and heading[1] in _TEXT_FIELDS:
            current = fields.setdefault(heading[1], [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in fields.items() if "\n".join(lines).strip()}


def _edit(data: dict[str, object], editor: str, stderr: TextIO) -> dict[str, object]:
    """Open the editor on the template (through the shell, as git does, so `EDITOR="code -w"` works)."""
    folder = tempfile.mkdtemp(prefix="beam-feedback-")
    try:
        path = Path(folder) / "BEAM_FEEDBACK.md"
        path.write_text(template(data), encoding="utf-8")
        stderr.write(f"{_PROG}: waiting for your editor to close the file...\n")
        stderr.flush()
        status = subprocess.run(["/bin/sh", "-c", f'{editor} "$@"', editor, str(path)], check=False).returncode
        if status != 0:
            raise _UsageError(f"the editor ({editor}) exited with status {status}: no report was made")
        # An editor saving in another encoding must not cost the person what they typed (nor end in a traceback).
        return {**data, **parse_template(path.read_text(encoding="utf-8", errors="replace"))}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _prompt(data: dict[str, object], missing: list[str], stdin: TextIO, stderr: TextIO) -> dict[str, object]:
    """Ask for each missing field on its own line (no editor is set)."""
    stderr.write(f"{_PROG}: no $VISUAL or $EDITOR: one line per field (Ctrl-D cancels)\n")
    out = dict(data)
    for name in missing:
        while True:
            stderr.write(f"{name} ({_HINTS[name]}): ")
            stderr.flush()
            line = stdin.readline()
            if not line:
                stderr.write("\n")
                raise _UsageError("cancelled: no report was made")
            if line.strip():
                out[name] = line.strip()
                break
    return out


def _ask(data: dict[str, object], args: argparse.Namespace, stdin: TextIO, stderr: TextIO) -> dict[str, object]:
    """Fill the missing required fields from the person at the terminal, or say which flags are missing.

    Raises:
        InvalidReportError: Fields are missing and nobody can be asked (no terminal, or `--no-input`).
        _UsageError: The person cancelled (or the editor failed).
    """
    missing = _missing(data)
    if not missing:
        return data
    if args.no_input or not (_is_terminal(stdin) and _is_terminal(stderr)):
        flags = ", ".join(f"--{name}" for name in missing)
        raise InvalidReportError(
            f"missing {flags} (or --input FILE with those fields; in a terminal, run {_PROG} without them to "
            "write them in your editor)"
        )
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    filled = _edit(data, editor, stderr) if editor else _prompt(data, missing, stdin, stderr)
    still = _missing(filled)
    if still:
        raise _UsageError(f"no {', '.join(still)} given: no report was made")
    return filled


def _error(stderr: TextIO, message: str) -> None:
    say(stderr, f"{_PROG}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``beam-feedback``; see ``beam-feedback --help``.

    Args:
        argv: Arguments without the program name; default ``sys.argv[1:]``.

    Returns:
        The exit code: ``EXIT_OK`` (0), ``EXIT_USAGE`` (2), ``EXIT_FAILURE`` (1),
        ``EXIT_INTERRUPTED`` (130) or ``EXIT_BROKEN_PIPE`` (141).
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except BrokenPipeError:  # `--help | head -1`
        return stdout_gone()
    stdout, stderr = sys.stdout, sys.stderr
    try:
        data = _merge(args, _load_input(args.input, sys.stdin), Path.cwd(), stderr)
        data = _ask(data, args, sys.stdin, stderr)
        result = build_report(data, out_dir=args.out)
    except _UsageError as exc:
        say(stderr, parser.format_usage())
        _error(stderr, str(exc))
        return EXIT_USAGE
    except InvalidReportError as exc:
        _error(stderr, exc.message)
        return EXIT_USAGE
    except FeedbackError as exc:
        _error(stderr, exc.message)
        return EXIT_FAILURE
    except KeyboardInterrupt:  # a person at a prompt or in the editor: one line, not a traceback
        say(stderr, f"\n{_PROG}: interrupted: no report was made\n")
        return EXIT_INTERRUPTED
    for warning in result.collection_warnings:
        say(stderr, f"{_PROG}: collection warning: {warning}\n")
    try:
        if args.json:
            stdout.write(json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
        elif result.bundle_dir is not None or result.zip_path is not None:
            stdout.write(f"{result.bundle_dir or result.zip_path}\n")
        else:
            stdout.write(result.markdown)
        stdout.flush()
    except BrokenPipeError:  # `beam-feedback ... | head`: the reader has what it wanted
        return stdout_gone()
    except (OSError, UnicodeEncodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _error(stderr, f"cannot write the report: {reason}")
        return EXIT_FAILURE
    return EXIT_OK
