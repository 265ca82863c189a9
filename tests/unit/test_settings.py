"""The worker's settings: every field documented, typed as the spec types it, and built from a manifest."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest
from mysqlcapture_api import load_manifest
from mysqlcapture_api.source import Flavor
from mysqlcapture_api.spec import (
    FailoverMode,
    JsonlSink,
    OnPurged,
    SinkType,
    SnapshotMode,
    StartFrom,
)
from mysqlcapture_worker import settings as settings_module
from mysqlcapture_worker.settings import WorkerSettings, settings_from_capture

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capture-local.yaml"


def _field_docstrings(cls_name: str) -> dict[str, str | None]:
    """Each annotated field of the class `cls_name` in settings.py, with the string literal right under it."""
    tree = ast.parse(inspect.getsource(settings_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    docs: dict[str, str | None] = {}
    for stmt, following in zip(cls.body, [*cls.body[1:], None], strict=True):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            doc = None
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                doc = following.value.value
            docs[stmt.target.id] = doc
    return docs


def test_every_field_has_a_docstring() -> None:
    docs = _field_docstrings("WorkerSettings")
    assert list(docs) == [f.name for f in dataclasses.fields(WorkerSettings)]  # the parse found every field
    assert [name for name, doc in docs.items() if not doc or not doc.strip()] == []


def test_every_defaulted_field_states_its_default() -> None:
    docs = _field_docstrings("WorkerSettings")
    defaulted = [
        f.name
        for f in dataclasses.fields(WorkerSettings)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    # `password` has no default: dataclass syntax needs `field(repr=False)` for it, which is not a default.
    assert [name for name in defaulted if "Default" not in (docs[name] or "")] == []


@pytest.mark.parametrize(
    ("field", "alias"),
    [
        ("flavor", Flavor),
        ("start_from", StartFrom),
        ("sink_type", SinkType),
        ("failover_mode", FailoverMode),
        ("on_purged", OnPurged),
        ("snapshot_mode", SnapshotMode),
    ],
    ids=["flavor", "start_from", "sink_type", "failover_mode", "on_purged", "snapshot_mode"],
)
def test_enum_fields_carry_the_specs_literal(field: str, alias: object) -> None:
    hints = typing.get_type_hints(WorkerSettings)
    assert hints[field] == alias


def test_example_manifest_yields_typed_settings() -> None:
    settings = settings_from_capture(load_manifest(EXAMPLE), env={"MYSQL_PASSWORD": "pw"})
    assert settings == WorkerSettings(
        name="local",
        host="127.0.0.1",
        port=3306,
        user="capture",
        password="pw",
        replica_server_id=4242,
        flavor="auto",
        ssl=None,  # tls mode preferred: PyMySQL's own default, no ssl argument
        ssl_disabled=False,
        connect_timeout=10.0,
        include=("shop.*",),
        exclude=(),
        start_from="earliest",
        start_gtid_set=None,
        start_at=None,
        sink_type="delta",
        delta_uri="./changelog",
        storage_options={},
        jsonl=JsonlSink(),
        flush_max_events=50000,
        flush_max_bytes=64 * 1024 * 1024,
        flush_interval_s=1.0,
        heartbeat_interval_s=10.0,
        heartbeat_db="mysqlcapture",
        failover_enabled=True,
        purge_check_s=15.0,
        failover_mode="auto",
        on_purged="fail",
        snapshot_mode="initial",
        snapshot_chunk_rows=10000,
        metrics_port=9187,
        spill_dir=None,
        password_file=None,  # passwordFrom.env: read once, nothing to read again
    )
    # Exact types, not just equal values: the numbers the spec holds as int become floats here.
    assert type(settings.connect_timeout) is float and type(settings.heartbeat_interval_s) is float
    assert settings.schema_history_uri == "./changelog/_mysqlcapture_schema"
