"""The endpoint's rules as pure functions (`beam_mcp._http.rules`): the edge cases the endpoint tests do not reach."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from beam_mcp._http.rules import (
    Admission,
    Rejected,
    accepts,
    decode_header_value,
    head_size,
    param_header_error,
    split_host,
    status_of,
    url_host,
)
from beam_mcp._tools import ParamHeader
from beam_mcp.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcError,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("LocalHost:8765", ("localhost", "8765")),
        ("127.0.0.1", ("127.0.0.1", None)),
        ("[::1]:8765", ("[::1]", "8765")),
        ("[::1]", ("[::1]", None)),
        ("[::1", ("[::1", None)),
        ("::1", ("::1", None)),
        (" example.org:80 ", ("example.org", "80")),
    ],
)
def test_host_values_split_into_a_lowercased_name_and_a_port(value: str, expected: tuple[str, str | None]) -> None:
    assert split_host(value) == expected


def test_ipv6_hosts_are_bracketed_in_urls() -> None:
    assert (url_host("::1"), url_host("[::1]"), url_host("127.0.0.1")) == ("[::1]", "[::1]", "127.0.0.1")


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ("lean_sync", "lean_sync"),
        ("=?base64?bGVhbl9zeW5j?=", "lean_sync"),
        ("=?base64?w6k=?=", "é"),
        ("=?base64?!!!?=", None),
        ("=?base64?/w==?=", None),  # not UTF-8
        ("=?base64??=", ""),
    ],
)
def test_mirror_headers_are_plain_or_base64_utf8(value: str, decoded: str | None) -> None:
    assert decode_header_value(value) == decoded


@pytest.mark.parametrize(
    ("values", "media", "admitted"),
    [
        (["application/json, text/event-stream"], "text/event-stream", True),
        (["application/json", "text/event-stream"], "text/event-stream", True),
        (["text/*;q=0.5"], "text/event-stream", True),
        (["*/*"], "application/json", True),
        (["text/event-stream;q=0"], "text/event-stream", False),
        (["text/event-stream;q=high"], "text/event-stream", False),
        (["text/html"], "text/event-stream", False),
        ([], "application/json", False),
    ],
)
def test_accept_admits_exact_types_wildcards_and_positive_weights(
    values: list[str], media: str, admitted: bool
) -> None:
    assert accepts(values, media) is admitted


@pytest.mark.parametrize(
    ("values", "media", "admitted"),
    [
        (["application/json;q=0, */*"], "application/json", False),
        (["*/*, application/json;q=0"], "application/json", False),
        (["text/event-stream;q=0", "text/*"], "text/event-stream", False),
        (["text/*;q=0, text/event-stream"], "text/event-stream", True),
        (["*/*;q=0, application/*"], "application/json", True),
        (["application/json;q=0, */*"], "text/event-stream", True),
    ],
)
def test_the_most_specific_accept_range_decides(values: list[str], media: str, admitted: bool) -> None:
    # RFC 9110 12.5.1: a type refused with q=0 stays refused whatever wider range the header also lists.
    assert accepts(values, media) is admitted


def test_errors_map_to_statuses_404_500_or_400() -> None:
    assert [status_of(code) for code in (METHOD_NOT_FOUND, INTERNAL_ERROR, INVALID_PARAMS, -32020)] == [
        404,
        500,
        400,
        400,
    ]


def test_a_rejection_of_a_jsonrpc_error_keeps_its_data_and_id() -> None:
    rejected = Rejected.of(JsonRpcError(INTERNAL_ERROR, "boom", {"why": 1}), rid=7)
    assert rejected.status == 500
    assert rejected.body == b'{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"boom","data":{"why":1}}}'


def test_the_head_size_counts_the_target_and_every_header_line() -> None:
    assert head_size(b"/mcp", b"x=1", [(b"host", b"a"), (b"accept", b"*/*")]) == 4 + 3 + (4 + 1 + 4) + (6 + 3 + 4)


def test_the_bound_address_and_its_origin_are_allowed() -> None:
    admission = Admission("192.0.2.7", 9000, (), ())
    admission.check_origin(Headers({"host": "192.0.2.7:9000", "origin": "http://192.0.2.7:9000"}))
    with pytest.raises(Rejected) as refused:
        admission.check_origin(Headers({"host": "192.0.2.7:9000", "origin": "http://192.0.2.7:9001"}))
    assert refused.value.status == 403 and b'"code":%d' % INVALID_REQUEST in refused.value.body


def test_an_origin_on_its_schemes_default_port_is_the_same_origin_with_or_without_the_port() -> None:
    # A browser serializes an origin without its scheme's default port (RFC 6454 6.2): `http://localhost`.
    Admission("127.0.0.1", 80, (), ()).check_origin(Headers({"host": "localhost", "origin": "http://localhost"}))
    allowed = Admission("127.0.0.1", 8765, (), ("https://app.example.org:443", "http://docs.example.org"))
    allowed.check_origin(Headers({"host": "localhost:8765", "origin": "https://app.example.org"}))
    allowed.check_origin(Headers({"host": "localhost:8765", "origin": "http://docs.example.org:80"}))
    with pytest.raises(Rejected):  # another scheme's default port is another origin
        allowed.check_origin(Headers({"host": "localhost:8765", "origin": "http://app.example.org:443"}))


def test_a_request_without_host_is_refused() -> None:
    with pytest.raises(Rejected) as refused:
        Admission("127.0.0.1", 9000, (), ()).check_origin(Headers({}))
    assert refused.value.status == 403


ROOT = ParamHeader(("workspace", "root"), "Workspace", "string")
COUNT = ParamHeader(("count",), "Count", "integer")
FLAG = ParamHeader(("flag",), "Flag", "boolean")


def _param_error(
    arguments: object, *headers: tuple[str, str], declared: tuple[ParamHeader, ...] = (ROOT,)
) -> str | None:
    """The message of the `Mcp-Param-*` rule a request breaks (None: it passes); the code is always -32020."""
    raw = [(name.lower().encode(), value.encode("latin-1")) for name, value in headers]
    error = param_header_error(Headers(raw=raw), declared, arguments)
    if error is None:
        return None
    assert error.code == HEADER_MISMATCH and error.message.startswith("header mismatch: ")
    return error.message


@pytest.mark.parametrize(
    ("root", "header"),
    [
        ("/w/proj", "/w/proj"),
        ("/w/dé mo", "=?base64?L3cvZMOpIG1v?="),
        (" /w/edge ", "=?base64?IC93L2VkZ2Ug?="),
        ("=?base64?x?=", "=?base64?PT9iYXNlNjQ/eD89?="),
        ("/w/tab\there", "/w/tab\there"),
    ],
)
def test_a_declared_param_header_equal_to_the_body_passes(root: str, header: str) -> None:
    assert _param_error({"workspace": {"root": root}}, ("Mcp-Param-Workspace", header)) is None


def test_param_header_names_compare_case_insensitively() -> None:
    assert _param_error({"workspace": {"root": "/w"}}, ("MCP-PARAM-WORKSPACE", "/w")) is None


@pytest.mark.parametrize(
    ("arguments", "headers", "reason"),
    [
        ({"workspace": {"root": "/w"}}, [], "Mcp-Param-Workspace header is required for arguments.workspace.root"),
        ({"workspace": {"root": "/w"}}, [("Mcp-Param-Workspace", "/v")], "'/v' is not arguments.workspace.root"),
        ({"workspace": {"root": "/w"}}, [("Mcp-Param-Workspace", "/w")] * 2, "appears more than once"),
        ({"workspace": {"root": "/wé"}}, [("Mcp-Param-Workspace", "/wé")], "invalid characters"),
        ({"workspace": {"root": "/w"}}, [("Mcp-Param-Workspace", "=?base64?!!?=")], "malformed base64"),
        ({"workspace": {}}, [("Mcp-Param-Workspace", "/w")], "is sent, but arguments.workspace.root is absent"),
        ({"workspace": {"root": None}}, [("Mcp-Param-Workspace", "/w")], "is absent"),
        ({"workspace": "/w"}, [("Mcp-Param-Workspace", "/w")], "is absent"),
        (None, [("Mcp-Param-Workspace", "/w")], "is absent"),
        ({"workspace": {"root": ["/w"]}}, [("Mcp-Param-Workspace", "/w")], "is of a type no header carries"),
    ],
)
def test_a_declared_param_header_unlike_the_body_is_a_header_mismatch(
    arguments: object, headers: list[tuple[str, str]], reason: str
) -> None:
    message = _param_error(arguments, *headers)
    assert message is not None and reason in message


def test_absent_values_need_no_header_and_undeclared_headers_are_ignored() -> None:
    assert _param_error({"workspace": {}}) is None
    assert _param_error({"workspace": {"root": None}}) is None
    assert _param_error({"workspace": {"root": 7.5}}) is None  # left to the tool's own input check
    assert _param_error({"workspace": {"root": "/w"}}, ("Mcp-Param-Workspace", "/w"), ("Mcp-Param-Other", "x")) is None
    assert _param_error({"workspace": {"root": "/w"}}, ("Mcp-Param-Workspace", "/v"), declared=()) is None


@pytest.mark.parametrize(
    ("value", "header", "passes"),
    [(42, "42", True), (42, "42.0", True), (-7, "-7", True), (42, "42.5", False), (42, "4e1", False)],
)
def test_integer_param_headers_compare_numerically(value: int, header: str, passes: bool) -> None:
    assert (_param_error({"count": value}, ("Mcp-Param-Count", header), declared=(COUNT,)) is None) is passes


def test_boolean_param_headers_are_lowercase_words() -> None:
    assert _param_error({"flag": True}, ("Mcp-Param-Flag", "true"), declared=(FLAG,)) is None
    assert _param_error({"flag": False}, ("Mcp-Param-Flag", "False"), declared=(FLAG,)) is not None
