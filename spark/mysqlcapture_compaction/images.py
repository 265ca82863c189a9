"""Row images (`data` JSON) as typed columns of a table definition, and older rows carried to a newer definition.

Pure Column builders: one `from_json` per image, native conversions per column (types.py), a Python UDF only
for the columns whose exact text Spark's JSON reader cannot keep (JSON documents, DECIMAL over 38 digits).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mysqlcapture_api.schema.model import ColumnDef, TableDef
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructField, StructType

from mysqlcapture_compaction import types, values

RAW = "_cdc_raw"
RAW_TYPE = MapType(StringType(), StringType())


def spark_columns(table: TableDef | None, names: Sequence[str]) -> list[tuple[str, types.SparkColumn]]:
    """Each column of `table` with its Spark form; without a definition, `names` kept as text."""
    if table is None:
        return [(n, types.TEXT) for n in names]
    return [(c.name, types.spark_column(c)) for c in table.columns]


def column_names(table: TableDef | None, names: Sequence[str]) -> list[str]:
    return [n for n, _ in spark_columns(table, names)]


def image_types(table: TableDef | None, names: Sequence[str]) -> dict[str, DataType]:
    """A typed image's fields: each column's Spark type, then `_cdc_raw`."""
    return {**{n: sc.table for n, sc in spark_columns(table, names)}, RAW: RAW_TYPE}


def table_schema(table: TableDef | None, names: Sequence[str]) -> StructType:
    return StructType([StructField(n, sc.table) for n, sc in spark_columns(table, names)])


REST = "\u0000rest"  # the UDF's field holding the image without the verbatim members (no column has this name)


KEYS = "\u0000keys"  # the UDF's field holding the image's member names (no column has this name)


def _verbatim_udf(names: tuple[str, ...], modes: tuple[str, ...]) -> Column:
    schema = StructType(
        [
            StructField(REST, StringType()),
            *(StructField(n, StringType()) for n in names),
            StructField(KEYS, ArrayType(StringType())),
        ]
    )

    def members(data: str | None, json_null: str | None) -> tuple[object, ...] | None:
        return values.raw_members(data, names, modes, keys=True, json_null=json_null)

    return F.udf(members, schema, useArrow=True)  # type: ignore[return-value]


PARSED = "\u0000json"  # the parsed image's field holding from_json's struct (no column has this name)


def parse(data: Column, table: TableDef | None, names: Sequence[str] = (), json_null: Column | None = None) -> Column:
    """The image's members parsed, not yet converted: one `from_json` (after the UDF has cut out the members
    whose exact text it keeps), as a struct `typed` reads. `json_null`: the image's Col.JSON_NULL (or
    Col.OLD_JSON_NULL), whose columns hold the JSON document null (their text `null`) rather than SQL NULL.

    Select it as a column of its own first, then type it in a later select: an image's columns typed straight
    from `from_json` sit inside conditional expressions (a delete has no after image), where Spark does not
    share one parse between them and parsed the image once per column.
    """
    cols = spark_columns(table, names)
    parsed_schema = StructType([StructField(n, sc.parse) for n, sc in cols if sc.verbatim is None])
    exact = [(n, sc.verbatim) for n, sc in cols if sc.verbatim is not None]
    if not exact:
        return F.struct(F.from_json(data, parsed_schema).alias(PARSED))
    marks = json_null if json_null is not None else F.lit(None).cast(StringType())
    cut = _verbatim_udf(tuple(n for n, _ in exact), tuple(str(m) for _, m in exact))(data, marks)  # type: ignore[operator]
    return F.struct(
        F.from_json(cut.getField(REST), parsed_schema).alias(PARSED),
        *[cut.getField(n).alias(n) for n, _ in exact],
        cut.getField(KEYS).alias(KEYS),
    )


def typed(parsed: Column, table: TableDef | None, names: Sequence[str] = ()) -> list[Column]:
    """The image's columns, typed as `table` says and named as its columns, then `_cdc_raw`, from `parsed`: a
    column holding `parse(image, table, names)`, selected before.

    `_cdc_raw` maps a column to its change-log text when the value has no Spark form (zero dates), else null.
    """
    cols = spark_columns(table, names)
    out: list[Column] = []
    lost: list[Column] = []
    for name, sc in cols:
        source = parsed.getField(PARSED).getField(name) if sc.verbatim is None else parsed.getField(name)
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


def _top(name: str) -> Column:
    return F.col(f"`{name}`")


def carried(
    older: TableDef | None,
    newer: TableDef | None,
    names_then: dict[str, str | None],
    older_names: Sequence[str] = (),
    *,
    source: Callable[[str], Column] = _top,
    older_types: Mapping[str, DataType] | None = None,
) -> list[Column]:
    """Columns of rows typed as `older`, rewritten as `newer` (after ALTERs): a column keeps its value under its
    new name (`names_then`: newer name -> its name in `older`, None when added since), cast where its type
    changed; an added column reads its default. `_cdc_raw` follows the renames.

    `source` reads an older column (default: the row's top-level column; a history image's struct field);
    `older_types` overrides the Spark types `older` gives them (a history image holds each name's newest type).
    """
    before = {n: sc.table for n, sc in spark_columns(older, older_names)}
    before.update(older_types or {})
    out: list[Column] = []
    for name, sc in spark_columns(newer, list(names_then)):
        old = names_then.get(name)
        if old is None or old not in before:
            out.append(default_value(newer.column(name) if newer is not None else None, sc).alias(name))
            continue
        value = source(old)
        if before[old] != sc.table:
            value = value.try_cast(sc.table)
        out.append(value.alias(name))
    out.append(_raw_renamed(names_then, source(RAW)).alias(RAW))
    return out


def _raw_renamed(names_then: dict[str, str | None], raw: Column) -> Column:
    """`_cdc_raw` with its keys renamed as the columns were, and those of dropped columns left out."""
    back = {old: new for new, old in names_then.items() if old is not None}
    if not back:
        return F.lit(None).cast(RAW_TYPE)
    mapping = F.create_map(*[x for old, new in back.items() for x in (F.lit(old), F.lit(new))])
    return F.transform_keys(F.map_filter(raw, lambda k, _v: mapping[k].isNotNull()), lambda k, _v: mapping[k])


def parsed_images(
    data: Column,
    old: Column,
    table: TableDef | None,
    names: Sequence[str],
    *,
    updates: bool = True,
    json_null: tuple[Column, Column] | None = None,
) -> Column:
    """A row event's images parsed (`parse`), to select before `version_images` types them: struct `(after, old,
    old_keys)`, the last two only with `updates` (the caller knows there are none otherwise). `json_null`: the
    event's Col.JSON_NULL and Col.OLD_JSON_NULL (`parse`)."""
    after = parse(data, table, names, json_null[0] if json_null else None).alias("after")
    if not updates:
        return F.struct(after)
    # Which columns `old` holds: the verbatim cut lists them when the table has columns it cuts out (Jackson refuses
    # an image with a number of over 1,000 digits, which a MySQL JSON document's doubles print as), else Jackson.
    verbatim = any(sc.verbatim is not None for _, sc in spark_columns(table, names))
    parsed_old = parse(old, table, names, json_null[1] if json_null else None)
    keys = parsed_old.getField(KEYS) if verbatim else F.json_object_keys(old)
    return F.struct(after, parsed_old.alias("old"), keys.alias("old_keys"))


def version_images(
    parsed: Column, kind: Column, table: TableDef | None, names: Sequence[str], *, updates: bool = True
) -> Column:
    """A row event's typed after image, and for an update the typed old values with the names `old` holds, from
    `parsed_images` (selected before): one struct `(after, old, old_keys)` whose fields `images_of` assembles into
    the before and after images."""
    after = F.struct(*typed(parsed.getField("after"), table, names))
    if not updates:
        return F.struct(after.alias("after"))
    changed = F.when(kind == "update", F.struct(*typed(parsed.getField("old"), table, names)))
    return F.struct(after.alias("after"), changed.alias("old"), parsed.getField("old_keys").alias("old_keys"))


def images_of(parts: Column, kind: Column, names: Sequence[str], *, updates: bool = True) -> tuple[Column, Column]:
    """(before, after) images from `version_images`: an update's before image is its after image with the
    changed columns' old values put back (`_cdc_raw` likewise); an insert has no before, a delete no after."""
    after = parts.getField("after")
    if not updates:
        return F.when(kind == "delete", after), F.when(kind != "delete", after)
    old, keys = parts.getField("old"), parts.getField("old_keys")
    fields = [F.when(F.array_contains(keys, n), old.getField(n)).otherwise(after.getField(n)).alias(n) for n in names]
    kept = F.map_filter(F.coalesce(after.getField(RAW), _empty()), lambda k, _v: ~F.array_contains(keys, k))
    raw = F.map_concat(kept, F.coalesce(old.getField(RAW), _empty()))
    fields.append(F.when(F.size(raw) > 0, raw).alias(RAW))
    before = F.when(kind == "update", F.struct(*fields)).when(kind == "delete", after)
    return before, F.when(kind != "delete", after)


def _empty() -> Column:
    return F.create_map().cast(RAW_TYPE)


def project(image: Column, have: Mapping[str, DataType], wanted: StructType) -> Column:
    """A history image (struct, fields typed as `have`) as the struct `wanted` (the table's history image type):
    fields by name, missing ones null; a field whose type changed is cast, and a value the new type cannot hold
    is null with its text in `_cdc_raw` (nothing is lost)."""
    if list(have.items()) == [(f.name, f.dataType) for f in wanted.fields]:
        return image  # already that struct
    fields: dict[str, Column] = {}
    lost: list[Column] = []
    for f in wanted.fields:
        if f.name == RAW:
            continue
        if f.name not in have:
            fields[f.name] = F.lit(None).cast(f.dataType)
            continue
        value = image.getField(f.name)
        if have[f.name] != f.dataType:
            cast = value.try_cast(f.dataType)
            lost += [F.lit(f.name), F.when(value.isNotNull() & cast.isNull(), value.cast("string"))]
            value = cast
        fields[f.name] = value
    raw = image.getField(RAW) if RAW in have else F.lit(None).cast(RAW_TYPE)
    if lost:
        extra = F.map_filter(F.create_map(*lost), lambda _k, v: v.isNotNull())
        raw = F.map_concat(F.coalesce(raw, _empty()), extra)
        raw = F.when(F.size(raw) > 0, raw)
    fields[RAW] = raw
    return F.when(image.isNotNull(), F.struct(*[fields[f.name].alias(f.name) for f in wanted.fields]))


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
