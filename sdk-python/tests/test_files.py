import json
import os
from pathlib import Path

import pytest

from tether_plugin import GrantedFiles, InvalidContentError, InvalidNameError, NotGrantedError


@pytest.fixture
def granted(tmp_path):
    (tmp_path / "api_token").write_text("s3cr3t-value")
    (tmp_path / "blob").write_bytes(b"\xff\xfe")
    return GrantedFiles("TETHER_SECRETS_DIR", "secret", {"TETHER_SECRETS_DIR": str(tmp_path)}), tmp_path


def test_a_granted_secret_is_read_as_text_or_bytes(granted):
    secrets, _ = granted
    assert secrets.read("api_token") == "s3cr3t-value"
    assert secrets.read_bytes("blob") == b"\xff\xfe"
    assert secrets.names() == ["api_token", "blob"]


def test_without_the_directory_variable_nothing_was_granted_and_the_error_says_so():
    secrets = GrantedFiles("TETHER_SECRETS_DIR", "secret", {})
    with pytest.raises(NotGrantedError) as e:
        secrets.read("api_token")
    assert "TETHER_SECRETS_DIR is not set" in str(e.value) and '"api_token"' in str(e.value)
    assert isinstance(e.value, LookupError)
    assert secrets.names() == []


def test_a_secret_that_was_not_granted_is_named_in_the_error(granted):
    secrets, _ = granted
    with pytest.raises(NotGrantedError, match='secret "db_password" is not available'):
        secrets.read("db_password")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../api_token", "/etc/passwd", "a\0b"])
def test_names_that_could_reach_another_file_are_invalid(granted, name):
    secrets, _ = granted
    with pytest.raises(InvalidNameError):
        secrets.read(name)


def test_a_symlink_in_the_directory_is_not_followed(granted, tmp_path_factory):
    secrets, directory = granted
    outside = tmp_path_factory.mktemp("outside") / "other"
    outside.write_text("not granted")
    os.symlink(outside, directory / "link")
    with pytest.raises(NotGrantedError, match="cannot be read"):
        secrets.read("link")
    assert "link" not in secrets.names()


def test_a_value_that_is_not_text_is_an_error_that_does_not_quote_it(granted):
    secrets, directory = granted
    (directory / "binary").write_bytes(b"\xffTOPSECRET")
    with pytest.raises(InvalidContentError) as e:
        secrets.read("binary")
    assert "TOPSECRET" not in str(e.value) and "read_bytes" in str(e.value)


def test_the_module_level_helpers_read_the_environment_at_call_time(tmp_path, monkeypatch):
    import tether_plugin

    (tmp_path / "settings.json").write_text("{}")
    monkeypatch.setenv("TETHER_CONFIG_DIR", str(tmp_path))
    assert tether_plugin.config.read("settings.json") == "{}"
    monkeypatch.delenv("TETHER_CONFIG_DIR")
    with pytest.raises(NotGrantedError, match="TETHER_CONFIG_DIR"):
        tether_plugin.config.read("settings.json")


#: The messages every tether SDK words the same, word for word.
NOT_AVAILABLE = json.loads(
    (Path(__file__).resolve().parents[2] / "proto" / "testdata" / "not-available.json").read_text()
)["cases"]


@pytest.mark.parametrize("case", NOT_AVAILABLE, ids=lambda c: f"{c['kind']}-{c['delivered']}")
def test_a_value_not_available_is_worded_exactly_as_every_sdk_words_it(case, tmp_path):
    env_var, kind = {
        "secret": ("TETHER_SECRETS_DIR", "secret"),
        "config": ("TETHER_CONFIG_DIR", "config file"),
    }[case["kind"]]
    environ = {} if case["delivered"] == "none" else {env_var: str(tmp_path)}
    with pytest.raises(NotGrantedError) as e:
        GrantedFiles(env_var, kind, environ).read(case["name"])
    assert str(e.value) == case["message"]
