"""beam_lsp.redaction: the one redactor (secret names, sources, spellings, labels, home directory), and the
table of every error and log path beam-lsp owns, each of which must redact.

The tables merge what beam-lsp and beam-feedback each tested before they shared this module.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_lsp import LeanClient, Position, Redactor, ResponseError, ServerExited, is_secret_name, path_to_uri
from beam_lsp import redaction as redaction_module
from beam_lsp._process import StderrBuffer
from tests.lsp.helpers import stdlib_only
from tests.support.fixtures import fake_cmd


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "api_key",
        "apiKey",
        "MY_SECRET",
        "DB_PASSWORD",
        "passWord",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_CREDENTIALS",
        "MY_CREDENTIALS",
        "AUTHORIZATION",
        "HTTPAuthHeader",
        "client-secret",
        "x.api.key",
        "GIT_AUTHOR_KEY",
        # digits are segment boundaries, never part of a marker
        "API_KEY2",
        "TOKEN2",
        "KEY2_LAYOUT",
        "MY2SECRET",
        "auth0Token",
    ],
)
def test_secret_looking_names_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "XAUTHORITY",
        "XAuthority",
        "KEYBOARD_LAYOUT",
        "KEYMAP",
        "TOKENIZERS_PARALLELISM",
        "SSH_AUTH_SOCK",
        "ssh_auth_sock",
        "HOME",
        "PATH",
        "LEAN_PATH",
        # a digit ends a benign segment instead of hiding it
        "KEYBOARD2_LAYOUT",
        "XAUTHORITY2",
        "KEYMAP1",
        "AUTHOR2_NAME",
        "server.reportDelayMs",
    ],
)
def test_benign_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_secret_environment_values_are_replaced_by_their_name() -> None:
    redactor = Redactor.from_sources({"GITHUB_TOKEN": "ghp_abcdefgh1234", "EDITOR": "vim-editor-long"})
    assert redactor.redact("x ghp_abcdefgh1234 y vim-editor-long") == "x [redacted:GITHUB_TOKEN] y vim-editor-long"


def test_secret_values_are_replaced_with_named_markers_in_every_spelling() -> None:
    r = Redactor.from_sources({"GITHUB_TOKEN": 'ghp_abc"def\\ghi', "HOME": "/root/home/dir", "SHORT_KEY": "1234567"})
    text = 'raw ghp_abc"def\\ghi json ghp_abc\\"def\\\\ghi home /root/home/dir short 1234567'
    out = r.redact(text)
    assert "ghp_abc" not in out
    assert out.count("[redacted:GITHUB_TOKEN]") == 2
    assert "/root/home/dir" in out  # not secret-named, and home redaction was not asked for
    assert "1234567" in out  # shorter than 8 bytes


def test_values_shorter_than_eight_bytes_are_left_alone() -> None:
    redactor = Redactor.from_sources({"API_KEY": "1234567", "OTHER_KEY": "12345678"})
    assert redactor.redact("1234567 12345678") == "1234567 [redacted:OTHER_KEY]"


def test_eight_bytes_are_counted_in_utf8_not_characters() -> None:
    redactor = Redactor([("KEY", "ééééé")])  # five characters, ten bytes
    assert redactor.redact("ééééé") == "[redacted:KEY]"


def test_secrets_may_be_a_mapping_or_pairs() -> None:
    assert Redactor({"A_TOKEN": "abcdefgh1"}).redact("abcdefgh1") == Redactor([("A_TOKEN", "abcdefgh1")]).redact(
        "abcdefgh1"
    )


def test_command_line_flags_are_secret_sources() -> None:
    r = Redactor.from_sources(
        {}, ["lake", "serve", "--auth-token=verysecret1", "--api-key", "verysecret2", "-Dmy.secret=verysecret3"]
    )
    out = r.redact("a verysecret1 b verysecret2 c verysecret3")
    assert out == "a [redacted:auth-token] b [redacted:api-key] c [redacted:my.secret]"


def test_flags_with_equals_and_with_a_separate_value_are_secret_sources() -> None:
    argv = ["lean-beam-mcp", "--api-key=equals-form-1", "--auth-token", "spaced-form-22", "--verbose"]
    redactor = Redactor.from_sources({}, argv)
    assert redactor.redact("equals-form-1 spaced-form-22") == "[redacted:api-key] [redacted:auth-token]"


@pytest.mark.parametrize(
    "argv",
    [
        ["lake", "serve", "--", "-Dfoo.token=value-of-it"],
        ["lean", "--server", "-D", "foo.token=value-of-it"],
    ],
)
def test_lean_options_are_labelled_by_the_option_name_without_the_d(argv: list[str]) -> None:
    assert Redactor.from_sources({}, argv).redact("x value-of-it") == "x [redacted:foo.token]"


def test_lean_options_without_a_value_and_benign_options_are_not_sources() -> None:
    argv = ["lean", "-Dfoo.token", "separate-value-1", "-Dkeyboard=long-layout-1", "-Dserver.reportDelayMs=10000000"]
    assert not Redactor.from_sources({}, argv)


def test_a_flag_followed_by_another_flag_has_no_value() -> None:
    redactor = Redactor.from_sources({}, ["--token", "--next-flag-value"])
    assert not redactor.active
    assert redactor.redact("--next-flag-value") == "--next-flag-value"


def test_flags_with_benign_names_are_not_sources() -> None:
    redactor = Redactor.from_sources({}, ["--author", "Ada Lovelace Byron", "--root=/some/project/path", "--", "-"])
    assert not redactor.active


def test_extra_pairs_are_secrets_as_given() -> None:
    redactor = Redactor.from_sources({}, (), [("whatever", "explicit-value")])
    assert redactor.redact("explicit-value") == "[redacted:whatever]"


def test_json_escaped_and_repr_escaped_spellings_are_redacted() -> None:
    secret = 'pa"ss\\wo\nrd'
    redactor = Redactor([("DB_PASSWORD", secret)])
    assert secret not in redactor.redact(secret)
    as_json = json.dumps({"value": secret})
    assert redactor.redact(as_json) == '{"value": "[redacted:DB_PASSWORD]"}'
    as_repr = repr({"value": secret})
    assert redactor.redact(as_repr) == "{'value': '[redacted:DB_PASSWORD]'}"


def test_non_ascii_secrets_are_redacted_in_ascii_escaped_json_too() -> None:
    redactor = Redactor([("API_KEY", "clé-secrète-42")])
    assert redactor.redact(json.dumps("clé-secrète-42")) == '"[redacted:API_KEY]"'


def test_longest_secret_wins_when_one_contains_another() -> None:
    r = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefghijkl"})
    assert r.redact("abcdefghijkl") == "[redacted:B_TOKEN]"


def test_a_longer_secret_containing_a_shorter_one_is_replaced_whole() -> None:
    redactor = Redactor([("SHORT_KEY", "abcdefgh"), ("LONG_KEY", "abcdefgh-and-more")])
    assert redactor.redact("abcdefgh-and-more abcdefgh") == "[redacted:LONG_KEY] [redacted:SHORT_KEY]"


def test_a_value_known_under_two_names_keeps_the_first() -> None:
    redactor = Redactor.from_sources({"B_TOKEN": "same-value-123", "A_TOKEN": "same-value-123"})
    assert redactor.redact("same-value-123") == "[redacted:A_TOKEN]"


def test_labels_are_reduced_to_safe_characters_and_64_characters() -> None:
    redactor = Redactor([("weird name/with:chars_TOKEN" + "x" * 80, "value-of-the-secret")])
    marker = redactor.redact("value-of-the-secret")
    label = marker.removeprefix("[redacted:").removesuffix("]")
    assert label.startswith("weird_name_with_chars_TOKEN")
    assert len(label) == 64


def test_a_secret_without_a_name_is_labelled_secret() -> None:
    assert Redactor([("", "nameless-value")]).redact("nameless-value") == "[redacted:secret]"


def test_home_directory_becomes_tilde_only_at_a_path_boundary() -> None:
    redactor = Redactor(home="/home/al")
    assert redactor.redact("/home/al/proj and /home/al") == "~/proj and ~"
    assert redactor.redact("/home/alice/proj") == "/home/alice/proj"


def test_a_root_home_is_not_redacted() -> None:
    assert not Redactor(home="/").active
    assert Redactor(home="/").redact("/usr/bin") == "/usr/bin"


def test_home_comes_from_the_environment_only_when_asked() -> None:
    assert Redactor.from_sources({"HOME": "/home/ada"}, home=True).redact("/home/ada/x") == "~/x"
    assert Redactor.from_sources({"USERPROFILE": "/users/ada"}, home=True).redact("/users/ada/x") == "~/x"
    assert Redactor.from_sources({"HOME": "/home/ada"}).redact("/home/ada/x") == "/home/ada/x"


def test_a_secret_inside_the_home_directory_is_still_a_secret() -> None:
    redactor = Redactor([("API_TOKEN", "/home/ada/tok-123")], home="/home/ada")
    assert redactor.redact("/home/ada/tok-123 /home/ada/x") == "[redacted:API_TOKEN] ~/x"


def test_json_redaction_touches_values_not_keys() -> None:
    r = Redactor({"X_SECRET": "s3cr3tvalue"})
    assert r.redact_json({"s3cr3tvalue": ["s3cr3tvalue", 1]}) == {"s3cr3tvalue": ["[redacted:X_SECRET]", 1]}


def test_redact_json_redacts_string_values_but_not_keys() -> None:
    redactor = Redactor([("SECRET_VALUE", "s3cr3t-s3cr3t")])
    value: Any = {"s3cr3t-s3cr3t": ["s3cr3t-s3cr3t", 1, None, True, {"k": "a s3cr3t-s3cr3t b"}]}
    assert redactor.redact_json(value) == {
        "s3cr3t-s3cr3t": ["[redacted:SECRET_VALUE]", 1, None, True, {"k": "a [redacted:SECRET_VALUE] b"}]
    }


def test_an_empty_redactor_changes_nothing_and_is_falsy() -> None:
    redactor = Redactor()
    assert not redactor.active and not redactor
    assert redactor.redact("/home/ada anything") == "/home/ada anything"
    value = {"a": ["/home/ada"]}
    assert redactor.redact_json(value) is value


def test_inserted_markers_are_not_rescanned() -> None:
    # "redacted:A_TOKEN" is itself long enough to be a secret value; one pass never sees it.
    redactor = Redactor([("A_TOKEN", "value-one-1"), ("B_TOKEN", "redacted:A_TOKEN")])
    assert redactor.redact("value-one-1") == "[redacted:A_TOKEN]"


def test_the_module_imports_only_the_standard_library() -> None:
    assert stdlib_only(redaction_module)


# ---- every error and log path beam-lsp owns ---------------------------------------------------------------
# The server command carries a secret flag and the server's environment a secret variable; the client builds
# its redactor from them (the default). Each row drives one path and returns every text it produced.
ENV_SECRET = "env-secret-0123456789"
FLAG_SECRET = "flag-secret-9876543210"
SECRETS = (ENV_SECRET, FLAG_SECRET)
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BEAM_DEPLOY_TOKEN": ENV_SECRET}
FLAG = f"--auth-token={FLAG_SECRET}"
BOTH = f"{ENV_SECRET} {FLAG}"
Scenario = Callable[[Path], Awaitable[list[str]]]


def _texts(exc: BaseException) -> list[str]:
    """What a caller could show or log of an exception: its text, repr and whole traceback (chain included)."""
    out = [str(exc), repr(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    if isinstance(exc, ServerExited):
        out.append(exc.stderr_tail)
    if isinstance(exc, ResponseError):
        out += [exc.message, json.dumps(exc.data)]
    return out


def _start(tmp_path: Path, config: dict[str, Any], **kwargs: Any) -> Any:
    return LeanClient.start([*fake_cmd(config), FLAG], cwd=tmp_path, env=ENV, **kwargs)


async def _raised(start: Callable[[], Awaitable[object]]) -> list[str]:
    try:
        with anyio.fail_after(30):
            await start()
    except (OSError, ServerExited, ResponseError) as exc:
        return _texts(exc)
    raise AssertionError("the path did not fail")


async def _spawn_fails_on_the_program(tmp_path: Path) -> list[str]:
    cmd = [str(tmp_path / ENV_SECRET / FLAG_SECRET / "lean"), FLAG]

    async def start() -> None:
        async with LeanClient.start(cmd, cwd=tmp_path, env=ENV):
            pass

    return await _raised(start)


async def _spawn_fails_on_the_directory(tmp_path: Path) -> list[str]:
    async def start() -> None:
        async with LeanClient.start([*fake_cmd(), FLAG], cwd=tmp_path / ENV_SECRET, env=ENV):
            pass

    return await _raised(start)


async def _exit_during_the_handshake(tmp_path: Path) -> list[str]:
    async def start() -> None:
        async with _start(tmp_path, {"crash_on": {"method": "initialize", "stderr": f"panic: {BOTH}"}}):
            pass

    return await _raised(start)


async def _no_answer_to_initialize(tmp_path: Path) -> list[str]:
    config = {"stderr_on_start": f"starting with {BOTH}", "crash_on": {"method": "initialize", "after_ms": 60000}}

    async def start() -> None:
        async with _start(tmp_path, config, initialize_timeout=1.0):
            pass

    return await _raised(start)


async def _crash_mid_request(tmp_path: Path) -> list[str]:
    config = {"crash_on": {"method": "textDocument/hover", "stderr": f"panic: {BOTH}"}}
    async with _start(tmp_path, config) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "def x := 1\n")
        texts = await _raised(lambda: client.hover(uri, Position(line=0, character=4)))
        return [*texts, *_texts(await client.wait_exited()), client.stderr_tail()]


async def _framing_error_quoting_the_server(tmp_path: Path) -> list[str]:
    config = {"malformed": {"on": "textDocument/hover", "kind": "raw", "data": f"{BOTH}\r\n\r\n{{}}"}}
    async with _start(tmp_path, config) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "def x := 1\n")
        return await _raised(lambda: client.hover(uri, Position(line=0, character=4)))


async def _error_answer_message_and_data(tmp_path: Path) -> list[str]:
    error = {"code": -32603, "message": f"failed: {BOTH}", "data": {"argv": [FLAG], "env": ENV_SECRET}}
    async with _start(tmp_path, {"errors": {"$/beam/test": error}}) as client:
        return await _raised(lambda: client.request("$/beam/test", {}))


async def _log_and_show_messages(tmp_path: Path) -> list[str]:
    sent = [
        {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": f"log {BOTH}"}},
        {"jsonrpc": "2.0", "method": "window/showMessage", "params": {"type": 1, "message": f"show {BOTH}"}},
    ]
    async with _start(tmp_path, {"inject": {"on": "workspace/symbol", "send": sent}}) as client:
        await client.request("workspace/symbol", {"query": ""})  # answered after the injected messages
        entries = client.cache.logs.entries() + client.cache.messages.entries()
        assert len(entries) == 2
        return [entry.message for entry in entries]


async def _undecodable_message(tmp_path: Path) -> list[str]:
    body = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {FLAG_SECRET: 1}})
    body = body.replace("}}", f', "{FLAG_SECRET}": 2}}}}')  # a repeated key: the error names it
    async with _start(tmp_path, {"inject": {"on": "workspace/symbol", "send": [body]}}) as client:
        await client.request("workspace/symbol", {"query": ""})
        assert client.stats().protocol_errors == 1
        return []


async def _notification_the_client_cannot_take(tmp_path: Path) -> list[str]:
    bad = {"uri": 5, "diagnostics": [{"message": BOTH}]}  # the validation error quotes the input
    sent = [{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": bad}]
    async with _start(tmp_path, {"inject": {"on": "workspace/symbol", "send": sent}}) as client:
        await client.request("workspace/symbol", {"query": ""})
        assert client.stats().protocol_errors == 1
        return []


async def _stderr_tail_cut_inside_a_secret(tmp_path: Path) -> list[str]:
    # Whole chunks are dropped to keep the tail bounded: here the boundary falls one character into the secret.
    buffer = StderrBuffer(limit=64)
    buffer.feed(f"first line\n{'x' * 20}{ENV_SECRET[:1]}".encode())
    buffer.feed(f"{ENV_SECRET[1:]} rest of that line\nEND-OF-TAIL\n".encode())
    tail = buffer.tail(Redactor.from_sources(ENV, [*fake_cmd(), FLAG]))
    assert tail == "END-OF-TAIL"  # the cut line is left out
    return [tail]


REDACTION_PATHS: dict[str, tuple[Scenario, bool]] = {
    # row: (scenario, whether its texts must show a redaction marker)
    "start: the program cannot be executed": (_spawn_fails_on_the_program, True),
    "start: the working directory does not exist": (_spawn_fails_on_the_directory, True),
    "start: the server exits during the handshake": (_exit_during_the_handshake, True),
    "start: initialize is never answered": (_no_answer_to_initialize, True),
    "ServerExited: the server dies under a request": (_crash_mid_request, True),
    "ServerExited: a framing error quotes the server's bytes": (_framing_error_quoting_the_server, True),
    "ResponseError: message and data": (_error_answer_message_and_data, True),
    "log entries: window/logMessage and window/showMessage": (_log_and_show_messages, True),
    "log record: an undecodable message": (_undecodable_message, False),
    "log record: a notification that fails with a traceback": (_notification_the_client_cannot_take, False),
    "stderr tail: the bound cuts a line inside a secret": (_stderr_tail_cut_inside_a_secret, False),
}


@pytest.mark.anyio
@pytest.mark.parametrize("row", list(REDACTION_PATHS))
async def test_no_error_or_log_path_shows_a_secret_of_the_command_or_environment(
    row: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scenario, marked = REDACTION_PATHS[row]
    with caplog.at_level(logging.DEBUG, logger="beam_lsp"):
        texts = await scenario(tmp_path)
    records = [caplog.text, *(str(r.exc_text) for r in caplog.records)]
    assert texts or caplog.records, "the row produced nothing to check"
    for text in texts + records:
        for secret in SECRETS:
            assert secret[1:] not in text, (row, text)  # not even cut: one character off still matches
    if marked:
        assert any("[redacted:" in text for text in texts), row
    else:
        assert all(r.exc_info is None for r in caplog.records)  # tracebacks are logged as redacted text
