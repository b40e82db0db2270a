"""lean-lsp-mcp's four web-search tools: the same requests to a configurable base URL, the same rate limits.

`lean_leansearch`, `lean_loogle`, `lean_leanfinder` and `lean_hammer_premise` call public services; Beam sends
each the request lean-lsp-mcp 0.32.0 sends (method, path, JSON body or query string, headers) and reads the answer
the same way. Base URLs come from the same environment variables (`LOOGLE_URL`, `LOOGLE_HEADERS`,
`LEAN_FINDER_URL`, `LEAN_HAMMER_URL`, plus `LEANSEARCH_URL`, which lean-lsp-mcp does not have). Client-side rate
limits are lean-lsp-mcp's (per server process; Loogle's and the hammer's are lifted for a self-hosted URL). An
unreachable service or an answer that is no JSON is a tool error naming the host. Requests run in a worker
thread (stdlib `urllib`), never on the event loop. Any answer that is no HTTP, no JSON or JSON of another shape is a
tool error too, and credentials in a URL (`https://user:token@host`) are left out of every message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio

from ._errors import CompatError

USER_AGENT: Final = "lean-lsp-mcp/0.1"
TIMEOUT: Final = 10.0
LEANSEARCH_URL_ENV: Final = "LEANSEARCH_URL"
LOOGLE_URL_ENV: Final = "LOOGLE_URL"
LOOGLE_HEADERS_ENV: Final = "LOOGLE_HEADERS"
LEANFINDER_URL_ENV: Final = "LEAN_FINDER_URL"
HAMMER_URL_ENV: Final = "LEAN_HAMMER_URL"
DEFAULT_URLS: Final = {
    LEANSEARCH_URL_ENV: "https://leansearch.net",
    LOOGLE_URL_ENV: "https://loogle.lean-lang.org",
    LEANFINDER_URL_ENV: "https://lean-lsp-proxy.leanfinder.workers.dev",
    HAMMER_URL_ENV: "http://leanpremise.net",
}
RATE_LIMITS: Final = {"leansearch": (90, 30), "loogle": (3, 30), "leanfinder": (10, 30), "hammer_premise": (6, 30)}
"""Requests per window (seconds) of each service, as lean-lsp-mcp limits them."""


def base_url(env: Mapping[str, str], name: str) -> str:
    """The base URL of a service: its environment variable, else the public service."""
    return (env.get(name) or "").strip() or DEFAULT_URLS[name]


def custom(env: Mapping[str, str], name: str) -> bool:
    """Whether a self-hosted URL is configured (not the public service)."""
    configured = (env.get(name) or "").strip()
    return bool(configured) and configured.rstrip("/") != DEFAULT_URLS[name].rstrip("/")


class RateLimits:
    """Requests made to each service in its current window (one per server: no state is shared between servers)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._times: dict[str, list[float]] = {name: [] for name in RATE_LIMITS}

    def take(self, service: str, message: str) -> None:
        """Count one request, or refuse it when the window is full.

        Raises:
            CompatError: The service's limit is reached (the message says so).
        """
        limit, window = RATE_LIMITS[service]
        now = self._clock()
        times = [t for t in self._times[service] if t > now - window]
        if len(times) >= limit:
            self._times[service] = times
            raise CompatError(message.format(limit=limit, window=window))
        times.append(now)
        self._times[service] = times


TOOL_LIMIT: Final = "Tool limit exceeded: {limit} requests per {window} s. Try again later."
LOOGLE_LIMIT: Final = "Rate limit exceeded: {limit} requests per {window}s."


def _fetch(request: urllib.request.Request) -> Any:
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.loads(response.read())


