"""Secret redaction for text that comes from Lean or the environment (the mcpls rules).

Secrets are the values (at least 8 bytes) of environment variables and `--name=value` / `--name value`
command-line flags whose *name* looks secret: after splitting it into segments (`_`, `-`, `.` and camelCase
boundaries) and dropping benign segments (AUTHOR, AUTHORS, AUTHORITY, XAUTHORITY, KEYBOARD, KEYMAP,
TOKENIZERS) and the name SSH_AUTH_SOCK, the upper-cased remainder contains TOKEN, KEY, SECRET, PASSW, CRED or
AUTH. Each value is matched exactly and in its JSON-escaped and debug-escaped (Python repr) spellings, longest
first, and replaced by `[redacted:NAME]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MIN_SECRET_BYTES = 8
_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSW", "CRED", "AUTH")
_BENIGN_SEGMENTS = frozenset({"AUTHOR", "AUTHORS", "AUTHORITY", "XAUTHORITY", "KEYBOARD", "KEYMAP", "TOKENIZERS"})
_BENIGN_NAMES = frozenset({"SSH_AUTH_SOCK"})
_SEGMENT_SPLIT = re.compile(r"[_\-.]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name looks like it holds a secret."""
    if name.upper() in _BENIGN_NAMES:
        return False
    segments = [s.upper() for s in _SEGMENT_SPLIT.split(name) if s]
    rest = "".join(s for s in segments if s not in _BENIGN_SEGMENTS)
    return any(marker in rest for marker in _MARKERS)


def _label(name: str) -> str:
    return _LABEL_BAD.sub("_", name)[:64] or "secret"


def _spellings(value: str) -> list[str]:
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1]}
    return [f for f in forms if len(f.encode("utf-8")) >= MIN_SECRET_BYTES]


class Redactor:
    """Replaces known secret values in text and JSON values.

    Build one with `Redactor.from_sources` and share it; it is immutable after construction.
    """

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        """Create a redactor for `secrets`, a mapping of label -> secret value."""
        pairs: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            if len(value.encode("utf-8")) < MIN_SECRET_BYTES:
                continue
            for spelling in _spellings(value):
                pairs.setdefault(spelling, f"[redacted:{_label(name)}]")
        self._pairs = sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s, _ in self._pairs)) if self._pairs else None
        self._lookup = dict(self._pairs)

    @classmethod
    def from_sources(
        cls,
        environ: Mapping[str, str] | None = None,
        argv: Sequence[str] = (),
        extra: Iterable[tuple[str, str]] = (),
    ) -> Redactor:
        """Collect secrets from environment variables, command-line flags and explicit (name, value) pairs."""
        secrets = {name: value for name, value in (environ or {}).items() if is_secret_name(name)}
        args = list(argv)
        for i, arg in enumerate(args):
            if not arg.startswith("-"):
                continue
            flag = arg.lstrip("-")
            if "=" in flag:
                name, value = flag.split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                name, value = flag, args[i + 1]
            else:
                continue
            # Lean options come as -Dname=value: the option name follows the D.
            if arg.startswith("-D") and not arg.startswith("--"):
                name = name[1:]
            if is_secret_name(name):
                secrets[name] = value
        secrets.update(extra)
        return cls(secrets)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """Return `text` with every known secret spelling replaced by its marker."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self._lookup[m.group(0)], text)

    def redact_json(self, value: Any) -> Any:
        """Redact every string value inside a JSON value (object keys are left alone)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        if isinstance(value, dict):
            return {k: self.redact_json(v) for k, v in value.items()}
        return value
