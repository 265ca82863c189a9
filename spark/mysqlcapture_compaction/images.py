"""Row images (`data` JSON) as typed columns of a table definition, and older rows carried to a newer definition.

Pure Column builders: one `from_json` per image, native conversions per column (types.py), a Python UDF only
for the columns whose exact text Spark's JSON reader cannot keep (JSON documents, DECIMAL over 38 digits).
"""

from __future__ import annotations

from collections.abc import Sequence

from mysqlcapture_worker.schema.model import ColumnDef, TableDef
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType, StructField, StructType

from mysqlcapture_compaction import types, values

RAW = "_cdc_raw"
RAW_TYPE = MapType(StringType(), StringType())


def spark_columns(table: TableDef | None, names: Sequence[str]) -> list[tuple[str, types.SparkColumn]]:
    """Each column of `table` with its Spark form; without a definition, `names` kept as text."""
    if table is None:
        return [(n, types.TEXT) for n in names]
    return [(c.name, types.spark_column(c)) for c in table.columns]


def table_schema(table: TableDef | None, names: Sequence[str]) -> StructType:
    return StructType([StructField(n, sc.table) for n, sc in spark_columns(table, names)])


REST = "\u0000rest"  # the UDF's field holding the image without the verbatim members (no column has this name)


def _verbatim_udf(names: tuple[str, ...], modes: tuple[str, ...]) -> Column:
    schema = StructType([StructField(REST, StringType()), *(StructField(n, StringType()) for n in names)])

    def members(data: str | None) -> tuple[str | None, ...] | None:
        return values.raw_members(data, names, modes)

    return F.udf(members, schema, useArrow=True)  # type: ignore[return-value]


def typed(data: Column, table: TableDef | None, names: Sequence[str] = ()) -> list[Column]:
    """The image's columns, typed as `table` says and named as its columns, then `_cdc_raw`.

    `_cdc_raw` maps a column to its change-log text when the value has no Spark form (zero dates), else null.
    """
    cols = spark_columns(table, names)
    parsed_schema = StructType([StructField(n, sc.parse) for n, sc in cols if sc.verbatim is None])
    exact = [(n, sc.verbatim) for n, sc in cols if sc.verbatim is not None]
    cut = None
    if exact:
        cut = _verbatim_udf(tuple(n for n, _ in exact), tuple(str(m) for _, m in exact))(data)  # type: ignore[operator]
    parsed = F.from_json(data if cut is None else cut.getField(REST), parsed_schema)
    out: list[Column] = []
    lost: list[Column] = []
    for name, sc in cols:
        source = parsed.getField(name) if sc.verbatim is None else cut.getField(name)  # type: ignore[union-attr]
        value = sc.convert(source) if sc.convert is not None else source
        out.append(value.cast(sc.table).alias(name))
        if sc.lossy:
            lost += [F.lit(name), F.when(source.isNotNull() & value.isNull(), source)]
    out.append(_raw_map(lost).alias(RAW))
    return out


def _raw_map(pairs: list[Column]) -> Column:
    if not pairs:
        return F.lit(None).cast(RAW_TYPE)
    kept = F.map_filter(F.create_map(*pairs), lambda _k, v: v.isNotNull())
    return F.when(F.size(kept) > 0, kept)


def carried(
    older: TableDef | None, newer: TableDef | None, names_then: dict[str, str | None], older_names: Sequence[str] = ()
) -> list[Column]:
    """Columns of rows typed as `older`, rewritten as `newer` (after ALTERs): a column keeps its value under its
    new name (`names_then`: newer name -> its name in `older`, None when added since), cast where its type
    changed; an added column reads its default. `_cdc_raw` follows the renames."""
    before = dict(spark_columns(older, older_names))
    out: list[Column] = []
    for name, sc in spark_columns(newer, list(names_then)):
        old = names_then.get(name)
        if old is None or old not in before:
            out.append(default_value(newer.column(name) if newer is not None else None, sc).alias(name))
            continue
        value = F.col(f"`{old}`")
        if before[old].table != sc.table:
            value = value.try_cast(sc.table)
        out.append(value.alias(name))
    out.append(_raw_renamed(names_then).alias(RAW))
    return out


def _raw_renamed(names_then: dict[str, str | None]) -> Column:
    """`_cdc_raw` with its keys renamed as the columns were, and those of dropped columns left out."""
    back = {old: new for new, old in names_then.items() if old is not None}
    if not back:
        return F.lit(None).cast(RAW_TYPE)
    mapping = F.create_map(*[x for old, new in back.items() for x in (F.lit(old), F.lit(new))])
    return F.transform_keys(F.map_filter(F.col(RAW), lambda k, _v: mapping[k].isNotNull()), lambda k, _v: mapping[k])


_ZERO = {"date": "0000-00-00", "datetime": "0000-00-00 00:00:00", "timestamp": "0000-00-00 00:00:00"}
_NUMBERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "bit", "year"})


def implicit_default(col: ColumnDef) -> str | None:
    """The value MySQL gives existing rows for an added NOT NULL column without a DEFAULT (the type's implicit
    default), as text; None where there is none to give (JSON, spatial)."""
    if col.type in _NUMBERS:
        return "0"
    if col.type in _ZERO:
        return _ZERO[col.type]
    if col.type == "time":
        return "00:00:00"
    if col.type == "enum":
        return col.enum_values[0] if col.enum_values else ""
    if col.type in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "set"):
        return ""
    if col.type in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return ""
    return None


def default_value(col: ColumnDef | None, sc: types.SparkColumn) -> Column:
    """What a row that existed before an ADD COLUMN holds in it: the column's constant default, else the type's
    implicit default for a NOT NULL column, else null (also for an expression default: README says so)."""
    text = col.default if col is not None else None
    if text is None and col is not None and not col.nullable and not col.generated:
        text = implicit_default(col)
    if text is None or col is None or sc.verbatim is not None:
        return F.lit(None).cast(sc.table)
    if col.type == "set":
        members = [m for m in col.enum_values or () if m in text.split(",")]
        return F.array(*[F.lit(m) for m in members]).cast(sc.table)
    if col.type in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        padded = text.encode("utf-8").ljust(col.length or 0, b"\0") if col.type == "binary" else text.encode()
        return F.lit(bytearray(padded)).cast(sc.table)
    if col.type == "bit":
        return F.lit(text).try_cast(sc.table)
    literal = F.lit(text)
    value = sc.convert(literal) if sc.convert is not None else literal
    return value.try_cast(sc.table)