def redact(text: str, url: str) -> str:
    """`text` without the credentials a URL's user-info part holds (`https://user:token@host`)."""
    parts = urllib.parse.urlsplit(url)
    for secret in (parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return text


async def fetch_json(request: urllib.request.Request) -> Any:
    """Send a request in a worker thread and decode its JSON answer.

    Raises:
        CompatError: The service is unreachable, answered an HTTP error, no HTTP, or no JSON (the message names the
            host, credentials in the URL left out).
    """
    try:
        # A cancelled call leaves the thread behind (as lean-lsp-mcp's asyncio.to_thread does) instead of waiting
        # as long as the service holds the request; the socket timeout still ends the thread.
        return await anyio.to_thread.run_sync(_fetch, request, abandon_on_cancel=True)
    # http.client's HTTPException (a reply that is no HTTP, a body cut short) is neither an OSError nor a
    # ValueError, and any other exception would leave the surface as a JSON-RPC error, not a tool error.
    except (OSError, ValueError, http.client.HTTPException) as exc:
        url = request.full_url
        raise CompatError(redact(f"Request to {request.host} failed: {exc}", url)) from exc


def unexpected(service: str, exc: Exception) -> CompatError:
    """The tool error of an answer whose JSON has another shape than the service's.

    lean-lsp-mcp's SDK reports any exception of a tool as a tool error; Beam's surface only a `CompatError`.
    """
    return CompatError(f"{service} sent an unexpected answer: {type(exc).__name__}: {exc}")


def _post(url: str, body: Any, headers: Mapping[str, str] | None = None) -> urllib.request.Request:
    head = {"User-Agent": USER_AGENT, "Content-Type": "application/json", **(headers or {})}
    # Byte for byte lean-lsp-mcp's body: orjson writes compact UTF-8 JSON (no spaces, no `\u` escapes).
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return urllib.request.Request(url, data=data, headers=head, method="POST")


async def leansearch(env: Mapping[str, str], query: str, num_results: int) -> dict[str, Any]:
    """`lean_leansearch`: POST `<base>/search`."""
    url = base_url(env, LEANSEARCH_URL_ENV).rstrip("/") + "/search"
    results = await fetch_json(_post(url, {"num_results": str(num_results), "query": [query]}))
    if not isinstance(results, list) or not results or not results[0]:
        return {"items": []}
    items = []
    try:
        for entry in results[0][:num_results]:
            found = entry["result"]
            items.append(
                {
                    "name": _dotted(found["name"]),
                    "module_name": _dotted(found["module_name"]),
                    "kind": found.get("kind"),
                    "type": found.get("type"),
                }
            )
    except (KeyError, TypeError, AttributeError) as exc:
        raise unexpected("LeanSearch", exc) from exc
    return {"items": items}


def _dotted(parts: Any) -> str:
    """A name LeanSearch sends as its components (a list of strings)."""
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise TypeError(f"a name is {type(parts).__name__}, not a list of strings")
    return ".".join(parts)


async def loogle(env: Mapping[str, str], query: str, num_results: int) -> dict[str, Any]:
    """`lean_loogle`: GET `<base>/json?q=<query>` (extra headers from `LOOGLE_HEADERS`, a JSON object)."""
    headers = {"User-Agent": USER_AGENT}
    extra = env.get(LOOGLE_HEADERS_ENV)
    if extra:
        try:
            headers.update({str(k): str(v) for k, v in json.loads(extra).items()})
        except (ValueError, AttributeError) as exc:
            raise CompatError(f"loogle error:\n{LOOGLE_HEADERS_ENV} is not a JSON object: {exc}") from exc
    url = f"{base_url(env, LOOGLE_URL_ENV).rstrip('/')}/json?q={urllib.parse.quote(query)}"
    try:
        results = await fetch_json(urllib.request.Request(url, headers=headers))
    except CompatError as exc:
        raise CompatError(f"loogle error:\n{exc.message}") from exc
    if not isinstance(results, dict):
        raise CompatError("loogle error:\nthe answer is not a JSON object")
    error = results.get("error")
    if error:
        suggestions = results.get("suggestions") or []
        more = f" Suggestions: {', '.join(suggestions[:5])}" if suggestions else ""
        raise CompatError(f"loogle query error: {error}{more}")
    try:
        hits = (results.get("hits") or [])[:num_results]
        items = [{"name": h.get("name", ""), "type": h.get("type", ""), "module": h.get("module", "")} for h in hits]
    except (KeyError, TypeError, AttributeError) as exc:
        raise unexpected("loogle", exc) from exc
    return {"items": items}


async def leanfinder(env: Mapping[str, str], query: str, num_results: int, version: str) -> dict[str, Any]:
    """`lean_leanfinder`: POST `<base>` with `{inputs, top_k, version}`."""
    url = base_url(env, LEANFINDER_URL_ENV)
    data = await fetch_json(_post(url, {"inputs": query, "top_k": num_results, "version": version}))
    if not isinstance(data, dict):
        raise CompatError("Lean Finder answered no JSON object")
    if "error" in data:
        raise CompatError(str(data["error"]))
    fields = ("formal_name", "informal_name", "kind", "type", "informal_description")
    try:
        items = [
            {**{k: r.get(k, "") for k in fields}, "path": r.get("path", "").replace("/", ".")}
            for r in data.get("results", [])
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise unexpected("Lean Finder", exc) from exc
    return {"items": items}


async def hammer_premise(env: Mapping[str, str], goal: str, num_results: int) -> dict[str, Any]:
    """`lean_hammer_premise`: POST `<base>/retrieve` with `{state, new_premises, k}`."""
    url = base_url(env, HAMMER_URL_ENV).rstrip("/") + "/retrieve"
    results = await fetch_json(_post(url, {"state": goal, "new_premises": [], "k": num_results}))
    if not isinstance(results, list):
        raise CompatError("the premise service answered no JSON list")
    try:
        return {"items": [{"name": r["name"]} for r in results]}
    except (KeyError, TypeError, AttributeError) as exc:
        raise unexpected("the premise service", exc) from exc


def environment() -> dict[str, str]:
    """The environment the web tools read (this process's)."""
    return dict(os.environ)
