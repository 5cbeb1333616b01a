"""Where the library's log records go: readable lines on stderr for a person at the CLI, one
JSON object per line for a server whose logs a collector reads.

The library logs under the `tortus_pg` logger and the OpenAI SDK under `openai` (retries and
back-off at INFO, what a caller should know at WARNING). Neither configures logging itself;
the CLI does, once, from `--log-level` / `--verbose`, and `serve` writes JSON lines.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.logging import RichHandler

from tortus_pg.errors import InvalidInput

LEVELS = ("debug", "info", "warning", "error")
_HANDLER = "tortus_pg"  # the name of the handler `configure` installs
# The library's own, and the OpenAI SDK's (it logs its retries and back-off at INFO).
LOGGERS = ("tortus_pg", "openai")
# What a LogRecord carries of its own, and uvicorn's terminal-coloured copy of the message;
# anything else a call passed in `extra` is the event's data.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}


class LogFormat(StrEnum):
    TEXT = "text"  # rich lines for a terminal
    JSON = "json"  # one object per line: time, level, logger, message and the record's extras


class JsonLines(logging.Formatter):
    """A record as one JSON object: time (UTC, ISO 8601), level, logger, message, the fields it
    was given in `extra`, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        event = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        event.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to whatever sys.stderr is when a record comes (a test or a
    server may replace it after logging is configured)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def level_of(name: str) -> int:
    """The logging level called `name` (one of LEVELS, any case); InvalidInput otherwise."""
    if name.lower() not in LEVELS:
        raise InvalidInput(f"unknown log level {name!r}: use one of {', '.join(LEVELS)}")
    level: int = getattr(logging, name.upper())
    return level


def configure(level: str = "warning", fmt: LogFormat = LogFormat.TEXT) -> None:
    """Send the records of LOGGERS at `level` and above to stderr, as `fmt`; calling it again
    replaces the handler it installed, so the last call decides."""
    handler: logging.Handler = StderrHandler() if fmt is LogFormat.JSON else RichHandler(
        console=Console(stderr=True), show_path=False, markup=False)
    if fmt is LogFormat.JSON:
        handler.setFormatter(JsonLines())
    handler.set_name(_HANDLER)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level_of(level))
        for old in [h for h in logger.handlers if h.get_name() == _HANDLER]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False


def server_config(level: str, fmt: LogFormat) -> dict[str, Any] | None:
    """uvicorn's `log_config` for `serve`: with JSON, its error and access logs and the
    `tortus_pg` logger (at `level`) all as JSON lines on stderr, in every worker process; with
    text, None (uvicorn's own lines)."""
    if fmt is not LogFormat.JSON:
        return None
    handler = {"handlers": ["json"], "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonLines"}},
        "handlers": {"json": {"class": f"{__name__}.StderrHandler", "formatter": "json"}},
        "loggers": {
            "uvicorn": {**handler, "level": "INFO"},
            "uvicorn.error": {**handler, "level": "INFO"},
            "uvicorn.access": {**handler, "level": "INFO"},
            **{name: {**handler, "level": level.upper()} for name in LOGGERS},
        },
    }
