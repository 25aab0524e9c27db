"""Structured logs to stderr: one `key=value` line per record, which the host captures and tags
with the plugin's name.

    from ctrlhost_sdk import log
    log.info("reconciled", controller="webapp", name="shop")
    # ts=2026-11-22T03:40:00.123Z level=info msg=reconciled controller=webapp name=shop

Thread-safe: each record is written with one write() call under a lock.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
from typing import Any, Mapping

_LEVELS = {"debug": 0, "info": 1, "warning": 2, "error": 3}
_lock = threading.Lock()
_min_level = _LEVELS.get(os.environ.get("CTRLHOST_LOG_LEVEL", "info").lower(), 1)


def set_level(level: str) -> None:
    """Drops records below `level` ("debug", "info", "warning", "error")."""
    global _min_level
    if level not in _LEVELS:
        raise ValueError("unknown log level %r" % (level,))
    _min_level = _LEVELS[level]


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if text == "" or any(c in text for c in ' ="\n\t\\') or not text.isprintable():
        return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


def format_record(level: str, msg: str, fields: Mapping[str, Any]) -> str:
    """The line (without newline) for one record; keys keep the caller's order."""
    now = datetime.datetime.now(datetime.timezone.utc)
    parts = [
        "ts=" + now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (now.microsecond // 1000),
        "level=" + level,
        "msg=" + _quote(msg),
    ]
    parts += ["%s=%s" % (k, _quote(v)) for k, v in fields.items()]
    return " ".join(parts)


def _log(level: str, msg: str, fields: Mapping[str, Any]) -> None:
    if _LEVELS[level] < _min_level:
        return
    line = format_record(level, msg, fields) + "\n"
    with _lock:
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # stderr closed: logging must never take the plugin down


def debug(msg: str, **fields: Any) -> None:
    _log("debug", msg, fields)


def info(msg: str, **fields: Any) -> None:
    _log("info", msg, fields)


def warning(msg: str, **fields: Any) -> None:
    _log("warning", msg, fields)


def error(msg: str, **fields: Any) -> None:
    _log("error", msg, fields)
