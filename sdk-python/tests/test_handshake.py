import base64

import pytest

from tether_plugin import Handshake, encode_cert


def test_the_line_has_six_fields_and_ends_with_a_newline():
    line = Handshake(app_version=3, network="unix", address="/tmp/x/plugin.sock").line()
    assert line == "1|3|unix|/tmp/x/plugin.sock|grpc|\n"


def test_a_tcp_address_is_announced_as_host_and_port():
    line = Handshake(app_version=1, network="tcp", address="127.0.0.1:10001").line()
    assert line.split("|")[2:4] == ["tcp", "127.0.0.1:10001"]


@pytest.mark.parametrize("length", [1, 2, 3, 100, 101, 102])
def test_the_certificate_is_standard_base64_without_padding(length):
    der = bytes(range(256))[:length] * 1
    field = encode_cert(der)
    assert "=" not in field
    assert base64.b64decode(field + "=" * (-len(field) % 4)) == der
    line = Handshake(app_version=1, network="unix", address="/s", server_cert_der=der).line()
    assert line.rstrip("\n").split("|")[5] == field
    assert len(line.split("|")) == 6, "no 7th (multiplexing) field unless the host offered it"


@pytest.mark.parametrize(("multiplex", "field"), [(True, "true"), (False, "false")])
def test_the_seventh_field_is_printed_only_when_the_host_offered_multiplexing(multiplex, field):
    line = Handshake(app_version=1, network="unix", address="/s", multiplex=multiplex).line()
    assert line == f"1|1|unix|/s|grpc||{field}\n"
    assert Handshake(app_version=1, network="unix", address="/s").line().count("|") == 5


def test_an_address_that_would_break_the_line_is_refused():
    with pytest.raises(ValueError):
        Handshake(app_version=1, network="unix", address="/tmp/a|b").line()
    with pytest.raises(ValueError):
        Handshake(app_version=1, network="unix", address="/tmp/a\nb").line()
