"""Maxwell-compatible JSON lines to stdout or a file, so a Maxwell consumer can switch over unchanged."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from mysqlcapture_api.sinks import JsonlSink

from mysqlcapture_worker.changes import Event
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.sinks import SinkMismatch
from mysqlcapture_worker.sinks.maxwell import line_parts


class JsonLinesSink:
    """Writes one Maxwell JSON object per line, with the fields Maxwell's output options (`spec`) ask for.

    For a file, exactly-once comes from a sidecar checkpoint (`<path>.checkpoint`, replaced
    atomically after the lines are fsync'ed) holding the position and the file's length: on start
    the file is truncated back to that length, dropping lines a crash left uncommitted. Stdout
    cannot be rewound, so there the checkpoint lives only for the process's lifetime.
    """

    def __init__(self, spec: JsonlSink) -> None:
        self.path = spec.path
        self.spec = spec
        self._stdout = self.path == "-"
        self._out: IO[bytes] | None = None
        self._last: Position | None = None

    @property
    def _checkpoint_path(self) -> Path:
        return Path(self.path + ".checkpoint")

    def load_checkpoint(self) -> Position | None:
        if self._stdout:
            return self._last
        ckpt = self._checkpoint_path
        if not ckpt.exists():
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb"):
                pass
            return None
        length_line, position_json = ckpt.read_text().split("\n", 1)
        committed = int(length_line)
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            size = None
        if size is None or size < committed:
            what = "is gone" if size is None else f"holds {size:,} bytes"
            raise SinkMismatch(
                f"{self.path} {what}, but its checkpoint {ckpt} says {committed:,} bytes of lines were committed: "
                f"restore the file (the capture then goes on after its last line), or remove {ckpt} to start a new "
                "capture (from spec.start)"
            )
        with open(self.path, "r+b") as fh:
            fh.truncate(committed)  # drops what a crash left after the last commit
        return Position.from_json(position_json)

    def _stream(self) -> IO[bytes]:
        if self._out is None:
            self._out = sys.stdout.buffer if self._stdout else open(self.path, "ab")  # noqa: SIM115
        return self._out

    def commit(self, events: Sequence[Event], position: Position) -> None:
        out = self._stream()
        if events:
            out.writelines(line_parts(events, self.spec))
        out.flush()
        self._last = position
        if self._stdout:
            return
        os.fsync(out.fileno())
        tmp = self._checkpoint_path.with_suffix(".tmp")
        tmp.write_text(f"{out.tell()}\n{position.to_json()}")
        os.replace(tmp, self._checkpoint_path)

    def close(self) -> None:
        if self._out is not None and not self._stdout:
            self._out.close()
        self._out = None
