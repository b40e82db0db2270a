"""The endpoint's bearer token: where it comes from, how a request's `Authorization` header is checked.

This module owns the one shared secret of `lean-beam-mcp --http` (`--http-token-file PATH`, or the environment
variable `LEAN_BEAM_MCP_TOKEN`): what a valid token is (RFC 6750 `b64token` characters, so it can travel in a
header as it is), reading it from a file, and comparing a request's credentials with it in constant time
(`hmac.compare_digest`). A `BearerToken` never shows its value: not in `repr`, `str`, errors or logs. It imports
only the standard library (so `HttpConfig` can hold one without the `http` extra), and must not know HTTP
beyond the header's value nor decide the answer to a refused request (`rules.py` does).
"""

from __future__ import annotations

import hmac
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

TOKEN_ENV: Final = "LEAN_BEAM_MCP_TOKEN"
"""The environment variable that holds the token when no `--http-token-file` is given."""
MAX_TOKEN: Final = 4096
"""Longest token accepted (characters); a token file is not read past a few times this."""
_B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750 `b64token`: what a bearer credential may be written as in an `Authorization` header."""
_SCHEME: Final = re.compile(r"(?i:bearer) +")


class TokenError(ValueError):
    """A token (or token file) that cannot be used; the message never contains the token."""


class BearerToken:
    """The endpoint's shared secret. Its value is never shown (`repr` and `str` say `<redacted>`).

    Raises:
        TokenError: The value is empty, too long, or holds characters a bearer credential cannot carry.
    """

    __slots__ = ("_secret",)

    def __init__(self, value: str) -> None:
        if not value:
            raise TokenError("the bearer token is empty")
        if len(value) > MAX_TOKEN:
            raise TokenError(f"the bearer token is longer than {MAX_TOKEN} characters")
        if not _B64TOKEN.fullmatch(value):
            raise TokenError(
                "the bearer token may hold only letters, digits and - . _ ~ + / (then = padding), so that it can be "
                "sent in an Authorization header as it is"
            )
        self._secret = value.encode("ascii")

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BearerToken) and hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(BearerToken)

    def admits(self, authorization: Sequence[str]) -> bool:
        """Whether a request's `Authorization` header values carry this token (`Bearer <token>`, one header).

        The scheme is case-insensitive; the credentials are compared in constant time.
        """
        if len(authorization) != 1:
            return False
        scheme = _SCHEME.match(authorization[0])
        if scheme is None:
            return False
        offered = authorization[0][scheme.end() :].strip(" ")
        return hmac.compare_digest(offered.encode("latin-1", "replace"), self._secret)

    @classmethod
    def from_file(cls, path: str | Path) -> BearerToken:
        """The token in a file: its text, surrounding whitespace (a final newline) removed.

        Raises:
            TokenError: The file cannot be read, is not UTF-8, or does not hold a valid token.
        """
        try:
            with open(path, "rb") as f:
                data = f.read(4 * MAX_TOKEN)
        except OSError as exc:
            raise TokenError(f"cannot read the token file {str(path)!r}: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise TokenError(f"the token file {str(path)!r} is not UTF-8 text") from None
        try:
            return cls(text)
        except TokenError as exc:
            raise TokenError(f"the token file {str(path)!r}: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> BearerToken | None:
        """The token in `LEAN_BEAM_MCP_TOKEN` (surrounding whitespace removed); None when unset or empty.

        Raises:
            TokenError: The variable holds an invalid token.
        """
        value = environ.get(TOKEN_ENV, "").strip()
        if not value:
            return None
        try:
            return cls(value)
        except TokenError as exc:
            raise TokenError(f"{TOKEN_ENV}: {exc}") from None


def readable_by_others(path: str | Path) -> bool:
    """Whether a token file's permissions let its group or other users read it (False when it cannot be seen)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))
