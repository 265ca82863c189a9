"""The worker's /status document: the model both sides share, its parse, and what the worker serves."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.worker_status import WorkerStatus, WorkerStatusError, parse_worker_status
from mysqlcapture_worker.failover.purge import Headroom
from mysqlcapture_worker.metrics import HealthState, serve_http
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.runtime.state import WorkerState
from prometheus_client import CollectorRegistry

from tests.support import streaming_worker_status

pytestmark = pytest.mark.unit

STREAMING: dict[str, Any] = streaming_worker_status(last_heartbeat=1767225600000)


def test_a_complete_document_parses_to_its_values() -> None:
    status = parse_worker_status(json.dumps(STREAMING))
    assert status.model_dump() == STREAMING
    assert (status.phase, status.binlog_pos, status.lag_seconds) == ("Streaming", 1234, 0.5)


def test_the_json_keys_are_the_snake_case_field_names() -> None:
    """Not the camelCase aliases of the manifest models: /status has always used these keys."""
    assert list(json.loads(parse_worker_status(json.dumps(STREAMING)).model_dump_json())) == list(STREAMING)
    assert list(WorkerStatus.model_fields) == list(STREAMING)


def test_every_field_states_its_meaning() -> None:
    missing = [name for name, field in WorkerStatus.model_fields.items() if not field.description]
    assert missing == []


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in STREAMING.items() if k != key}


@pytest.mark.parametrize(
    ("doc", "problems"),
    [
        # A key left out is not "unknown": a worker that stopped writing it must fail here.
        (_without("purge_headroom_files"), ["purge_headroom_files: Field required"]),
        # Renamed on one side: the old key is missing and the new one unknown.
        (
            {**_without("lag_seconds"), "lag": 0.5},
            ["lag_seconds: Field required", "lag: Extra inputs are not permitted"],
        ),
        # Strict: a number in a string is no binlog position.
        ({**STREAMING, "binlog_pos": "1234"}, ["binlog_pos: Input should be a valid integer"]),
        ({**STREAMING, "binlog_purged": "no"}, ["binlog_purged: Input should be a valid boolean"]),
        ({**STREAMING, "phase": "Running"}, ["phase: Input should be 'Pending', 'Snapshotting', 'Streaming'"]),
        # null is "not known" only where the model allows it.
        ({**STREAMING, "binlog_purged": None}, ["binlog_purged: Input should be a valid boolean"]),
    ],
    ids=["missing-key", "renamed-key", "string-for-int", "string-for-bool", "unknown-phase", "null-for-bool"],
)
def test_a_document_off_the_model_is_refused_naming_each_key(doc: dict[str, Any], problems: list[str]) -> None:
    with pytest.raises(WorkerStatusError) as err:
        parse_worker_status(json.dumps(doc))
    message = str(err.value)
    for problem in problems:
        assert problem in message
    assert isinstance(err.value, ValueError) and "\n" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1, 2]", "(the document): Input should be an object"),
        ("{not json", "(the document): Invalid JSON"),
    ],
    ids=["array", "not-json"],
)
def test_an_answer_that_is_no_object_is_refused(text: str, problem: str) -> None:
    with pytest.raises(WorkerStatusError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_worker_status(text)


@pytest.mark.parametrize(
    ("status", "phase", "error_reason"),
    [
        (WorkerStatus.starting(), "Pending", None),
        (WorkerStatus.failed(reason="AccessDenied", message="denied", retry_seconds=10.0), "Error", "AccessDenied"),
    ],
    ids=["starting", "failed"],
)
def test_the_documents_without_a_running_worker_round_trip(
    status: WorkerStatus, phase: str, error_reason: str | None
) -> None:
    again = parse_worker_status(status.model_dump_json())
    assert again == status
    assert (again.phase, again.error_reason, again.binlog_file, again.failovers) == (phase, error_reason, None, None)


def test_the_worker_state_document_carries_position_headroom_and_failovers() -> None:
    state = WorkerState(
        phase="Streaming",
        position=Position(
            server_id=7,
            coordinate=Coordinate("bin.000002", 4567),
            gtid_set="0-7-3",
            server_identity="mariadb:0-7",
            order_key=12,
            last_heartbeat=1767225600123,
        ),
        failovers=1,
        headroom=Headroom(bytes=100, files=0, seconds=None, purged=False, active=True),
    )
    doc = state.document(lag_seconds=2.5)
    assert doc.model_dump() == {
        **STREAMING,
        "server_id": 7,
        "server_identity": "mariadb:0-7",
        "gtid_set": "0-7-3",
        "binlog_file": "bin.000002",
        "binlog_pos": 4567,
        "order_key": 12,
        "lag_seconds": 2.5,
        "purge_headroom_bytes": 100,
        "purge_headroom_files": 0,
        "reading_active_file": True,
        "last_heartbeat": 1767225600123,
        "failovers": 1,
    }
    assert WorkerState().document(lag_seconds=0.0).binlog_file is None


def test_the_http_server_serves_the_document_with_every_key() -> None:
    health = HealthState()
    server = serve_http(CollectorRegistry(), health, 0, host="127.0.0.1")
    url = f"http://127.0.0.1:{server.server_address[1]}/status"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            starting = json.loads(resp.read())
        health.failed("MissingGrant", "user 'c' lacks RELOAD", 10.0)
        with urllib.request.urlopen(url, timeout=5) as resp:
            failed = resp.read()
    finally:
        server.shutdown()
        server.server_close()
    assert list(starting) == list(WorkerStatus.model_fields) and starting["phase"] == "Pending"
    parsed = parse_worker_status(failed)
    assert (parsed.phase, parsed.error, parsed.error_reason, parsed.retry_seconds) == (
        "Error",
        "user 'c' lacks RELOAD",
        "MissingGrant",
        10.0,
    )
