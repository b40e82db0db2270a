"""Secret and home-directory redaction: the one redactor every Beam package uses (the mcpls rules).

Owns the secret-name rule, the secret sources (environment variables, `--name=value` / `--name value` flags and
Lean's `-Dname=value` options) and the replacement of their values in text and JSON. It is not a secret
scanner: it hides only values it was told about (plus, when asked, the home directory), matched verbatim or in
their JSON- or Python-repr-escaped spellings; URL or base64 re-encodings are not recognised. Standard library
only: beam-feedback and the CLIs import it without the LSP stack.

Rules:

- A name is secret when, split into segments (`_`, `-`, `.`, camelCase boundaries, and digits, which form
  their own segments) with the benign whole segments AUTHOR, AUTHORS, AUTHORITY, XAUTHORITY, KEYBOARD,
  KEYMAP and TOKENIZERS dropped, the upper-cased rest contains TOKEN, KEY, SECRET, PASSW, CRED or AUTH. The
  whole name SSH_AUTH_SOCK is never secret. So `API_KEY2` is secret while `KEYBOARD2_LAYOUT` and
  `XAUTHORITY2` are not.
- Values shorter than 8 UTF-8 bytes are ignored. A value known under several names keeps the first name;
  a longer value wins over a value it contains; text already replaced is never rescanned.
- A value is replaced by `[redacted:NAME]`, `NAME` being the source name reduced to `[A-Za-z0-9_.-]` (other
  characters become `_`) and cut to 64 characters. A `-Dname=value` option is labelled by `name` (without
  the `D`).
- The home directory becomes `~`, only where it ends a path component (`/home/al` never eats the start of
  `/home/alice`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeVar

__all__ = ["MIN_SECRET_BYTES", "Redactor", "is_secret_name"]

J = TypeVar("J")
MIN_SECRET_BYTES: Final = 8
"""Values shorter than this many UTF-8 bytes are never treated as secrets (too many false hits)."""

_MARKERS: Final = ("TOKEN", "KEY", "SECRET", "PASSW", "CRED", "AUTH")
# Whole segments that contain a marker but name nothing secret (GIT_AUTHOR_NAME, XAUTHORITY, ...).
_BENIGN_SEGMENTS: Final = frozenset(
    {"AUTHOR", "AUTHORS", "AUTHORITY", "XAUTHORITY", "KEYBOARD", "KEYMAP", "TOKENIZERS"}
)
# A socket path, not a credential, and present in almost every ssh-agent session.
_BENIGN_NAMES: Final = frozenset({"SSH_AUTH_SOCK"})
_SEPARATORS: Final = re.compile(r"[_.\-]+")
# camelCase and acronym boundaries, digits on their own: "HTTPAuthHeader" -> HTTP, Auth, Header;
# "passWord" -> pass, Word; "KEYBOARD2" -> KEYBOARD, 2.
_SEGMENT: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.\-]")
_MAX_LABEL: Final = 64
_HOME_END: Final = r"(?![A-Za-z0-9_\-])"


def _segments(name: str) -> list[str]:
    return [segment.upper() for part in _SEPARATORS.split(name) for segment in _SEGMENT.findall(part)]


def is_secret_name(name: str) -> bool:
    """Say whether a variable, flag or option name looks like it holds a secret (see the module docstring).

    Args:
        name: The name, without leading dashes (and without the `D` of a Lean `-D` option).

    Returns:
        True if values under this name should be redacted.
    """
    if name.upper() in _BENIGN_NAMES:
        return False
    kept = "".join(segment for segment in _segments(name) if segment not in _BENIGN_SEGMENTS)
    return any(marker in kept for marker in _MARKERS)


def _label(name: str) -> str:
    return _LABEL_UNSAFE.sub("_", name)[:_MAX_LABEL] or "secret"


def _spellings(value: str) -> set[str]:
    """The verbatim value and the escaped forms our own encoders produce for it."""
    return {
        value,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value, ensure_ascii=True)[1:-1],
        repr(value)[1:-1],
    }


def _option_pair(option: str) -> tuple[str, str] | None:
    name, sep, value = option.partition("=")
    return (name, value) if sep and name else None


def _argv_secrets(argv: Sequence[str]) -> list[tuple[str, str]]:
    """Secret-named `--name=value`, `--name value`, `-Dname=value` and `-D name=value` pairs, in order."""
    found: list[tuple[str, str]] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        pair: tuple[str, str] | None = None
        if arg.startswith("-D"):
            # A Lean option: the name follows the D, and the value is part of the same word.
            if arg == "-D" and index < len(argv):
                pair = _option_pair(argv[index])
                index += 1
            else:
                pair = _option_pair(arg[2:])
        elif arg.startswith("-"):
            name = arg.lstrip("-")
            if "=" in name:
                pair = _option_pair(name)
            elif name and index < len(argv) and not argv[index].startswith("-"):
                pair = (name, argv[index])
                index += 1
        if pair is not None and is_secret_name(pair[0]):
            found.append(pair)
    return found


class Redactor:
    """Replaces known secret values with `[redacted:NAME]` and, optionally, the home directory with `~`.

    A redactor is immutable and holds no global state; build one per process (or per report) and share it.
    `Redactor()` redacts nothing and is falsy.

    Example:
        >>> r = Redactor({"GITHUB_TOKEN": "ghp_0123456789"}, home="/home/ada")
        >>> r.redact("token ghp_0123456789 in /home/ada/proj")
        'token [redacted:GITHUB_TOKEN] in ~/proj'
    """

    __slots__ = ("_pattern", "_replacements")

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = (), *, home: str | None = None) -> None:
        """Create a redactor.

        Args:
            secrets: Name -> value (a mapping or `(name, value)` pairs). Names are not checked with
                `is_secret_name`: every pair given is a secret; the first name of a value wins.
            home: The home directory to replace with `~` (ignored when empty or the filesystem root).
        """
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        replacements: dict[str, str] = {}
        for name, value in pairs:
            if len(value.encode("utf-8")) < MIN_SECRET_BYTES:
                continue
            marker = f"[redacted:{_label(name)}]"
            for spelling in _spellings(value):
                replacements.setdefault(spelling, marker)
        home_spellings: set[str] = set()
        home = (home or "").rstrip("/\\")
        if home:
            home_spellings = {spelling for spelling in _spellings(home) if spelling not in replacements}
            replacements.update(dict.fromkeys(home_spellings, "~"))
        # One pass over the text, longest spelling first: a value containing another is replaced whole, and
        # text already inserted is never rescanned.
        ordered = sorted(replacements, key=len, reverse=True)
        alternatives = [re.escape(s) + (_HOME_END if s in home_spellings else "") for s in ordered]
        self._replacements = replacements
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    @classmethod
    def from_sources(
        cls,
        environ: Mapping[str, str] | None = None,
        argv: Sequence[str] = (),
        extra: Iterable[tuple[str, str]] = (),
        *,
        home: bool = False,
    ) -> Redactor:
        """Collect secrets from an environment, a command line and explicit pairs.

        Sources, in this order (the first name of a value wins): environment variables whose name passes
        `is_secret_name` (sorted by name), then secret-named `--name=value` / `--name value` flags (the value is
        the next argument when it does not start with `-`) and Lean options `-Dname=value` / `-D name=value`
        (labelled `name`), then `extra` as given.

        Args:
            environ: Environment variables, usually the server's environment or `os.environ`.
            argv: A command line, e.g. the Lean server command or `sys.argv`.
            extra: More `(name, value)` secrets, used as they are.
            home: Also replace the home directory (`HOME`, else `USERPROFILE`, of `environ`) with `~`.

        Returns:
            The redactor.
        """
        env = environ or {}
        pairs = [(name, env[name]) for name in sorted(env) if is_secret_name(name)]
        pairs += _argv_secrets(argv)
        pairs += extra
        return cls(pairs, home=(env.get("HOME") or env.get("USERPROFILE")) if home else None)

    @property
    def active(self) -> bool:
        """True if this redactor would change some text."""
        return self._pattern is not None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """Return `text` with every known secret spelling (and the home directory, if set) replaced."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda match: self._replacements[match.group(0)], text)

    def redact_json(self, value: J) -> J:
        """Return a copy of a JSON value with every string value redacted; object keys are kept."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)  # type: ignore[return-value]  # a str is a J here
        if isinstance(value, list):
            return [self.redact_json(item) for item in value]  # type: ignore[return-value]
        if isinstance(value, dict):
            return {key: self.redact_json(item) for key, item in value.items()}  # type: ignore[return-value]
        return value
