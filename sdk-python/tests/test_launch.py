import pytest

from tether_plugin import (
    NOT_LAUNCHED_BY_HOST_MESSAGE,
    LaunchError,
    NotLaunchedByHost,
    PortRange,
    choose_version,
    parse_versions,
    read_launch,
)


def read(env, versions=(1,), tcp=False):
    return read_launch(env, cookie_key="BASIC_PLUGIN", cookie_value="hello", app_versions=versions, tcp=tcp)


def test_a_missing_cookie_is_reported_with_go_plugins_message():
    with pytest.raises(NotLaunchedByHost) as e:
        read({"PLUGIN_PROTOCOL_VERSIONS": "1"})
    assert str(e.value) == NOT_LAUNCHED_BY_HOST_MESSAGE
    assert str(e.value).startswith("This binary is a plugin.")
    assert not e.value.mismatch and e.value.cookie_key == "BASIC_PLUGIN"


def test_a_wrong_or_empty_cookie_is_a_mismatch_with_the_same_message():
    for value in ("hellO", ""):
        with pytest.raises(NotLaunchedByHost) as e:
            read({"BASIC_PLUGIN": value})
        assert e.value.mismatch
        assert str(e.value) == NOT_LAUNCHED_BY_HOST_MESSAGE


def test_the_cookie_is_checked_before_any_other_variable():
    with pytest.raises(NotLaunchedByHost):
        read(
            {"PLUGIN_PROTOCOL_VERSIONS": "x", "PLUGIN_CLIENT_CERT": "junk", "PLUGIN_MIN_PORT": "no"}, tcp=True
        )


def test_the_highest_common_app_version_is_chosen():
    launch = read({"BASIC_PLUGIN": "hello", "PLUGIN_PROTOCOL_VERSIONS": "2,1,4"}, versions=(1, 2, 3))
    assert launch.app_version == 2


def test_without_a_common_version_the_plugin_answers_its_lowest():
    assert choose_version([1], [3, 2]) == 2
    assert read({"BASIC_PLUGIN": "hello"}, versions=(3, 2)).app_version == 2


def test_version_lists_tolerate_spaces_and_trailing_commas_but_not_words():
    assert parse_versions(" 1, 2,5,") == [1, 2, 5]
    assert parse_versions("") == []
    with pytest.raises(LaunchError, match="'two' is not a non-negative integer"):
        read({"BASIC_PLUGIN": "hello", "PLUGIN_PROTOCOL_VERSIONS": "1,two"})
    with pytest.raises(LaunchError):
        parse_versions("-1")


def test_no_client_cert_means_plaintext_and_an_empty_one_too():
    assert read({"BASIC_PLUGIN": "hello"}).client_cert_der is None
    assert read({"BASIC_PLUGIN": "hello", "PLUGIN_CLIENT_CERT": ""}).client_cert_der is None


def test_a_client_cert_turns_tls_on_and_garbage_or_two_certs_are_errors(tether_broker):
    launch = read({"BASIC_PLUGIN": "hello", "PLUGIN_CLIENT_CERT": tether_broker.cert_pem.decode()})
    assert launch.client_cert_der == tether_broker.cert_der
    with pytest.raises(LaunchError, match="PLUGIN_CLIENT_CERT"):
        read({"BASIC_PLUGIN": "hello", "PLUGIN_CLIENT_CERT": "not pem"})
    two = (tether_broker.cert_pem * 2).decode()
    with pytest.raises(LaunchError, match="2 certificates"):
        read({"BASIC_PLUGIN": "hello", "PLUGIN_CLIENT_CERT": two})


def test_the_socket_dir_and_group_are_passed_through_when_set():
    launch = read(
        {"BASIC_PLUGIN": "hello", "PLUGIN_UNIX_SOCKET_DIR": "/run/x", "PLUGIN_UNIX_SOCKET_GROUP": ""}
    )
    assert launch.socket_dir == "/run/x"
    assert launch.socket_group is None


def test_ports_default_to_go_plugins_range_and_are_read_only_for_tcp():
    assert read({"BASIC_PLUGIN": "hello"}, tcp=True).ports == PortRange(10_000, 25_000)
    env = {"BASIC_PLUGIN": "hello", "PLUGIN_MIN_PORT": "20000", "PLUGIN_MAX_PORT": "20005"}
    assert read(env, tcp=True).ports == PortRange(20_000, 20_005)
    assert read({"BASIC_PLUGIN": "hello", "PLUGIN_MIN_PORT": "bad"}).ports == PortRange()


@pytest.mark.parametrize(
    "low, high, message",
    [("70000", None, "PLUGIN_MIN_PORT='70000'"), (None, " 1", "PLUGIN_MAX_PORT"), ("3000", "2000", "above")],
)
def test_bad_port_ranges_are_rejected_naming_the_variable(low, high, message):
    env = {"BASIC_PLUGIN": "hello"}
    if low is not None:
        env["PLUGIN_MIN_PORT"] = low
    if high is not None:
        env["PLUGIN_MAX_PORT"] = high
    with pytest.raises(LaunchError, match=message):
        read(env, tcp=True)


def test_the_host_says_whether_it_serves_host_services_and_unknown_values_mean_not_said():
    base = {"BASIC_PLUGIN": "hello"}
    assert read({**base, "TETHER_HOST_SERVICES": "served"}).host_services is True
    assert read({**base, "TETHER_HOST_SERVICES": "none"}).host_services is False
    assert read({**base, "TETHER_HOST_SERVICES": "later"}).host_services is None
    assert read(base).host_services is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("1", True), ("T", True), ("false", False), ("0", False), ("FALSE", False)],
)
def test_the_multiplexing_offer_is_read_as_a_go_boolean_and_absent_means_not_offered(value, expected):
    base = {"BASIC_PLUGIN": "hello"}
    assert read({**base, "PLUGIN_MULTIPLEX_GRPC": value}).multiplex is expected
    assert read(base).multiplex is None
    with pytest.raises(LaunchError, match="PLUGIN_MULTIPLEX_GRPC='yes' is not a boolean"):
        read({**base, "PLUGIN_MULTIPLEX_GRPC": "yes"})
