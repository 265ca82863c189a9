"""The worker's settings: every field documented, typed as the spec types it, and built from a manifest."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest
from mysqlcapture_api import load_manifest
from mysqlcapture_api.sinks import JsonlSink, KafkaSink, SinkType
from mysqlcapture_api.source import Flavor
from mysqlcapture_api.spec import FailoverMode, OnPurged, SnapshotMode, StartFrom
from mysqlcapture_worker import settings as settings_module
from mysqlcapture_worker.settings import (
    FailoverSettings,
    FlushSettings,
    HeartbeatSettings,
    MetricsSettings,
    SinkSettings,
    SnapshotSettings,
    SourceSettings,
    StartSettings,
    TablesSettings,
    WorkerSettings,
    settings_from_capture,
)

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


def _groups() -> list[type]:
    """WorkerSettings's groups, as its field types name them (so a new group is covered without listing it)."""
    hints = typing.get_type_hints(WorkerSettings)
    return [hints[f.name] for f in dataclasses.fields(WorkerSettings) if dataclasses.is_dataclass(hints[f.name])]


SETTINGS_CLASSES = [WorkerSettings, *_groups()]


def test_every_spec_section_has_its_group() -> None:
    # The tests below cover the classes _groups() finds: this pins that it finds every group, in spec order.
    assert _groups() == [
        SourceSettings,
        TablesSettings,
        StartSettings,
        SinkSettings,
        FlushSettings,
        HeartbeatSettings,
        FailoverSettings,
        SnapshotSettings,
        MetricsSettings,
    ]


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_every_field_has_a_docstring(cls: type) -> None:
    docs = _field_docstrings(cls.__name__)
    assert list(docs) == [f.name for f in dataclasses.fields(cls)]  # the parse found every field
    assert [name for name, doc in docs.items() if not doc or not doc.strip()] == []


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_every_defaulted_field_states_its_default(cls: type) -> None:
    docs = _field_docstrings(cls.__name__)
    defaulted = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    # `password` has no default: dataclass syntax needs `field(repr=False)` for it, which is not a default.
    assert [name for name in defaulted if "Default" not in (docs[name] or "")] == []


@pytest.mark.parametrize(
    ("cls", "field", "alias"),
    [
        (SourceSettings, "flavor", Flavor),
        (StartSettings, "from_", StartFrom),
        (SinkSettings, "type", SinkType),
        (FailoverSettings, "mode", FailoverMode),
        (FailoverSettings, "on_purged", OnPurged),
        (SnapshotSettings, "mode", SnapshotMode),
    ],
    ids=["source.flavor", "start.from_", "sink.type", "failover.mode", "failover.on_purged", "snapshot.mode"],
)
def test_enum_fields_carry_the_specs_literal(cls: type, field: str, alias: object) -> None:
    hints = typing.get_type_hints(cls)
    assert hints[field] == alias


def test_example_manifest_yields_typed_settings() -> None:
    settings = settings_from_capture(load_manifest(EXAMPLE), env={"MYSQL_PASSWORD": "pw"})
    assert settings == WorkerSettings(
        name="local",
        source=SourceSettings(
            host="127.0.0.1",
            port=3306,
            user="capture",
            password="pw",
            replica_server_id=4242,
            flavor="auto",
            ssl=None,  # tls mode preferred: PyMySQL's own default, no ssl argument
            ssl_disabled=False,
            connect_timeout=10.0,
            password_file=None,  # passwordFrom.env: read once, nothing to read again
        ),
        tables=TablesSettings(include=("shop.*",), exclude=()),
        start=StartSettings(from_="earliest", gtid_set=None, at=None),
        sink=SinkSettings(type="delta", delta_uri="./changelog", storage_options={}, jsonl=JsonlSink()),
        flush=FlushSettings(max_events=50000, max_bytes=64 * 1024 * 1024, interval_s=1.0),
        heartbeat=HeartbeatSettings(interval_s=10.0, database="mysqlcapture"),
        failover=FailoverSettings(enabled=True, mode="auto", on_purged="fail", purge_check_s=15.0),
        snapshot=SnapshotSettings(mode="initial", chunk_rows=10000),
        metrics=MetricsSettings(port=9187),
        spill_dir=None,
    )
    # Exact types, not just equal values: the numbers the spec holds as int become floats here.
    assert type(settings.source.connect_timeout) is float and type(settings.heartbeat.interval_s) is float
    assert type(settings.flush.interval_s) is float
    assert settings.sink.schema_history_uri == "./changelog/_mysqlcapture_schema"


