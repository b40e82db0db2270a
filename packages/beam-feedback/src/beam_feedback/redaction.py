"""Secret and home-directory redaction for everything beam-feedback returns or writes.

This module owns the secret-name rule, the secret sources (environment variables and command-line
flags) and the replacement of their values in text and JSON. It implements the mcpls redaction
rules in a self-contained way; it must not import other Beam packages, and it is not a secret
scanner: it only hides values it was told about (plus the home directory), matched verbatim or in
their JSON- or Python-repr-escaped spellings. URL or base64 re-encodings, or escapes another
encoder chooses, are not recognised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pydantic import JsonValue

__all__ = ["Redactor", "is_secret_name"]

_SECRET_MARKERS: Final = ("TOKEN", "KEY", "SECRET", "PASSW", "CRED", "AUTH")
# Whole segments that contain a marker but name nothing secret (GIT_AUTHOR_NAME, XAUTHORITY, ...).
_BENIGN_SEGMENTS: Final = frozenset(
    {"AUTHOR", "AUTHORS", "AUTHORITY", "XAUTHORITY", "KEYBOARD", "KEYMAP", "TOKENIZERS"}
)
# A socket path, not a credential, and present in almost every ssh-agent session.
_BENIGN_NAMES: Final = frozenset({"SSH_AUTH_SOCK"})
_SEPARATORS: Final = re.compile(r"[_.\-]+")
# camelCase and acronym boundaries: "HTTPAuthHeader" -> HTTP, Auth, Header; "passWord" -> pass, Word.
_CAMEL_SEGMENT: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.\-]")
_MAX_LABEL: Final = 64
MIN_SECRET_BYTES: Final = 8
"""Values shorter than this many UTF-8 bytes are never treated as secrets (too many false hits)."""
# A home directory is replaced only where it ends a path component, so /home/al does not eat
# the start of /home/alice.
_HOME_END: Final = r"(?![A-Za-z0-9_\-])"


def _segments(name: str) -> list[str]:
    segments: list[str] = []
    for part in _SEPARATORS.split(name):
        segments.extend(_CAMEL_SEGMENT.findall(part))
    return [segment.upper() for segment in segments]


def is_secret_name(name: str) -> bool:
    """Say whether a variable, flag or key name looks like it holds a secret.

    The name is split into segments on ``_``, ``-``, ``.`` and camelCase boundaries; benign whole
    segments (``AUTHOR``, ``AUTHORS``, ``AUTHORITY``, ``XAUTHORITY``, ``KEYBOARD``, ``KEYMAP``,
    ``TOKENIZERS``) are dropped, and the rest, upper-cased and joined, must contain ``TOKEN``,
    ``KEY``, ``SECRET``, ``PASSW``, ``CRED`` or ``AUTH``. The whole name ``SSH_AUTH_SOCK`` is
    never secret.

    Args:
        name: The name, with any leading dashes already removed.

    Returns:
        True if values under this name should be redacted.
    """
    if name.upper() in _BENIGN_NAMES:
        return False
    kept = "".join(segment for segment in _segments(name) if segment not in _BENIGN_SEGMENTS)
    return any(marker in kept for marker in _SECRET_MARKERS)


def _label(name: str) -> str:
    return _LABEL_UNSAFE.sub("_", name)[:_MAX_LABEL]


def _spellings(value: str) -> set[str]:
    """The verbatim value and the escaped forms our own encoders would produce for it."""
    return {
        value,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value, ensure_ascii=True)[1:-1],
        repr(value)[1:-1],
    }


def _flag_secrets(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``--name=value`` and ``--name value`` pairs whose name looks secret."""
    found: list[tuple[str, str]] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        name = arg.lstrip("-")
        if arg.startswith("-") and name:
            value: str | None = None
            if "=" in name:
                name, value = name.split("=", 1)
            elif index + 1 < len(argv) and not argv[index + 1].startswith("-"):
                value = argv[index + 1]
                index += 1
            if value is not None and is_secret_name(name):
                found.append((name, value))
        index += 1
    return found


class Redactor:
    """Replaces known secret values with ``[redacted:NAME]`` and the home directory with ``~``.

    A redactor is immutable and holds no global state; build one per report (or per process) and
    reuse it. ``Redactor()`` redacts nothing.

    Rules: values shorter than 8 UTF-8 bytes are ignored; a value known under several names keeps
    the first name; longer values win over values they contain; each value is matched verbatim,
    JSON-escaped and Python-repr-escaped. ``NAME`` is the source name reduced to
    ``[A-Za-z0-9_.-]`` (other characters become ``_``) and cut to 64 characters.

    Example:
        >>> r = Redactor([("GITHUB_TOKEN", "ghp_0123456789")], home="/home/ada")
        >>> r.redact("token ghp_0123456789 in /home/ada/proj")
        'token [redacted:GITHUB_TOKEN] in ~/proj'
    """

    __slots__ = ("_pattern", "_replacements")

    def __init__(self, secrets: Iterable[tuple[str, str]] = (), *, home: str | None = None) -> None:
        """Create a redactor.

        Args:
            secrets: ``(name, value)`` pairs to hide. Names are not checked with
                :func:`is_secret_name`: every pair given is a secret.
            home: The home directory to replace with ``~`` (ignored when it is empty or the
                filesystem root).
        """
        replacements: dict[str, str] = {}
        for name, value in secrets:
            if len(value.encode("utf-8")) < MIN_SECRET_BYTES:
                continue
            marker = f"[redacted:{_label(name)}]"
            for spelling in _spellings(value):
                replacements.setdefault(spelling, marker)
        home_spellings: set[str] = set()
        if home and home.rstrip("/\\"):
            home = home.rstrip("/\\")
            home_spellings = {spelling for spelling in _spellings(home) if spelling not in replacements}
            for spelling in home_spellings:
                replacements[spelling] = "~"
        # One pass over the text with the longest spelling first: a value containing another is
        # replaced whole, and text we already inserted is never rescanned.
        ordered = sorted(replacements, key=len, reverse=True)
        alternatives = [re.escape(spelling) + (_HOME_END if spelling in home_spellings else "") for spelling in ordered]
        self._replacements = replacements
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    @classmethod
    def from_environ(cls, env: Mapping[str, str], argv: Sequence[str] = ()) -> Redactor:
        """Build a redactor from an environment and a command line.

        Secret sources are environment variables whose name passes :func:`is_secret_name` and
        ``--name=value`` / ``--name value`` flags (the value is the next argument when it does not
        start with ``-``) whose name, without leading dashes, passes it. The home directory is
        ``HOME`` (or ``USERPROFILE``) from ``env``.

        Args:
            env: Environment variables, usually ``os.environ``.
            argv: Command-line arguments, usually ``sys.argv``.

        Returns:
            The redactor.
        """
        pairs = [(name, env[name]) for name in sorted(env) if is_secret_name(name)]
        pairs.extend(_flag_secrets(argv))
        return cls(pairs, home=env.get("HOME") or env.get("USERPROFILE"))

    @property
    def active(self) -> bool:
        """True if this redactor would change some text."""
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """Return ``text`` with every known secret spelling and the home directory replaced.

        Args:
            text: Any text.

        Returns:
            The redacted text.
        """
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self._replacements[match.group(0)], text)

    def redact_json(self, value: JsonValue) -> JsonValue:
        """Return a copy of a JSON value with every string value redacted; object keys are kept.

        Args:
            value: A JSON-compatible value (dicts, lists, strings, numbers, booleans, None).

        Returns:
            The redacted copy.
        """
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {key: self.redact_json(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.redact_json(item) for item in value]
        return value
