"""hclog-JSON logging for Python's :mod:`logging`, on stderr.

go-plugin hosts (and tether hosts) read each stderr line of a plugin as an hclog JSON object:
``@level`` (trace|debug|info|warn|error), ``@message``, ``@timestamp`` with exactly six
fractional digits, ``@module``, and any other keys as fields. Lines that are not JSON end up at
debug level on the host, so a plugin should log through :class:`HclogHandler`.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import IO, Any

# Attributes every LogRecord has; anything else on a record came from `extra=` and is a field.
_RECORD_ATTRIBUTES = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime", "taskName"}
)


def hclog_level(levelno: int) -> str:
    """The hclog level name for a :mod:`logging` level (below DEBUG is ``trace``)."""
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warn"
    if levelno >= logging.INFO:
        return "info"
    if levelno >= logging.DEBUG:
        return "debug"
    return "trace"


def hclog_timestamp(created: float) -> str:
    """``created`` (seconds since the epoch) as hclog writes it: local time, microseconds, and
    the UTC offset (``Z`` for UTC), e.g. ``2026-11-30T22:14:09.123456+01:00``."""
    moment = datetime.datetime.fromtimestamp(created).astimezone()
    text = moment.isoformat(timespec="microseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class HclogFormatter(logging.Formatter):
    """Formats a record as one line of hclog JSON.

    ``extra={...}`` keys become fields; a logger's name other than ``root`` becomes
    ``@module``; an exception becomes the ``error`` field (its traceback text).
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "@level": hclog_level(record.levelno),
            "@message": record.getMessage(),
            "@timestamp": hclog_timestamp(record.created),
        }
        if record.name and record.name != "root":
            entry["@module"] = record.name
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["error"] = record.exc_text
        # One line per record: json.dumps escapes newlines inside strings.
        return json.dumps(entry, default=str, ensure_ascii=False)


class HclogHandler(logging.StreamHandler):
    """A stream handler writing hclog JSON lines, by default to the process's real stderr
    (``sys.__stderr__``, which the host reads even while ``sys.stderr`` is relayed over
    ``GRPCStdio``)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream if stream is not None else (sys.__stderr__ or sys.stderr))
        self.setFormatter(HclogFormatter())


def install_logging(level: int = logging.INFO) -> HclogHandler | None:
    """Sends the root logger's records to the host as hclog JSON, at ``level`` and above —
    unless the root logger already has handlers (the author's choice wins). Returns the handler
    it installed, if any."""
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = HclogHandler()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
