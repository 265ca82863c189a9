"""The worker's compiled fast path (worker/native/src, Rust via PyO3): rows-event bodies and snapshot result sets
straight to Maxwell's JSON text, as Arrow string buffers.

Hand-written from the `#[pyclass]`, `#[pymethods]` and `#[pyfunction]` items of src/lib.rs and src/text.rs; maturin
ships it in the wheel (with `py.typed`), and mypy reads it from here (`mypy_path`). Column kinds are numbered in
src/lib.rs (K_*), src/text.rs (T_*) and src/blob.rs (B_*); `tests/unit/test_native_kinds.py` checks the Python
plans use the same numbers.
"""

from collections.abc import Callable, Sequence
from typing import Any, Literal, final, overload

@final
class OwnedBuffer:
    """Bytes rendered by the compiled path, handed over without a copy: a read-only buffer (`pyarrow.py_buffer`,
    `memoryview`, `bytes()`)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...

ArrowStrings = tuple[OwnedBuffer, OwnedBuffer]
"""An Arrow string column: (values, int32 little-endian offsets) as buffers."""

NullableStrings = tuple[OwnedBuffer, OwnedBuffer, OwnedBuffer]
"""An Arrow string column with nulls: (values, int32 little-endian offsets, validity bitmap) as buffers."""

_Fallback = Callable[[bytes], str] | None
"""A blob column's reference converter (raw value bytes -> the value's JSON text); None for other columns."""

@final
class RowRenderer:
    """One table's renderer of binlog rows-event bodies (full row images), built once per TABLE_MAP."""

    def __init__(
        self,
        columns: Sequence[tuple[int, int, int, Sequence[str]]],
        keys: Sequence[str],
        pk: Sequence[int],
        hash_prefix: bytes | None,
        fallbacks: Sequence[_Fallback] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """columns: (kind K_*, a, b, members) per column; keys: the JSON text of each column name; pk: primary-key
        column indexes; hash_prefix: b"database\\0table\\0" (None: no key hashes, `pk_hash` None); fallbacks: per
        column; redactor: the table's column rules (spec.columns), applied as each row is written. ValueError on a bad
        plan."""

    def render(
        self, kind: int, body: bytes
    ) -> tuple[
        int,
        ArrowStrings,
        ArrowStrings | None,
        ArrowStrings | None,
        ArrowStrings | None,
        NullableStrings | None,
        NullableStrings | None,
    ]:
        """A rows event body (kind 0 insert, 1 update, 2 delete) as (rows, data, old, pk, pk_hash, json_null,
        old_json_null): `old` None outside UPDATEs, `pk` and `pk_hash` None without a primary key; `json_null` and
        `old_json_null` (per row the JSON array of the JSON columns whose value in data, or old, is the JSON document
        null; a null row for none) None when no row has one. ValueError when the body does not decode."""

@final
class TextRenderer:
    """One table's renderer of snapshot result-set rows, shared by its chunks' `ResultReader`s."""

    def __init__(
        self,
        columns: Sequence[tuple[int, Sequence[str]]],
        keys: Sequence[str],
        pk: Sequence[int],
        hash_prefix: bytes | None,
        fallbacks: Sequence[_Fallback] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """columns: (kind T_*, or T_BLOB + a blob kind B_*, members) per column; the rest as for `RowRenderer`.
        ValueError on a bad plan."""

@final
class ResultReader:
    """One result set read off the wire: fed the connection's bytes as they arrive, renders each row."""

    def __init__(self, renderer: TextRenderer, binary: bool = False, rows: int = 0) -> None:
        """binary: the result set of a prepared statement (COM_STMT_EXECUTE), else of a plain query; rows: how
        many rows it may hold, to size its buffers (0: unknown)."""

    def feed(self, data: bytes) -> bool:
        """Take the next bytes read from the connection; True once the result set has ended. ValueError when
        they are not a result set of the table's columns."""

    @property
    def rows(self) -> int:
        """Rows rendered and not yet taken."""

    def server_error(self) -> bytes | None:
        """The error packet's payload when the server ended the result set with an error, else None."""

    def take(self) -> tuple[int, ArrowStrings, ArrowStrings | None, ArrowStrings | None, NullableStrings | None]:
        """The rows rendered so far as (rows, data, pk, pk_hash, json_null), `pk` and `pk_hash` None without a
        primary key, `json_null` as `RowRenderer.render`'s; the reader starts a new batch. ValueError when a value
        could not be rendered."""

    def last_row(self) -> list[bytes | None] | None:
        """The last row's values as the text protocol sends them (None for NULL), or None before the first row."""

MaxwellColumn = tuple[int, int, Any | None, Any, Any | None]
"""A `pyarrow.StringArray` as (offset, length, validity, offsets, values): its `buffers()`, each a buffer or None."""

def join_texts(
    parts: list[tuple[MaxwellColumn | None, int]],
) -> tuple[OwnedBuffer, OwnedBuffer, OwnedBuffer | None, int]:
    """String columns joined in order into one: (values, int32 offsets, validity or None, null count); each part a
    column's buffers, or None for that many null rows. ValueError past 2 GiB of values."""

KafkaRoute = tuple[int, bytes, bytes, int, int]
"""Where a batch's rows go on Kafka: (group, key head, key tail, partition, hashed over). Each row's key is the head,
its one key value's text, the tail; its partition is `partition` when `hashed over` is 0, else the hash of the key
value's Java text modulo `hashed over`."""

BatchPlan = tuple[
    bytes,  # head: `{"database":..,"table":..,"type":..,"ts":..` and `,"xid":..` as the options ask
    bytes,  # middle: position, gtid, server_id, thread_id as the options ask
    bool,  # output_primary_keys
    bytes | None,  # `,"primary_key_columns":[..]` under output_primary_key_columns
    tuple[int, int] | None,  # xoffset (first row's, step), when written
    bool,  # the last row ends its transaction and `"commit":true` is written
    tuple[int, int] | None,  # _order_key (first row's, step), when written
    MaxwellColumn,  # data
    MaxwellColumn | None,  # old
    MaxwellColumn | None,  # primary key
    KafkaRoute | None,
]
"""A row batch as `maxwell_rows` renders it (`mysqlcapture_worker.sinks.maxwell.batch_plan`)."""

@final
class Messages:
    """A run's Kafka messages (`maxwell_rows(..., messages=True)`): every key and value in two buffers, grouped by
    (topic group, partition) in the order groups first appear, each group's in the rows' order."""

    total: int
    """The bytes of every key and value."""
    largest: int
    """The bytes of the largest message (key and value)."""

    def dicts(self) -> list[tuple[int, int, list[dict[str, bytes]]]]:
        """[(group, partition, [{"key": k, "value": v}, ...]), ...] as `Producer.produce_batch` takes them."""

    def __len__(self) -> int: ...

@final
class DirectProducer:
    """A confluent-kafka producer's librdkafka handle, to queue `Messages` without a Python object per message
    (src/kafka.rs). Its messages have no delivery report: a refused one fails its transaction's commit."""

    name: str
    """The handle's librdkafka name (`rdkafka#producer-1`)."""

    def __init__(self, library: str, handle: int) -> None:
        """`library`: the path of the librdkafka already loaded; `handle`: the producer's `rd_kafka_t` address.
        ValueError when the library is not loaded, lacks a function, or the handle is not a producer's."""

    def produce(self, messages: Messages, topics: Sequence[str]) -> tuple[str, int, int, int, str, bytes] | None:
        """Queue every group on `topics[group]` and its partition, copied; None, or the first refusal: (topic,
        partition, messages of its group queued, librdkafka's error code and text, the refused message's key)."""

@overload
def maxwell_rows(batches: Sequence[BatchPlan], messages: Literal[False] = False, murmur: bool = False) -> OwnedBuffer:
    """Consecutive batches' Maxwell JSON lines, each with its line end."""

@overload
def maxwell_rows(batches: Sequence[BatchPlan], messages: Literal[True], murmur: bool = False) -> Messages:
    """Consecutive batches' Kafka messages (every batch has its route); `murmur`: partitions by MurmurHash3, else
    by Java's hashCode. ValueError on columns that do not hold what the plan says."""

def format_double(v: float) -> str:
    """Java's `Double.toString` text of a double."""

def format_float(raw: bytes) -> str:
    """Java's `Float.toString` text of a FLOAT given its four little-endian bytes."""

_Strings = tuple[int, bytes, bytes]
"""An Arrow string column as (rows, values bytes, int32 little-endian offsets bytes)."""

@final
class Redactor:
    """One table's column rules (spec.columns), given to its renderers (src/redact.rs; mysqlcapture_worker.column_rules
    is the reference). `objects` and `keys` apply them to rendered text."""

    def __init__(
        self,
        columns: Sequence[tuple[str, int, int, str, bool]],
        key_columns: Sequence[bool | None],
        secret: bytes,
        algorithm: str,
        hash_prefix: bytes,
    ) -> None:
        """columns: (name as a JSON string token, kind, length or keep, mask character escaped, binary) per ruled
        column; key_columns: per primary-key column, hashed as bytes (True), as text (False) or kept (None)."""

    def objects(self, n: int, values: bytes, offsets: bytes) -> _Strings:
        """`n` rendered objects in their ruled form. ValueError on text that is not a rendered object."""

    def keys(self, n: int, values: bytes, offsets: bytes) -> tuple[_Strings, _Strings]:
        """`n` rendered primary keys with their hashed columns hashed, and the keys' hashes."""
