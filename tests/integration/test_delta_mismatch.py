"""A Delta change log that is not the capture's own (another capture's, or a table put in its place) stops the
worker with one line and exit 4 before anything is written: going on would mix two captures' events, or start a
capture over on top of data it never wrote."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from mysqlcapture_dev.embedded.server import PrivateServer

from tests.support import manifest, run_cli, write_manifest


def _refused(path: Path, uri: Path, capture: str) -> None:
    result = run_cli("run", str(path), "--exit-at-end", "--plain-logs")
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("mysqlcapture: ")]
    assert line == [
        f"mysqlcapture: change log {uri} holds data but no checkpoint of this capture (application transaction "
        f"mysqlcapture-{capture}): it is another capture's, or it was replaced. Point spec.sink.delta.uri at this "
        "capture's own change log, or at an empty location to start the capture over; nothing was written"
    ], result.stderr


def test_a_change_log_that_is_not_the_captures_own_stops_with_one_line_and_writes_nothing(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(39)
    srv.execute("CREATE DATABASE mine", "CREATE TABLE mine.t (id INT PRIMARY KEY)")
    srv.execute(*(f"INSERT INTO mine.t VALUES ({i})" for i in range(20)))
    uri = tmp_path / "changelog"
    sink = {"type": "delta", "delta": {"uri": str(uri)}}
    owner = write_manifest(
        tmp_path / "owner.yaml", manifest("owner", port=srv.port, sink=sink, start={"from": "earliest"})
    )
    first = run_cli("run", str(owner), "--exit-at-end", "--plain-logs")
    assert first.returncode == 0, first.stderr
    version = DeltaTable(str(uri)).version()
    # Another capture pointed at the owner's change log.
    other = write_manifest(tmp_path / "other.yaml", manifest("other", port=srv.port, sink=sink, server_id=9002))
    _refused(other, uri, "other")
    assert DeltaTable(str(uri)).version() == version, "the other capture wrote to the owner's change log"
    # The owner's change log replaced by a table it never wrote.
    shutil.rmtree(uri)
    write_deltalake(str(uri), pa.table({"x": [1, 2, 3]}))
    _refused(owner, uri, "owner")
    assert DeltaTable(str(uri)).version() == 0
    assert DeltaTable(str(uri)).to_pyarrow_table().column_names == ["x"]
    # An empty location: the capture starts over, as a new one.
    shutil.rmtree(uri)
    again = run_cli("run", str(owner), "--exit-at-end", "--plain-logs")
    assert again.returncode == 0, again.stderr
    assert DeltaTable(str(uri)).to_pyarrow_table().num_rows >= 20
