"""What a person sees when the worker stops: the exit code and the condition reason of each kind of failure."""

from __future__ import annotations

import pytest
from mysqlcapture_worker.commands import EXIT_CONFIG, EXIT_FATAL, EXIT_WOULD_LOSE, failure_of
from mysqlcapture_worker.settings import SettingsError
from mysqlcapture_worker.sinks import SinkError, SinkMismatch


def test_a_sink_failure_keeps_its_line_and_names_its_condition() -> None:
    fenced = failure_of(SinkError("another worker of capture shop took over", "ProducerFenced"))
    assert (fenced.code, fenced.reason, fenced.line) == (
        EXIT_FATAL,
        "ProducerFenced",
        "another worker of capture shop took over",
    )
    assert failure_of(SinkError("the Kafka commit failed")).reason == "SinkFailed"
    gone = failure_of(SinkMismatch("out.jsonl is gone, but its checkpoint says 10 bytes"))
    assert (gone.code, gone.reason) == (EXIT_WOULD_LOSE, "SinkInconsistent")
    missing = failure_of(SettingsError("spec.sink.kafka.sasl.passwordFrom.env: environment variable P is not set"))
    assert missing.code == EXIT_CONFIG and missing.line.startswith("spec.sink.kafka.sasl.passwordFrom")


def test_a_secret_that_cannot_be_read_names_which_in_its_reason() -> None:
    from mysqlcapture_api.sinks import KafkaSink
    from mysqlcapture_api.source import SecretFrom
    from mysqlcapture_worker.settings import kafka_security, read_column_key, read_password

    missing = SecretFrom.model_validate({"env": "NOT_SET_HERE"})

    def kafka(**more: object) -> KafkaSink:
        return KafkaSink.model_validate({"bootstrapServers": "k:9093", "schemaHistoryUri": "/h", **more})

    sasl = {"mechanism": "PLAIN", "username": "cdc", "passwordFrom": {"env": "NOT_SET_HERE"}}
    found = []
    for read in (
        lambda: read_password(missing, {}),
        lambda: read_column_key(missing, {}),
        lambda: read_column_key(SecretFrom.model_validate({"env": "EMPTY"}), {"EMPTY": ""}),
        lambda: kafka_security(kafka(tls={"caFrom": {"env": "NOT_SET_HERE"}}), {}),
        lambda: kafka_security(kafka(tls={"caFrom": {"env": "CA"}}), {"CA": "not a certificate"}),
        lambda: kafka_security(kafka(sasl=sasl), {}),
    ):
        with pytest.raises(SettingsError) as raised:
            read()
        failure = failure_of(raised.value)
        assert failure.code == EXIT_CONFIG and failure.line == str(raised.value)
        found.append(failure.reason)
    assert found == [
        "PasswordNotFound",
        "ColumnKeyNotFound",
        "ColumnKeyNotFound",
        "KafkaCaNotFound",
        "KafkaCaNotFound",
        "KafkaPasswordNotFound",
    ]
