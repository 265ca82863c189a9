"""Tables whose rows have no primary key, compacted as multisets: a row is matched by its value.

A row event of such a table names no key, but its images are whole rows (binlog_row_image=FULL): an insert adds
one row of its after image's value, a delete removes one row of its before image's value, an update does both.
Rows of equal value cannot be told apart, on the source or here, so the current state is each value held as many
times as the source holds it. Each held row is an instance `_cdc_pk` = `<value hash>#<instance id>`: the hash
(SHA-256 of the typed values) finds a value's instances, the id (unique per table) lets a MERGE add or delete
exactly one. Pure Column and DataFrame builders.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.transforms import META

SEP = "#"
PK = "_cdc_pk"
# `_cdc_pk`'s field metadata in a table compacted by value (kept in the table's schema: no commit of its own).
MARK = {"mysqlcapture.rows": "by value"}
# Every fraction of a second in the hashed text (to_json's default keeps milliseconds).
_JSON = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
STEP = "_d"  # +1: the version adds a row of its value; -1: it removes one
HASH = "_h"


def value_hash(columns: Sequence[str]) -> Column:
    """SHA-256 (hex) of a row's typed values and its `_cdc_raw` entries (sorted): equal rows, equal hashes."""
    raw = F.col(RAW)
    entries = F.when(F.size(raw) > 0, F.array_sort(F.map_entries(raw)))
    values = F.struct(*[F.col(f"`{c}`") for c in columns], entries.alias(RAW))
    return F.sha2(F.to_json(values, _JSON), 256)


def instance(pk: Column, by_value: bool) -> Column:
    """The instance id of a held row: after the hash in a table compacted by value, else its key (unique)."""
    return pk.substr(F.instr(pk, SEP) + 1, F.length(pk)) if by_value else pk


def marked(pk: Column) -> Column:
    return pk.alias(PK, metadata=MARK)


def rekeyed(rows: DataFrame, columns: Sequence[str], *, by_value: bool) -> DataFrame:
    """A table's rows (data columns, META, RAW) keyed by value: each keeps its instance id (a keyed row's key)
    under the hash of its value now (a definition change changes values: defaults, casts, renames)."""
    pk = F.concat(value_hash(columns), F.lit(SEP), instance(F.col(PK), by_value))
    return rows.withColumn(PK, marked(pk))


def steps(versions: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Per value (`_h`) in a table's versions (each side of each version: its typed value, META but `_cdc_pk`, and
    STEP), in ordering-key order: the net count `_n`, the lowest running count `_low` (<= 0; below zero the
    version removed a row the table was not known to hold), and the newest value that added a row (`_v`)."""
    hashed = versions.withColumn(HASH, value_hash(columns))
    # Within an update, its removal before its addition (a row updated to its own value is still there).
    upto = Window.partitionBy(HASH).orderBy("_cdc_order_key", STEP).rowsBetween(Window.unboundedPreceding, 0)
    running = hashed.withColumn("_run", F.sum(STEP).over(upto))
    value = F.struct(*[F.col(f"`{c}`") for c in [*columns, *META[1:], RAW]])
    newest = F.max_by(value, F.when(F.col(STEP) > 0, F.col("_cdc_order_key")))
    return running.groupBy(HASH).agg(
        F.sum(STEP).alias("_n"), F.least(F.min("_run"), F.lit(0)).alias("_low"), newest.alias("_v")
    )


def changes(steps: DataFrame, held: DataFrame | None, columns: Sequence[str]) -> DataFrame:
    """The instances to delete and to add (`_op`, the table's columns), from `steps` and the rows the table holds
    (`held`: `_cdc_pk`, `_cdc_order_key`; None: none). A value held n times whose versions run as `steps` says
    is held `_n + max(n, -_low)` times after them: removals of rows it did not hold remove nothing, as a keyed
    table's deletes of keys it does not hold. Removed: the newest instances. Added: new ids
    `<ordering key of the newest adding version>.<i>`, with that version's metadata."""
    if held is None:
        counts = steps.withColumn("_held", F.lit(0))
    else:
        ids = held.select(F.substring_index(PK, SEP, 1).alias(HASH), F.struct("_cdc_order_key", PK).alias("_i"))
        ids = ids.join(steps.select(HASH), HASH, "left_semi").groupBy(HASH).agg(F.collect_list("_i").alias("_ids"))
        counts = steps.join(ids, HASH, "left")
        counts = counts.withColumn("_held", F.when(F.col("_ids").isNull(), 0).otherwise(F.size("_ids")))
    counts = counts.withColumn("_after", F.col("_n") + F.greatest(F.col("_held"), -F.col("_low")))
    added = counts.where(F.col("_after") > F.col("_held")).select(
        HASH, "_v", F.explode(F.sequence(F.lit(1), F.col("_after") - F.col("_held"))).alias("_j")
    )
    new_id = F.concat_ws(".", F.col("_v._cdc_order_key").cast("string"), F.col("_j").cast("string"))
    out = added.select(
        *[F.col("_v").getField(c).alias(c) for c in [*columns, *META[1:], RAW]],
        marked(F.concat(F.col(HASH), F.lit(SEP), new_id)),
        F.lit("upsert").alias("_op"),
    )
    if held is None:
        return out
    newest_first = F.slice(F.sort_array("_ids", asc=False), 1, F.col("_held") - F.col("_after"))
    gone = counts.where(F.col("_after") < F.col("_held")).select(F.explode(newest_first).alias("_i"))
    deletes = gone.select(F.col("_i").getField(PK).alias(PK), F.lit("delete").alias("_op"))
    return out.unionByName(deletes, allowMissingColumns=True)
