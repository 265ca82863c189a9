"""MySQL/MariaDB column types as Spark/Delta types, and the native expressions that read a change-log value.

A row image (`data`) is Maxwell's JSON. Each column is read by `from_json` as its *parse* type, then turned
into its *table* type by a native Spark expression (no Python per row), except the few whose exact text Spark's
JSON reader cannot keep (a JSON document, a DECIMAL wider than 38 digits): those are cut out of the row image
verbatim by `values.raw_members`. README "Compaction: types" is the table this module implements.

Lossless by rule: a value the table type cannot hold (a zero date such as 0000-00-00, a date before year 1)
becomes null in its column and its exact text goes into the row's `_cdc_raw` map under the column's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mysqlcapture_api.schema.model import ColumnDef
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

MAX_DECIMAL = 38
UNSIGNED_64 = DecimalType(20, 0)
_STRING_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"}
    | {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"}
    | {"geometrycollection"}
)
_BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# (signed, unsigned) Spark types of each integer width: unsigned takes the next wider type.
_INTEGERS: dict[str, tuple[DataType, DataType]] = {
    "tinyint": (ByteType(), ShortType()),
    "smallint": (ShortType(), IntegerType()),
    "mediumint": (IntegerType(), IntegerType()),
    "int": (IntegerType(), LongType()),
    "bigint": (LongType(), UNSIGNED_64),
}


@dataclass(frozen=True)
class SparkColumn:
    """How one source column lands in a current-state table.

    `parse`: the type `from_json` reads the change-log value as. `convert`: from that to `table` (None: the
    parsed value is the value). `verbatim`: the value is cut out of the row image by `values.raw_members`,
    not `from_json` ("json": its exact JSON text; "decimal": a DECIMAL's digits in plain notation; "natural": a
    string unquoted, anything else its exact text). `lossy`: some source values have no `table` value; those rows
    keep the text in `_cdc_raw`.
    """

    table: DataType
    parse: DataType
    convert: Callable[[Column], Column] | None = None
    verbatim: str | None = None
    lossy: bool = False


def _not_before_year_one(text: Column, value: Column) -> Column:
    """`value`, or null for MySQL's zero and pre-year-1 dates ('0000-...'), which Spark readers cannot hold."""
    return F.when(text >= F.lit("0001"), value)


def _date(text: Column) -> Column:
    return _not_before_year_one(text, text.try_cast(DateType()))


def _datetime(text: Column) -> Column:
    return _not_before_year_one(text, text.try_cast(TimestampNTZType()))


def _timestamp(text: Column) -> Column:
    # Maxwell renders TIMESTAMP in UTC: the 'Z' makes Spark read that instant whatever the session time zone.
    return _not_before_year_one(text, F.concat(text, F.lit("Z")).try_cast(TimestampType()))


def time_micros(text: Column) -> Column:
    """TIME text ('-838:59:59.999999') as signed microseconds: a duration, as the source means it."""
    body = F.regexp_replace(text, "^-", "")
    parts = F.split(body, ":")
    seconds = parts.getItem(2).cast(DecimalType(8, 6))
    micros = (
        parts.getItem(0).cast(LongType()) * F.lit(3_600_000_000)
        + parts.getItem(1).cast(LongType()) * F.lit(60_000_000)
        + (seconds * F.lit(1_000_000)).cast(LongType())
    )
    return F.when(text.startswith("-"), -micros).otherwise(micros)


def _binary(text: Column) -> Column:
    return F.unbase64(text)


def spark_column(col: ColumnDef) -> SparkColumn:
    """The Spark/Delta form of a source column (README "Compaction: types")."""
    kind = col.type
    if kind in _INTEGERS:
        signed, unsigned = _INTEGERS[kind]
        chosen = signed if col.signed else unsigned
        return SparkColumn(chosen, chosen)
    if kind == "decimal":
        precision, scale = col.precision or 10, col.scale or 0
        if precision > MAX_DECIMAL:  # the whole column stays exact text: no Spark decimal holds it
            return SparkColumn(StringType(), StringType(), verbatim="decimal")
        return SparkColumn(DecimalType(precision, scale), DecimalType(precision, scale))
    if kind == "float":
        return SparkColumn(FloatType(), FloatType())
    if kind == "double":
        return SparkColumn(DoubleType(), DoubleType())
    if kind == "bit":
        chosen = LongType() if (col.length or 1) < 64 else UNSIGNED_64
        return SparkColumn(chosen, chosen)
    if kind == "year":
        return SparkColumn(ShortType(), ShortType())
    if kind == "date":
        return SparkColumn(DateType(), StringType(), _date, lossy=True)
    if kind == "datetime":
        return SparkColumn(TimestampNTZType(), StringType(), _datetime, lossy=True)
    if kind == "timestamp":
        return SparkColumn(TimestampType(), StringType(), _timestamp, lossy=True)
    if kind == "time":
        return SparkColumn(LongType(), StringType(), time_micros)
    if kind in _BINARY_TYPES:
        return SparkColumn(BinaryType(), StringType(), _binary)
    if kind == "set":
        return SparkColumn(ArrayType(StringType()), ArrayType(StringType()))
    if kind == "vector":
        return SparkColumn(ArrayType(FloatType()), ArrayType(FloatType()))
    if kind == "json":
        return SparkColumn(StringType(), StringType(), verbatim="json")
    if kind in _STRING_TYPES:
        return SparkColumn(StringType(), StringType())
    # A type this module does not know (a newer server's): its exact text, never a guess.
    return SparkColumn(StringType(), StringType(), verbatim="natural")


TEXT = SparkColumn(StringType(), StringType(), verbatim="natural")
"""A column whose definition is unknown (a change log without schema history): its exact text."""
