"""The Kafka producer's start (`sinks.kafka.init_transactions`): a refusal the brokers say passes is asked again
until the timeout, anything else is raised at once (no broker needed: a producer that answers as librdkafka does)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from mysqlcapture_worker.sinks.kafka import init_transactions

pytestmark = pytest.mark.unit


class _Producer:
    def __init__(self, refusals: list[KafkaError]) -> None:
        self.refusals = refusals
        self.calls = 0

    def init_transactions(self, timeout: float) -> None:
        self.calls += 1
        if self.refusals:
            raise KafkaException(self.refusals.pop(0))


def _concurrent() -> KafkaError:
    return KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, "another operation on the transaction", retriable=True)


def test_a_transaction_still_being_ended_is_asked_again() -> None:
    producer = _Producer([_concurrent(), _concurrent()])
    init_transactions(producer, timeout=30)
    assert producer.calls == 3


def test_a_refusal_that_does_not_pass_is_raised_at_once() -> None:
    producer = _Producer([KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "denied", fatal=True)])
    with pytest.raises(KafkaException) as raised:
        init_transactions(producer, timeout=30)
    assert (producer.calls, raised.value.args[0].code()) == (1, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def test_a_refusal_that_lasts_is_raised_at_the_timeout() -> None:
    producer = _Producer([_concurrent() for _ in range(100)])
    started = time.monotonic()
    with pytest.raises(KafkaException) as raised:
        init_transactions(producer, timeout=2)
    assert raised.value.args[0].code() == KafkaError.CONCURRENT_TRANSACTIONS
    assert 1 <= time.monotonic() - started < 10 and 2 <= producer.calls < 10
