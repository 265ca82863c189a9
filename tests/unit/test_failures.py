"""What a person sees when the worker stops: the exit code and the condition reason of each kind of failure."""

from __future__ import annotations

from mysqlcapture_worker.cli import EXIT_CONFIG, EXIT_FATAL, EXIT_WOULD_LOSE, failure_of
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
