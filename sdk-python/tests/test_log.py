import io
import json
import logging
import re

from tether_plugin import HclogFormatter, HclogHandler

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


def emit(logger_name, level, msg, *args, **kwargs):
    stream = io.StringIO()
    logger = logging.getLogger(logger_name)
    logger.propagate = False
    handler = HclogHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(1)
    try:
        logger.log(level, msg, *args, **kwargs)
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def test_a_record_becomes_one_hclog_json_line_with_fields():
    entry = emit("kv", logging.INFO, "stored %s", "a", extra={"key": "a", "bytes": 3})
    assert entry["@level"] == "info"
    assert entry["@message"] == "stored a"
    assert entry["@module"] == "kv"
    assert entry["key"] == "a" and entry["bytes"] == 3
    assert TIMESTAMP.match(entry["@timestamp"]), entry["@timestamp"]


def test_levels_map_to_hclog_names():
    got = [emit("lv", level, "m")["@level"] for level in (5, 10, 20, 30, 40, 50)]
    assert got == ["trace", "debug", "info", "warn", "error", "error"]


def test_an_exception_is_a_field_and_the_line_stays_one_line():
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        entry = emit("exc", logging.ERROR, "failed", exc_info=True)
    assert "RuntimeError: boom" in entry["error"]
    assert entry["@message"] == "failed"


def test_values_json_cannot_encode_are_written_as_text():
    entry = emit("obj", logging.INFO, "x", extra={"thing": object(), "path": b"bytes"})
    assert entry["thing"].startswith("<object object")
    assert entry["path"] == "b'bytes'"


def test_the_timestamp_has_exactly_six_fractional_digits_even_on_a_whole_second():
    record = logging.LogRecord("r", logging.INFO, __file__, 1, "m", None, None)
    record.created = 1_700_000_000.0
    entry = json.loads(HclogFormatter().format(record))
    assert TIMESTAMP.match(entry["@timestamp"]), entry["@timestamp"]
    assert ".000000" in entry["@timestamp"]
    assert "@module" in entry  # "r" is a named logger
