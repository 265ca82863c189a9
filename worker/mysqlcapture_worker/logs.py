"""Structured JSON log lines carrying the capture's name; secrets are never part of a record."""

from __future__ import annotations

import logging
import sys
import time

import orjson


class JsonFormatter(logging.Formatter):
    def __init__(self, capture: str) -> None:
        super().__init__()
        self.capture = capture

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "capture": self.capture,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out).decode()


def configure_logging(capture: str, level: str = "info", *, json_lines: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter(capture))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [{capture}] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("pymysqlreplication").setLevel(logging.ERROR)
