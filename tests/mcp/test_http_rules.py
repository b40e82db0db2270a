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
    split_host,
    status_of,
    url_host,
)
from beam_mcp.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError


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


def test_a_request_without_host_is_refused() -> None:
    with pytest.raises(Rejected) as refused:
        Admission("127.0.0.1", 9000, (), ()).check_origin(Headers({}))
    assert refused.value.status == 403
