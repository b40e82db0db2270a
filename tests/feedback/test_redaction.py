"""Redaction rules (mirrors beam_feedback/redaction.py)."""

from __future__ import annotations

import json

import pytest
from pydantic import JsonValue

from beam_feedback import Redactor, is_secret_name


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "api_key",
        "apiKey",
        "MY_SECRET",
        "DB_PASSWORD",
        "passWord",
        "AWS_CREDENTIALS",
        "AUTHORIZATION",
        "HTTPAuthHeader",
        "client-secret",
        "x.api.key",
        "GIT_AUTHOR_KEY",
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
    ],
)
def test_benign_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_secret_environment_values_are_replaced_by_their_name() -> None:
    redactor = Redactor.from_environ({"GITHUB_TOKEN": "ghp_abcdefgh1234", "EDITOR": "vim-editor-long"})
    assert redactor.redact("x ghp_abcdefgh1234 y vim-editor-long") == "x [redacted:GITHUB_TOKEN] y vim-editor-long"


def test_values_shorter_than_eight_bytes_are_left_alone() -> None:
    redactor = Redactor.from_environ({"API_KEY": "1234567", "OTHER_KEY": "12345678"})
    assert redactor.redact("1234567 12345678") == "1234567 [redacted:OTHER_KEY]"


def test_eight_bytes_are_counted_in_utf8_not_characters() -> None:
    redactor = Redactor([("KEY", "ééééé")])  # five characters, ten bytes
    assert redactor.redact("ééééé") == "[redacted:KEY]"


def test_flags_with_equals_and_with_a_separate_value_are_secret_sources() -> None:
    argv = ["lean-beam-mcp", "--api-key=equals-form-1", "--auth-token", "spaced-form-22", "--verbose"]
    redactor = Redactor.from_environ({}, argv)
    assert redactor.redact("equals-form-1 spaced-form-22") == "[redacted:api-key] [redacted:auth-token]"


def test_a_flag_followed_by_another_flag_has_no_value() -> None:
    redactor = Redactor.from_environ({}, ["--token", "--next-flag-value"])
    assert not redactor.active
    assert redactor.redact("--next-flag-value") == "--next-flag-value"


def test_flags_with_benign_names_are_not_sources() -> None:
    redactor = Redactor.from_environ({}, ["--author", "Ada Lovelace Byron", "--root=/some/project/path"])
    assert not redactor.active


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


def test_a_longer_secret_containing_a_shorter_one_is_replaced_whole() -> None:
    redactor = Redactor([("SHORT_KEY", "abcdefgh"), ("LONG_KEY", "abcdefgh-and-more")])
    assert redactor.redact("abcdefgh-and-more abcdefgh") == "[redacted:LONG_KEY] [redacted:SHORT_KEY]"


def test_a_value_known_under_two_names_keeps_the_first() -> None:
    redactor = Redactor.from_environ({"B_TOKEN": "same-value-123", "A_TOKEN": "same-value-123"})
    assert redactor.redact("same-value-123") == "[redacted:A_TOKEN]"


def test_labels_are_reduced_to_safe_characters_and_64_characters() -> None:
    redactor = Redactor([("weird name/with:chars_TOKEN" + "x" * 80, "value-of-the-secret")])
    marker = redactor.redact("value-of-the-secret")
    label = marker.removeprefix("[redacted:").removesuffix("]")
    assert label.startswith("weird_name_with_chars_TOKEN")
    assert len(label) == 64


def test_home_directory_becomes_tilde_only_at_a_path_boundary() -> None:
    redactor = Redactor(home="/home/al")
    assert redactor.redact("/home/al/proj and /home/al") == "~/proj and ~"
    assert redactor.redact("/home/alice/proj") == "/home/alice/proj"


def test_a_root_home_is_not_redacted() -> None:
    assert not Redactor(home="/").active
    assert Redactor(home="/").redact("/usr/bin") == "/usr/bin"


def test_home_comes_from_the_environment() -> None:
    assert Redactor.from_environ({"HOME": "/home/ada"}).redact("/home/ada/x") == "~/x"


def test_redact_json_redacts_string_values_but_not_keys() -> None:
    redactor = Redactor([("SECRET_VALUE", "s3cr3t-s3cr3t")])
    value: JsonValue = {"s3cr3t-s3cr3t": ["s3cr3t-s3cr3t", 1, None, True, {"k": "a s3cr3t-s3cr3t b"}]}
    assert redactor.redact_json(value) == {
        "s3cr3t-s3cr3t": ["[redacted:SECRET_VALUE]", 1, None, True, {"k": "a [redacted:SECRET_VALUE] b"}]
    }


def test_an_empty_redactor_changes_nothing() -> None:
    redactor = Redactor()
    assert not redactor.active
    assert redactor.redact("/home/ada anything") == "/home/ada anything"


def test_inserted_markers_are_not_rescanned() -> None:
    # "redacted:A_TOKEN" is itself long enough to be a secret value; one pass never sees it.
    redactor = Redactor([("A_TOKEN", "value-one-1"), ("B_TOKEN", "redacted:A_TOKEN")])
    assert redactor.redact("value-one-1") == "[redacted:A_TOKEN]"