def test_the_column_hash_key_is_read_from_env_file_or_the_mounted_secret_and_a_missing_one_says_where(
    tmp_path: Path,
) -> None:
    from mysqlcapture_api.columns import KeyFrom
    from mysqlcapture_worker.settings import SettingsError, read_column_key

    key_file = tmp_path / "key"
    key_file.write_text("s3cret\n")
    assert read_column_key(KeyFrom(env="K"), {"K": "abc"}) == b"abc"
    assert read_column_key(KeyFrom(file=str(key_file)), {}) == b"s3cret"
    secret = KeyFrom.model_validate({"secretKeyRef": {"name": "mask", "key": "k"}})
    assert read_column_key(secret, {"MYSQLCAPTURE_COLUMN_KEY_FILE": str(key_file)}) == b"s3cret"
    with pytest.raises(SettingsError, match=r"^spec\.columns\.hash\.keyFrom\.env: environment variable K is not set"):
        read_column_key(KeyFrom(env="K"), {})
    with pytest.raises(SettingsError, match=r"Secret 'mask' with key 'k' is not in the capture's namespace"):
        read_column_key(secret, {"MYSQLCAPTURE_COLUMN_KEY_FILE": str(tmp_path / "absent")})
    key_file.write_text("\n")
    with pytest.raises(SettingsError, match="is empty"):
        read_column_key(KeyFrom(file=str(key_file)), {})


CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"


def test_kafka_tls_and_sasl_become_librdkafka_settings_with_the_password_and_ca_read(tmp_path: Path) -> None:
    from mysqlcapture_worker.settings import SettingsError, kafka_security

    def sink(**more: object) -> KafkaSink:
        return KafkaSink.model_validate({"bootstrapServers": "k:9093", "schemaHistoryUri": "/h", **more})

    assert kafka_security(sink()) == {"security.protocol": "PLAINTEXT"}
    assert kafka_security(None) == {}
    tls = kafka_security(sink(tls={}))
    assert tls == {"security.protocol": "SSL", "enable.ssl.certificate.verification": "true",
                   "ssl.endpoint.identification.algorithm": "https"}  # fmt: skip
    sasl = {"mechanism": "SCRAM-SHA-512", "username": "cdc", "passwordFrom": {"env": "KP"}}
    assert kafka_security(sink(sasl=sasl), {"KP": "pw"}) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "cdc",
        "sasl.password": "pw",
    }
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(CA + "\n")
    mounted = {"secretKeyRef": {"name": "kafka-user", "key": "password"}}
    both = sink(
        tls={"caFrom": {"secretKeyRef": {"name": "kafka-ca", "key": "ca.crt"}}, "verifyHostname": False},
        sasl={**sasl, "passwordFrom": mounted},
    )
    pw_file = tmp_path / "pw"
    pw_file.write_text("s3cret\n")
    env = {"MYSQLCAPTURE_KAFKA_CA_FILE": str(ca_file), "MYSQLCAPTURE_KAFKA_PASSWORD_FILE": str(pw_file)}
    got = kafka_security(both, env)
    assert got["security.protocol"] == "SASL_SSL" and got["ssl.ca.pem"] == CA and got["sasl.password"] == "s3cret"
    assert got["ssl.endpoint.identification.algorithm"] == "none"
    # A local run gives the values themselves; a missing one names the field and the variable.
    local = {"MYSQLCAPTURE_KAFKA_CA": CA, "MYSQLCAPTURE_KAFKA_PASSWORD": "x"}
    assert kafka_security(both, local)["sasl.password"] == "x"
    unset = r"^spec\.sink\.kafka\.tls\.caFrom\.secretKeyRef \(kafka-ca/ca\.crt\).*MYSQLCAPTURE_KAFKA_CA"
    with pytest.raises(SettingsError, match=unset):
        kafka_security(both, {})
    with pytest.raises(SettingsError, match=r"^spec\.sink\.kafka\.sasl\.passwordFrom\.env: environment variable KP"):
        kafka_security(sink(sasl=sasl), {})
    with pytest.raises(SettingsError, match=r"^spec\.sink\.kafka\.tls\.caFrom: .*not a PEM certificate bundle"):
        kafka_security(sink(tls={"caFrom": {"env": "CA"}}), {"CA": "hello"})
    # The password never shows in the settings' text.
    loaded = settings_module.SinkSettings(type="kafka", kafka=both, kafka_security=got)
    assert "s3cret" not in repr(loaded)


def test_kafka_producer_config_keeps_to_what_has_no_field_and_dead_letters_need_a_topic() -> None:
    from pydantic import ValidationError

    base = {"bootstrapServers": "k:9093", "schemaHistoryUri": "/h"}
    for key in ("sasl.password", "security.protocol", "ssl.ca.location", "message.max.bytes"):
        with pytest.raises(ValidationError, match="has a field of its own"):
            KafkaSink.model_validate({**base, "producerConfig": {key: "x"}})
    with pytest.raises(ValidationError, match="deadLetter needs deadLetterTopic"):
        KafkaSink.model_validate({**base, "oversized": "deadLetter"})
    ok = KafkaSink.model_validate({**base, "oversized": "deadLetter", "deadLetterTopic": "dlq",
                                   "producerConfig": {"compression.type": "zstd"}})  # fmt: skip
    assert ok.max_message_bytes == 1000000 and ok.dead_letter_topic == "dlq"
