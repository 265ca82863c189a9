"""The generated CRD: committed copy up to date, structural, and agreeing with the models on what is valid."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from mysqlcapture_api import ManifestError, validate_manifest
from mysqlcapture_api.crd import build_crd, main, openapi_schema, render_crd_yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "crds" / "cdc.mysqlcapture.io_mysqlcaptures.yaml"
EXAMPLE = REPO / "examples" / "capture-local.yaml"
SCHEMA = openapi_schema()


def test_committed_crd_is_the_generated_one() -> None:
    assert yaml.safe_load(COMMITTED.read_text()) == build_crd()
    assert COMMITTED.read_text() == render_crd_yaml()


def test_check_fails_with_a_diff_when_the_file_drifted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text(render_crd_yaml().replace("default: 3306", "default: 3307"))
    assert main(["--check", str(stale)]) == 1
    err = capsys.readouterr().err
    assert f"{stale} is out of date with api/mysqlcapture_api; run `make crds`" in err
    assert "-                    default: 3307\n+                    default: 3306\n" in err
    assert main(["--check", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read it" in capsys.readouterr().err
    assert main(["--check", str(COMMITTED)]) == 0


def test_crd_names_and_printer_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "mysqlcaptures.cdc.mysqlcapture.io"
    assert crd["spec"]["names"] == {
        "kind": "MySQLCapture",
        "listKind": "MySQLCaptureList",
        "plural": "mysqlcaptures",
        "singular": "mysqlcapture",
        "shortNames": ["mcap"],
        "categories": ["cdc"],
    }
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"], version["subresources"]) == (
        "v1alpha1",
        True,
        True,
        {"status": {}},
    )
    columns = {c["name"]: (c["jsonPath"], c["type"]) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": (".status.phase", "string"),
        "Server": (".status.serverId", "integer"),
        "Position": (".status.binlogFile", "string"),
        "Offset": (".status.binlogPosition", "integer"),
        "GTID": (".status.gtidSet", "string"),
        "Lag": (".status.lagSeconds", "number"),
        "Headroom": (".status.purgeHeadroomBytes", "integer"),
        "Age": (".metadata.creationTimestamp", "date"),
    }
    status = SCHEMA["properties"]["status"]["properties"]
    for path, kind in columns.values():
        if path.startswith(".status."):  # each column shows a status field of its type
            assert status[path.removeprefix(".status.")]["type"] == kind, path


def _nodes(node: dict[str, Any], where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield where, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _nodes(node[key], f"{where}[]")


def test_schema_is_structural() -> None:
    for where, node in _nodes(SCHEMA):
        assert (
            "type" in node or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        ), f"{where or '(root)'} has no type"
        assert not set(node) & {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "const", "nullable"}, where
        assert not ("properties" in node and "additionalProperties" in node), where
        assert node.get("additionalProperties", {}) not in (True, False), where
        if node.get("type") == "object":
            assert "properties" in node or "additionalProperties" in node or where == ".metadata", where
    assert SCHEMA["properties"]["metadata"] == {"type": "object"}
    assert SCHEMA["required"] == ["spec"]


def test_defaults_and_rules_are_well_formed() -> None:
    env = celpy.Environment()
    rules = 0
    for where, node in _nodes(SCHEMA):
        if "default" in node:  # the API server refuses a CRD whose defaults do not validate
            jsonschema.Draft4Validator(_strict(node)).validate(node["default"])
        for rule in node.get("x-kubernetes-validations", ()):
            env.compile(rule["rule"])
            assert rule["message"], where
            if "fieldPath" in rule:  # must name a property of the object the rule sits on
                assert rule["fieldPath"].removeprefix(".") in node["properties"], (where, rule)
            rules += 1
    # passwordFrom's one-of, start's six, sink's delta and kafka (needed) and its three blocks (only with their type),
    # the capture's name, the cron schedule, the two
    # table globs, the two resource quantities, the Kafka sink's partitionColumns, ddlTopic and producerConfig, and
    # spec.columns': keyFrom's one-of, three rules' non-empty columns and four column globs, and spec.rows': a row
    # rule's table glob and its exclude/include one-of
    assert rules == 35


# The API server's handling of a create request, as far as validity goes: prune nulls (no field is
# nullable), apply defaults, check the OpenAPI schema with unknown fields rejected (kubectl's default
# strict field validation), then evaluate the CEL rules on the defaulted object.
def _strict(node: dict[str, Any]) -> dict[str, Any]:
    node = copy.deepcopy(node)
    for _, sub in _nodes(node):
        if "properties" in sub:
            sub["additionalProperties"] = False
    return node


def _prune_and_default(value: Any, node: dict[str, Any]) -> Any:
    if not isinstance(value, dict) or "properties" not in node:
        if isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
            return {k: v for k, v in value.items() if v is not None}
        if isinstance(value, list) and "items" in node:
            return [_prune_and_default(item, node["items"]) for item in value]
        return value
    out = {k: v for k, v in value.items() if v is not None}
    for name, sub in node["properties"].items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = _prune_and_default(out[name], sub)
    return out


def _rules_hold(value: Any, node: dict[str, Any], env: celpy.Environment) -> bool:
    for rule in node.get("x-kubernetes-validations", ()):
        try:
            if not env.program(env.compile(rule["rule"])).evaluate({"self": celpy.json_to_cel(value)}):
                return False
        except celpy.CELEvalError:  # the API server reports an evaluation error as a failed rule
            return False
    if isinstance(value, dict) and "properties" in node:
        props = node["properties"]
        return all(_rules_hold(value[k], props[k], env) for k in props if k in value)
    if isinstance(value, list) and "items" in node:
        return all(_rules_hold(item, node["items"], env) for item in value)
    if isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
        return all(_rules_hold(item, node["additionalProperties"], env) for item in value.values())
    return True


def api_server_accepts(doc: dict[str, Any]) -> bool:
    obj = _prune_and_default(doc, SCHEMA)
    if not jsonschema.Draft4Validator(_strict(SCHEMA)).is_valid(obj):
        return False
    return _rules_hold(obj, SCHEMA, celpy.Environment())


def models_accept(doc: dict[str, Any]) -> bool:
    try:
        validate_manifest(doc)
    except ManifestError:
        return False
    return True


def sample(spec_changes: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for path, value in (spec_changes or {}).items():
        *parents, key = path.split(".")
        node = doc["spec"]
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    doc.update(top)
    return doc


P = pytest.param
SAMPLES = [
    # P(manifest, whether it is valid, id=...): each kind of constraint once valid and once not.
    P(sample(), True, id="example"),
    P(sample(metadata={"name": "a" * 41}), True, id="name-41"),
    P(sample(metadata={"name": "a" * 42}), False, id="name-42-too-long-for-its-cronjob"),
    P(sample(metadata={"name": "orders.v2"}), False, id="name-with-dot"),
    P(sample(metadata={"name": "1orders"}), False, id="name-starting-with-digit"),
    P(sample({"source.port": 65535}), True, id="port-max"),
    P(sample({"source.port": 65536}), False, id="port-over-max"),
    P(sample({"source.port": "3306"}), False, id="port-quoted"),
    P(sample({"source.host": ""}), False, id="host-empty"),
    P(sample({"source.flavor": "mariadb"}), True, id="flavor-enum"),
    P(sample({"source.flavor": "percona"}), False, id="flavor-not-in-enum"),
    P(sample({"source.tls": None, "source.passwordFrom": {"file": "/pw", "env": None}}), True, id="nulls-pruned"),
    P(sample({"source.passwordFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}), True, id="password-secret"),
    P(sample({"source.passwordFrom": {"env": "P", "file": "/pw"}}), False, id="password-two-sources"),
    P(sample({"source.passwordFrom": {}}), False, id="password-no-source"),
    P(sample({"source.passwordFrom": {"vault": "x"}}), False, id="password-unknown-source"),
    P(sample({"source.serverId": 4294967296}), False, id="server-id-over-max"),
    P(sample({"source.extra": 1}), False, id="unknown-field"),
    P(sample({"tables.include": ["shop.ord[.]ers", "*.*"]}), True, id="table-bracketed-dot"),
    P(sample({"tables.include": ["shop"]}), False, id="table-no-dot"),
    P(sample({"tables.exclude": ["a.b.c"]}), False, id="table-two-dots"),
    P(sample({"tables.include": ["a.[b"]}), False, id="table-open-bracket"),
    P(sample({"start": {"from": "gtid", "gtidSet": "0-1-9"}}), True, id="start-gtid"),
    P(sample({"start": {"from": "gtid"}}), False, id="start-gtid-without-set"),
    P(sample({"start": {"gtidSet": "0-1-9"}}), False, id="start-set-without-gtid"),
    P(
        sample({"start": {"from": "position", "binlogFile": "b.000001", "binlogPosition": 4}}),
        True,
        id="start-position",
    ),
    P(sample({"start": {"from": "position", "binlogFile": "b.000001"}}), False, id="start-position-no-offset"),
    P(sample({"start": {"from": "latest", "binlogPosition": 4}}), False, id="start-offset-without-position"),
    P(sample({"sink": {"type": "jsonl"}}), True, id="sink-jsonl"),
    P(sample({"sink": {"type": "delta"}}), False, id="sink-delta-without-uri"),
    P(sample({"sink": {"type": "delta", "delta": {}}}), False, id="sink-delta-empty"),
    P(sample({"sink": {"type": "jsonl", "delta": {"uri": "./changelog"}}}), False, id="sink-jsonl-leftover-delta"),
    P(sample({"sink": {"type": "delta", "delta": {"uri": "d"}, "jsonl": {"path": "-"}}}), False, id="sink-two-blocks"),
    P(sample({"sink.delta.storageOptions": {"AWS_REGION": "eu-west-1"}}), True, id="map-of-strings"),
    P(sample({"sink.delta.storageOptions": {"AWS_ALLOW_HTTP": True}}), False, id="map-value-not-string"),
    P(sample({"flush.maxBytes": 1023}), False, id="flush-under-min"),
    P(sample({"heartbeat.database": "x" * 65}), False, id="heartbeat-db-too-long"),
    P(sample({"compaction.schedule": "0 * * * *"}), True, id="cron-five-fields"),
    P(sample({"compaction.schedule": "hourly"}), False, id="cron-garbage"),
    P(sample({"compaction.schedule": "99 * * * *"}), False, id="cron-minute-99"),
    P(sample({"compaction.schedule": "0 24 * * *"}), False, id="cron-hour-24"),
    P(sample({"compaction.schedule": "*/5 1-3,22 1 jan-mar MON-FRI"}), True, id="cron-ranges-lists-names"),
    P(sample({"compaction.schedule": "@daily"}), True, id="cron-macro"),
    P(sample({"paused": "true"}), False, id="bool-as-string"),
    P(sample({"resources": {"limits": {"memory": "2Gi"}}}), True, id="resources"),
    P(sample({"resources": {"limits": {"cpu": 1}}}), False, id="resources-unquoted-number"),
    P(sample({"resources": {"limits": {"memory": "lots"}}}), False, id="resources-not-a-quantity"),
    P(sample({"logLevel": "trace"}), False, id="log-level-not-in-enum"),
    P(sample(status={"phase": "Streaming", "lagSeconds": 0.5, "purgeHeadroomBytes": -10}), True, id="status"),
    P(sample(status={"phase": "Running"}), False, id="status-phase-not-in-enum"),
    P(sample(status={"snapshotPercent": 101}), False, id="status-percent-over-100"),
    P(
        sample(
            status={
                "conditions": [
                    {"type": "Ready", "status": "Maybe", "reason": "X", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            }
        ),
        False,
        id="condition-status-not-in-enum",
    ),
    P(
        sample(
            status={"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        ),
        False,
        id="condition-without-reason",
    ),
]


@pytest.mark.parametrize("doc,valid", SAMPLES)
def test_api_server_and_models_agree(doc: dict[str, Any], valid: bool) -> None:
    assert (api_server_accepts(doc), models_accept(doc)) == (valid, valid)


def test_api_server_defaults_are_the_models_defaults() -> None:
    doc = sample()
    defaulted = _prune_and_default(doc, SCHEMA)
    capture = validate_manifest(doc)
    assert defaulted["spec"] == capture.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
