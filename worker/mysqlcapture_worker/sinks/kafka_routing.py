"""Where a change event goes on Kafka, as Maxwell 1.44 sends it: its topic, its message key and its partition.

- Topic: a row's is `topic` with %{database}, %{table} and %{type} replaced by the event's; a DDL event's is
  `ddlTopic` (default: `topic`) as written.
- Key: `hash` (`{"database":"shop","table":"orders","pk.id":1}`, key columns lowercased, values as in `data`; a table
  without a primary key gets a random `_uuid`) or `array` (`["shop","orders",[{"id":1}]]`); a DDL event's key is a
  bare random UUID.
- Partition: `abs(hash(s) % partitions)` (Java's `%`) of a string chosen by `partitionBy`, hashed by Java's
  String.hashCode or by MurmurHash3 (x86, 32 bits, seed 25342, over the UTF-8 bytes).
"""

from __future__ import annotations

import json
import random
import string
import uuid
from dataclasses import dataclass

from mysqlcapture_api.javatext import jackson_string
from mysqlcapture_api.sinks import KafkaSink

from mysqlcapture_worker.changes import ChangeEvent, RowBatch
from mysqlcapture_worker.sinks.maxwell import raw_members

_DECODER = json.JSONDecoder()
MURMUR_SEED = 25342


def java_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def murmur3(data: bytes, seed: int = MURMUR_SEED) -> int:
    """MurmurHash3 x86 32-bit of `data`, as a signed int (Guava's and Maxwell's)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[whole:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def partition_of(text: str, partitions: int, hashing: str) -> int:
    """Maxwell's `Math.abs(hash % partitions)`: Java's `%` keeps the hash's sign, so this is |hash| mod n."""
    h = java_hash(text) if hashing == "default" else murmur3(text.encode())
    return abs(h) % partitions


def json_values(array: str) -> list[str]:
    """The members of a rendered JSON array, each as its text."""
    out: list[str] = []
    i = array.index("[") + 1
    while True:
        while array[i] in " \t\n\r,":
            i += 1
        if array[i] == "]":
            return out
        _, end = _DECODER.raw_decode(array, i)
        out.append(array[i:end])
        i = end


def _java_text(value: str) -> str:
    """A rendered value as Java's toString gives it in Maxwell's row map: a string's own text, a number's text as
    rendered, a SET's list as java.util.List prints it (`[a, c]`). (A JSON column's is Maxwell's RawJSONString, whose
    toString is its identity hash, different in every Maxwell process: a JSON array is printed as a list here.)"""
    if value.startswith('"'):
        return json.loads(value)
    if value.startswith("["):
        return "[" + ", ".join(_java_text(member) for member in json_values(value)) + "]"
    return value


def _random_text() -> str:
    return "".join(random.choices(string.ascii_letters + string.digits, k=10))


@dataclass(frozen=True)
class Router:
    """The topic, key and partition of each event, for one Kafka sink's settings."""

    spec: KafkaSink

    def topic(self, e: ChangeEvent) -> str:
        if e.sql is not None or e.type == "table-truncate":
            return self.spec.ddl_topic or self.spec.topic
        return self.row_topic(e.database, e.table, e.type)

    def row_topic(self, database: str, table: str | None, kind: str) -> str:
        text = self.spec.topic
        if "%{" not in text:
            return text
        for name, value in (("database", database), ("table", table or ""), ("type", kind)):
            text = text.replace("%{" + name + "}", value)
        return text

    def key(self, e: ChangeEvent) -> bytes:
        if e.sql is not None or e.type == "table-truncate":
            return str(uuid.uuid4()).encode()
        names = [n.lower() for n in e.pk_columns] if e.pk_json is not None else []
        values = json_values(e.pk_json) if e.pk_json is not None else []
        head = [jackson_string(e.database), jackson_string(e.table or "")]
        if self.spec.key_format == "array":
            members = b",".join(
                b"{" + jackson_string(n) + b":" + v.encode() + b"}" for n, v in zip(names, values, strict=True)
            )
            return b"[" + head[0] + b"," + head[1] + b",[" + members + b"]]"
        fields = [b'"database":' + head[0], b'"table":' + head[1]]
        if names:
            fields += [jackson_string("pk." + n) + b":" + v.encode() for n, v in zip(names, values, strict=True)]
        else:
            fields.append(b'"_uuid":' + jackson_string(str(uuid.uuid4())))
        return b"{" + b",".join(fields) + b"}"

    def _by(self, how: str, e: ChangeEvent | RowBatch) -> str:
        if how == "table":
            return e.table if e.table is not None else e.database
        if how == "primaryKey":
            if e.pk_json is None:
                return e.database + (e.table or "")
            found = [_java_text(v) for v in json_values(e.pk_json) if v != "null"]
            return "".join(found) if found else "None"
        if how == "transactionId":
            return "null" if e.xid is None else str(e.xid)
        if how == "threadId":
            return "null" if e.thread_id is None else str(e.thread_id)
        if how == "random":
            return _random_text()
        return e.database

    def partition_text(self, e: ChangeEvent) -> str:
        """The string whose hash picks the event's partition."""
        how = self.spec.partition_by
        if e.sql is not None or e.type == "table-truncate":
            return self._by("table" if how == "table" else "database", e)
        if how == "column":
            values = _members(e.data_json or "{}")
            found = "".join(
                _java_text(values[c]) for c in self.spec.partition_columns if values.get(c, "null") != "null"
            )
            return found or self._by(self.spec.partition_by_fallback, e)  # Maxwell's: empty values fall back too
        return self._by(how, e)

    def partition(self, e: ChangeEvent, partitions: int) -> int:
        return partition_of(self.partition_text(e), partitions, self.spec.partition_hash)

    def batch_route(self, b: RowBatch, partitions: int) -> tuple[bytes, bytes, int, int] | None:
        """How a batch's rows are keyed and partitioned a batch at a time, by the compiled renderer
        (`mysqlcapture_native.maxwell_rows`): (key head, key tail, partition, hashed over). Each row's key is the
        head, its one key value's text and the tail; its partition is what the batch's rows share (hashed over 0)
        or the hash of that key value (hashed over `partitions`). None: row by row (`key`, `partition`)."""
        how = self.spec.partition_by
        if how in ("column", "random") or not b.keyed or len(b.pk_columns) != 1:
            return None
        name = b.pk_columns[0].lower()
        db, table = jackson_string(b.database), jackson_string(b.table)
        if self.spec.key_format == "array":
            head, tail = b"[" + db + b"," + table + b",[{" + jackson_string(name) + b":", b"}]]"
        else:
            head, tail = b'{"database":' + db + b',"table":' + table + b"," + jackson_string("pk." + name) + b":", b"}"
        if how == "primaryKey":
            return head, tail, 0, partitions
        return head, tail, partition_of(self._by(how, b), partitions, self.spec.partition_hash), 0


def _members(obj: str) -> dict[str, str]:
    return dict(raw_members(obj))
