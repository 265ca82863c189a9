"""The MySQLCapture models and load_manifest: defaults, valid manifests, and errors named by field path."""

from __future__ import annotations

import copy
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api import ManifestError, MySQLCapture, load_manifest, validate_manifest
from mysqlcapture_api.source import PasswordFrom, Source
from mysqlcapture_api.spec import CRON_MESSAGE, Start
from mysqlcapture_worker.settings import settings_from_capture
from pydantic import BaseModel, ValidationError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "capture-local.yaml"
DELETE = object()  # a `changes` value that removes the key


def manifest(changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The smallest valid manifest, with `changes` ({"spec.source.port": 1, ...}) applied by dotted path."""
    doc: dict[str, Any] = {
        "apiVersion": "cdc.mysqlcapture.io/v1alpha1",
        "kind": "MySQLCapture",
        "metadata": {"name": "shop"},
        "spec": {
            "source": {
                "host": "db",
                "user": "capture",
                "passwordFrom": {"env": "MYSQL_PASSWORD"},
                "serverId": 4242,
            },
            "sink": {"delta": {"uri": "/data/changelog"}},
        },
    }
    for path, value in (changes or {}).items():
        *parents, key = path.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            del node[key]
        else:
            node[key] = copy.deepcopy(value)
    return doc


def problems(doc: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(ManifestError) as caught:
        validate_manifest(doc)
    return caught.value.problems


def test_minimal_manifest_gets_every_default() -> None:
    capture = validate_manifest(manifest())
    assert (capture.api_version, capture.kind, capture.metadata.name) == (
        "cdc.mysqlcapture.io/v1alpha1",
        "MySQLCapture",
        "shop",
    )
    assert capture.status is None
    assert capture.spec.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "source": {
            "host": "db",
            "port": 3306,
            "user": "capture",
            "passwordFrom": {"env": "MYSQL_PASSWORD"},
            "tls": {"mode": "preferred"},
            "serverId": 4242,
            "flavor": "auto",
            "connectTimeoutSeconds": 10,
        },
        "tables": {"include": ["*.*"], "exclude": []},
        "columns": {"exclude": [], "truncate": [], "mask": []},
        "rows": [],
        "start": {"from": "earliest"},
        "sink": {"type": "delta", "delta": {"uri": "/data/changelog", "storageOptions": {}}},
        "flush": {"maxEvents": 50000, "maxBytes": 64 * 1024 * 1024, "maxIntervalMs": 1000},
        "heartbeat": {"intervalSeconds": 10, "database": "mysqlcapture"},
        "snapshot": {"mode": "initial", "chunkRows": 10000, "parallelism": 4, "maxBufferedRows": 200000},
        "failover": {"enabled": True, "mode": "auto", "onPurged": "fail"},
        "metrics": {"port": 9187},
        "compaction": {"schedule": "*/15 * * * *", "retentionHours": 168, "sparkConf": {}},
        "paused": False,
        "imagePullSecrets": [],
        "logLevel": "info",
    }


P = pytest.param

VALID = [
    # P(changes to the minimal manifest, expected values by Python attribute path under spec, id=...)
    P({"spec.source.port": 1}, {"source.port": 1}, id="port-lowest"),
    P({"spec.source.port": 65535}, {"source.port": 65535}, id="port-highest"),
    P({"spec.source.serverId": 4294967295}, {"source.server_id": 4294967295}, id="server-id-max"),
    P(
        {"spec.source.passwordFrom": {"file": "/run/secrets/pw"}},
        {"source.password_from.file": "/run/secrets/pw", "source.password_from.env": None},
        id="password-from-file",
    ),
    P(
        {"spec.source.passwordFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
        {"source.password_from.secret_key_ref.name": "db", "source.password_from.secret_key_ref.key": "pw"},
        id="password-from-secret",
    ),
    # A null is what a template renders for an unset value; it means "not set", as on the API server.
    P(
        {"spec.source.passwordFrom": {"env": "P", "file": None}, "spec.source.tls": None},
        {"source.password_from.file": None, "source.tls.mode": "preferred"},
        id="null-is-absent",
    ),
    P(
        {"spec.source.tls": {"mode": "verify-identity", "caFile": "/ca.pem"}},
        {"source.tls.mode": "verify-identity", "source.tls.ca_file": "/ca.pem"},
        id="tls-verify-identity",
    ),
    P(
        {"spec.start": {"from": "gtid", "gtidSet": "0-1-100"}},
        {"start.from_": "gtid", "start.gtid_set": "0-1-100"},
        id="start-gtid",
    ),
    P(
        {"spec.start": {"from": "position", "binlogFile": "mysql-bin.000042", "binlogPosition": 4}},
        {"start.binlog_file": "mysql-bin.000042", "start.binlog_position": 4},
        id="start-position",
    ),
    P({"spec.start.from": "latest"}, {"start.from_": "latest", "start.gtid_set": None}, id="start-latest"),
    # A bracketed dot is part of a name, not the db/table separator.
    P(
        {"spec.tables": {"include": ["shop.*", "shop_?.ord[.]ers", "*.*"], "exclude": ["shop.tmp_*"]}},
        {"tables.include": ("shop.*", "shop_?.ord[.]ers", "*.*"), "tables.exclude": ("shop.tmp_*",)},
        id="table-globs",
    ),
    P({"spec.sink": {"type": "jsonl"}}, {"sink.type": "jsonl", "sink.jsonl": None}, id="jsonl-to-stdout"),
    P(
        {"spec.sink": {"type": "jsonl", "jsonl": {"path": "/tmp/out.jsonl"}}},
        {"sink.jsonl.path": "/tmp/out.jsonl"},
        id="jsonl-to-file",
    ),
    P(
        {"spec.sink.delta": {"uri": "s3://bucket/cl", "storageOptions": {"AWS_REGION": "eu"}}},
        {"sink.delta.uri": "s3://bucket/cl", "sink.delta.storage_options": {"AWS_REGION": "eu"}},
        id="delta-s3-options",
    ),
    P({"spec.heartbeat.intervalSeconds": 0}, {"heartbeat.interval_seconds": 0}, id="heartbeat-disabled"),
    P(
        {"spec.compaction": {"schedule": "@hourly", "sparkConf": {"spark.x": "1"}}},
        {"compaction.schedule": "@hourly", "compaction.spark_conf": {"spark.x": "1"}},
        id="compaction-macro",
    ),
    P(
        {
            "spec.paused": True,
            "spec.logLevel": "debug",
            "spec.workerImage": "w:1",
            "spec.resources": {"requests": {"cpu": "500m"}},
        },
        {
            "paused": True,
            "log_level": "debug",
            "worker_image": "w:1",
            "resources.requests": {"cpu": "500m"},
            "resources.limits": {},
        },
        id="operations",
    ),
    # Objects read back from the API server carry metadata and status the worker does not configure.
    P(
        {
            "metadata.namespace": "cdc",
            "metadata.uid": "u-1",
            "status": {
                "phase": "Streaming",
                "lagSeconds": 1.5,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Up", "lastTransitionTime": "2026-01-02T03:04:05Z"},
                ],
            },
        },
        {"source.host": "db"},
        id="server-side-object",
    ),
]


@pytest.mark.parametrize("changes,expected", VALID)
def test_valid_manifest(changes: dict[str, Any], expected: dict[str, Any]) -> None:
    capture = validate_manifest(manifest(changes))
    for path, value in expected.items():
        node: Any = capture.spec
        for attr in path.split("."):
            node = getattr(node, attr)
        assert node == value, path


TABLE_HINT = (
    "is not a db.table pattern: it needs exactly one '.' outside [...] with a glob on each side, "
    "e.g. 'shop.*' or '*.orders'"
)
DNS_HINT = (
    "is not a DNS-1123 subdomain: use lowercase letters, digits, '-' and '.', start and end with a letter "
    "or digit, at most 253 characters"
)
SPEC_FIELDS = (
    "source, tables, columns, maxwell, rows, start, sink, flush, heartbeat, snapshot, failover, metrics, compaction, "
    "paused, resources, workerImage, serviceAccountName, imagePullSecrets, logLevel"
)
SOURCE_FIELDS = "host, port, user, passwordFrom, tls, serverId, flavor, connectTimeoutSeconds"

INVALID = [
    # P(changes to the minimal manifest, every problem reported in order, id=...)
    P(
        {"spec.source.port": 70000},
        ("spec.source.port: Input should be less than or equal to 65535 (got 70000)",),
        id="port-above-range",
    ),
    P(
        {"spec.source.port": 0},
        ("spec.source.port: Input should be greater than or equal to 1 (got 0)",),
        id="port-zero",
    ),
    # Strict like the API server: a quoted number is not an integer.
    P({"spec.source.port": "3306"}, ("spec.source.port: Input should be a valid integer",), id="port-quoted"),
    P(
        {"spec.source.serverId": 0},
        ("spec.source.serverId: Input should be greater than or equal to 1 (got 0)",),
        id="server-id-zero",
    ),
    P({"spec.source.serverId": DELETE}, ("spec.source.serverId: Field required",), id="server-id-missing"),
    P({"spec.sink.foo": 1}, ("spec.sink.foo: unknown field; allowed: type, delta, jsonl, kafka",), id="unknown-nested"),
    P(
        {"spec.sink": {"type": "kafka"}},
        ("spec.sink.kafka: required when type is kafka: set kafka.bootstrapServers",),
        id="kafka-without-settings",
    ),
    P(
        {
            "spec.sink": {
                "type": "kafka",
                "kafka": {"bootstrapServers": "k:9092", "schemaHistoryUri": "/h", "producerConfig": {"acks": "1"}},
            }
        },
        (
            "spec.sink.kafka.producerConfig: the sink sets transactional.id, enable.idempotence, acks, "
            "isolation.level, bootstrap.servers itself (exactly once, in order): remove them from producerConfig",
        ),
        id="kafka-own-setting",
    ),
    P(
        {
            "spec.sink": {
                "type": "kafka",
                "kafka": {"bootstrapServers": "k:9092", "schemaHistoryUri": "/h", "partitionBy": "column"},
            }
        },
        (
            "spec.sink.kafka.partitionColumns: partitionBy column needs partitionColumns: name the columns whose "
            "values pick the partition",
        ),
        id="kafka-column-without-columns",
    ),
    P(
        {"spec.sink.delta": {"urii": "/x"}},
        (
            "spec.sink.delta.uri: Field required",
            "spec.sink.delta.urii: unknown field (did you mean uri?); allowed: uri, storageOptions",
        ),
        id="misspelt-field",
    ),
    P(
        {"spec.tabels": {}},
        (f"spec.tabels: unknown field (did you mean tables?); allowed: {SPEC_FIELDS}",),
        id="misspelt-section",
    ),
    P(
        {"spec.source.server_id": 5},
        (f"spec.source.server_id: unknown field (did you mean serverId?); allowed: {SOURCE_FIELDS}",),
        id="python-name-in-manifest",
    ),
    P(
        {"spec.source.passwordFrom": {"env": "P", "file": "/pw"}},
        ("spec.source.passwordFrom: set exactly one of env, file, secretKeyRef",),
        id="two-password-sources",
    ),
    P(
        {"spec.source.passwordFrom": {}},
        ("spec.source.passwordFrom: set exactly one of env, file, secretKeyRef",),
        id="no-password-source",
    ),
    P(
        {"spec.source.passwordFrom": {"secretKeyRef": {"name": "db"}}},
        ("spec.source.passwordFrom.secretKeyRef.key: Field required",),
        id="secret-ref-without-key",
    ),
    P(
        {"spec.source.tls.mode": "on"},
        (
            "spec.source.tls.mode: Input should be 'disabled', 'preferred', 'required', 'verify-ca' or "
            "'verify-identity'",
        ),
        id="tls-mode-unknown",
    ),
    P({"spec.start.from": "gtid"}, ("spec.start.gtidSet: required when from is gtid",), id="gtid-without-set"),
    P(
        {"spec.start": {"from": "position", "binlogPosition": 4}},
        ("spec.start.binlogFile: required when from is position",),
        id="position-without-file",
    ),
    # gtidSet would be ignored: refusing it keeps a forgotten `from: gtid` from snapshotting everything.
    P(
        {"spec.start.gtidSet": "0-1-5"},
        ("spec.start.gtidSet: only used when from is gtid: set from: gtid or remove gtidSet",),
        id="gtid-set-with-earliest",
    ),
    P(
        {"spec.start": {"from": "position", "binlogFile": "b.1", "binlogPosition": 3}},
        ("spec.start.binlogPosition: Input should be greater than or equal to 4 (got 3)",),
        id="binlog-position-in-header",
    ),
    P(
        {"spec.start.from": "beginning"},
        ("spec.start.from: Input should be 'earliest', 'latest', 'gtid' or 'position'",),
        id="start-from-unknown",
    ),
    P(
        {"spec.tables.include": ["shop"]},
        (f"spec.tables.include[0]: 'shop' {TABLE_HINT}",),
        id="table-pattern-without-dot",
    ),
    P(
        {"spec.tables.exclude": ["a.b", "shop.orders.x"]},
        (f"spec.tables.exclude[1]: 'shop.orders.x' {TABLE_HINT}",),
        id="table-pattern-two-dots",
    ),
    P(
        {"spec.tables.include": ["shop.[ab"]},
        (f"spec.tables.include[0]: 'shop.[ab' {TABLE_HINT}",),
        id="table-pattern-open-bracket",
    ),
    P(
        {"spec.sink": {"type": "delta"}},
        ("spec.sink.delta: required when type is delta: set delta.uri",),
        id="delta-sink-without-delta",
    ),
    P({"spec.sink": DELETE}, ("spec.sink: Field required",), id="sink-missing"),
    # Strings are never echoed (storageOptions may hold keys); numbers and booleans are.
    P(
        {"spec.sink.delta.storageOptions": {"AWS_ALLOW_HTTP": True}},
        ("spec.sink.delta.storageOptions.AWS_ALLOW_HTTP: Input should be a valid string (got True)",),
        id="storage-option-not-a-string",
    ),
    P({"spec.paused": "yes"}, ("spec.paused: Input should be a valid boolean",), id="paused-as-string"),
    P(
        {"spec.compaction.schedule": "every 5 minutes"},
        ("spec.compaction.schedule: 'every 5 minutes' is " + CRON_MESSAGE,),
        id="bad-cron",
    ),
    P(
        {"spec.compaction.schedule": "99 * * * *"},
        ("spec.compaction.schedule: '99 * * * *' is " + CRON_MESSAGE,),
        id="minute-99",
    ),
    P(
        {"spec.compaction.schedule": "0 0 * 13 *"},
        ("spec.compaction.schedule: '0 0 * 13 *' is " + CRON_MESSAGE,),
        id="month-13",
    ),
    P(
        {"spec.flush.maxBytes": 10},
        ("spec.flush.maxBytes: Input should be greater than or equal to 1024 (got 10)",),
        id="flush-too-small",
    ),
    P({"kind": "MySqlCapture"}, ("kind: Input should be 'MySQLCapture'",), id="bad-kind"),
    P(
        {"apiVersion": "cdc.mysqlcapture.io/v1"},
        ("apiVersion: Input should be 'cdc.mysqlcapture.io/v1alpha1'",),
        id="bad-api-version",
    ),
    P({"metadata.name": "Shop_1"}, (f"metadata.name: 'Shop_1' {DNS_HINT}",), id="bad-name"),
    P({"metadata.name": "a" * 254}, (f"metadata.name: '{'a' * 254}' {DNS_HINT}",), id="name-too-long"),
    P({"metadata": {}}, ("metadata.name: Field required",), id="name-missing"),
    P(
        {"specs": {}},
        ("specs: unknown field (did you mean spec?); allowed: apiVersion, kind, metadata, spec, status",),
        id="unknown-top-level",
    ),
    P(
        {"spec.source.port": -1, "spec.source.flavor": "oracle", "spec.metrics.port": 1e6},
        (
            "spec.source.port: Input should be greater than or equal to 1 (got -1)",
            "spec.source.flavor: Input should be 'auto', 'mysql' or 'mariadb'",
            "spec.metrics.port: Input should be a valid integer (got 1000000.0)",
        ),
        id="every-problem-at-once",
    ),
]


@pytest.mark.parametrize("changes,expected", INVALID)
def test_invalid_manifest_names_each_problem(changes: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert problems(manifest(changes)) == expected


def test_load_manifest_reads_paths_and_text(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "capture.yaml"
    path.write_text(yaml.safe_dump(manifest({"spec.source.port": 3307})))
    assert load_manifest(path).spec.source.port == 3307
    assert load_manifest(str(path)).spec.source.port == 3307
    assert load_manifest(path.read_text()).spec.source.port == 3307


@pytest.mark.parametrize(
    "source,problem",
    [
        ("/nonexistent/capture.yaml", "cannot read the file: No such file or directory"),
        ("spec: [\nx", "not valid YAML: "),
        ("- a list\n- not a mapping\n", "a manifest is a YAML mapping with apiVersion, kind, metadata and spec"),
    ],
    ids=["missing-file", "bad-yaml", "not-a-mapping"],
)
def test_load_manifest_unreadable(source: str, problem: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(source)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(problem)


def test_error_message_lists_the_source_and_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: cdc.mysqlcapture.io/v1alpha1\nkind: MySQLCapture\nmetadata: {name: x}\n"
        "spec:\n  source: {host: db, port: 70000}\n  sink: {type: jsonl}\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert str(caught.value) == (
        f"{path}: invalid MySQLCapture manifest:\n"
        "  spec.source.port: Input should be less than or equal to 65535 (got 70000)\n"
        "  spec.source.user: Field required\n"
        "  spec.source.passwordFrom: Field required\n"
        "  spec.source.serverId: Field required"
    )


def test_yaml_timestamps_are_strings_as_for_kubectl() -> None:
    capture = load_manifest(EXAMPLE.read_text() + "status:\n  lastCompaction: 2026-01-02T03:04:05Z\n")
    assert capture.status is not None and capture.status.last_compaction is not None
    assert capture.status.last_compaction.isoformat() == "2026-01-02T03:04:05+00:00"


def test_example_runs_locally_with_the_worker() -> None:
    capture = load_manifest(EXAMPLE)
    settings = settings_from_capture(capture, env={"MYSQL_PASSWORD": "pw"})
    source = settings.source
    assert (settings.name, source.host, source.port, source.user, source.password) == (
        "local",
        "127.0.0.1",
        3306,
        "capture",
        "pw",
    )
    assert (settings.sink.type, settings.sink.delta_uri, settings.tables.include, settings.start.from_) == (
        "delta",
        "./changelog",
        ("shop.*",),
        "earliest",
    )


def test_python_names_and_rules_outside_a_manifest() -> None:
    source = Source(host="db", user="u", password_from=PasswordFrom(env="P"), server_id=7)
    assert (source.port, source.password_from.env) == (3306, "P")
    assert Start(from_="gtid", gtid_set="0-1-1").gtid_set == "0-1-1"
    with pytest.raises(ValidationError, match="set exactly one of env, file, secretKeyRef"):
        PasswordFrom(env="P", file="/pw")
    with pytest.raises(ValidationError, match="gtidSet: required when from is gtid"):
        Start(from_="gtid")
    with pytest.raises(ValidationError, match="Instance is frozen"):
        source.port = 1


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    seen[model.__name__] = model
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel) and ann.__name__ not in seen:
                _models(ann, seen)
            elif typing.get_origin(ann) in (typing.Union, types.UnionType, tuple, typing.Annotated):
                stack.extend(typing.get_args(ann))
    return seen


@pytest.mark.parametrize("model", _models(MySQLCapture, {}).values(), ids=lambda m: m.__name__)
def test_every_field_is_described_with_its_default(model: type[BaseModel]) -> None:
    for name, field in model.model_fields.items():
        assert field.description, f"{model.__name__}.{name} has no description"
        default = field.default
        if isinstance(default, bool):
            assert f"Default: {str(default).lower()}" in field.description, f"{model.__name__}.{name}"
        elif isinstance(default, int | str) and default != "":
            stated = (f"Default: {default}", f"Default: '{default}'")
            assert any(s in field.description for s in stated), f"{model.__name__}.{name}: {default!r}"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # PyMySQL's default is PREFERRED (TLS whenever the server offers it): disabled must say so explicitly.
        ("disabled", {"ssl_disabled": True}),
        ("preferred", {}),
        ("required", {"ssl": {"check_hostname": False, "verify_mode": False}}),
        ("verify-identity", {"ssl": {"check_hostname": True}}),
    ],
    ids=["disabled", "preferred", "required", "verify-identity"],
)
def test_tls_mode_reaches_the_connection(mode: str, expected: dict[str, Any]) -> None:
    from mysqlcapture_worker.replication.stream import ConnectionSettings

    capture = validate_manifest(manifest({"spec.source.tls": {"mode": mode}}))
    s = settings_from_capture(capture, env={"MYSQL_PASSWORD": "pw"}).source
    kwargs = ConnectionSettings(
        host=s.host, port=s.port, user=s.user, password=s.password, ssl=s.ssl, ssl_disabled=s.ssl_disabled
    ).pymysql_kwargs()
    assert {k: v for k, v in kwargs.items() if k.startswith("ssl")} == expected


def test_maxwell_example_carries_maxwells_options_to_the_worker() -> None:
    capture = load_manifest(REPO / "examples" / "capture-maxwell.yaml")
    settings = settings_from_capture(capture, env={"MYSQL_PASSWORD": "x"})
    jsonl = settings.sink.jsonl
    assert (jsonl.path, jsonl.output_binlog_position, jsonl.output_primary_keys, jsonl.output_ddl) == (
        "-",
        True,
        True,
        True,
    )
    # Maxwell's defaults for what the example leaves out
    assert (jsonl.output_commit_info, jsonl.output_xoffset, jsonl.output_nulls) == (True, True, True)
    assert not (jsonl.output_gtid_position or jsonl.output_server_id or jsonl.output_order_key)


def test_maxwell_output_options_are_checked() -> None:
    with pytest.raises(ManifestError, match=r"spec\.sink\.jsonl\.outputBinlogPositions"):
        validate_manifest(manifest({"spec.sink": {"type": "jsonl", "jsonl": {"outputBinlogPositions": True}}}))
    with pytest.raises(ManifestError, match=r"spec\.sink\.jsonl\.outputDdl"):
        validate_manifest(manifest({"spec.sink": {"type": "jsonl", "jsonl": {"outputDdl": "yes"}}}))
