"""Partial row images (a session's binlog_row_image MINIMAL or NOBLOB) completed into whole history versions.

The change log lists the columns an image left out (`Col.ABSENT`). An insert's absent columns hold their
defaults, as the server gave them; an update's kept the values they had, so they are taken from the row's
previous version: an earlier version in this flush, else the current-state row the flush starts from. A partial
update's or delete's before image (MINIMAL logs only the key there) is that previous version too. A row that moves
to another key takes its absent columns from the old key's version, which needs one more pass per move of a row
within the flush. A row the capture never saw whole (no previous version) keeps what its images held.

Versions are followed in the newest definition's columns (as the current state is: renamed columns under their
new names, a column added by an ALTER holding its default in the versions before it), then written back under
the names and types of each version's own definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mysqlcapture_api.changelog import Col
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from mysqlcapture_compaction import images
from mysqlcapture_compaction.transforms import MOVED_AWAY, PK

INSERTS = ("insert", "bootstrap-insert")
SEGMENT = "_seg"  # a version's schema segment (plan.TablePlan.segment)
HELD = "_held"  # a version already in the history: followed, not written again


@dataclass(frozen=True)
class Newest:
    """A column of the newest definition: its name, Spark type, the value rows read before an ALTER added it,
    and its name in each segment's definition (None: not there yet)."""

    name: str
    type: DataType
    added: Column
    names: Sequence[str | None]


def defaulted(after: Column, kind: Column, absent: Column, defaults: dict[str, Column]) -> Column:
    """An insert's after image with each absent column's default (`defaults`: by column name), as the server
    wrote it."""
    if not defaults:
        return after
    out = [F.when(F.array_contains(absent, n), d).otherwise(after.getField(n)).alias(n) for n, d in defaults.items()]
    rest = F.struct(*out, after.getField(images.RAW).alias(images.RAW))
    return F.when(kind.isin(*INSERTS) & absent.isNotNull() & after.isNotNull(), rest).otherwise(after)


def _pair(value: Column, raw: Column) -> Column:
    return F.struct(value.alias("v"), raw.alias("r"))


def _pair_type(dtype: DataType) -> StructType:
    return StructType([StructField("v", dtype), StructField("r", StringType())])


def _gone(col: Newest) -> Column:
    """The column of a row that is gone: no value (unlike null, which says nothing)."""
    return _pair(F.lit(None).cast(col.type), F.lit(None).cast(StringType()))


def _own(image: str, col: Newest, own: str) -> Column:
    """What the version's `image` holds in the column (named `own` in its definition), as the newest type."""
    held = F.col(image)
    return _pair(held.getField(own).try_cast(col.type), F.element_at(held.getField(images.RAW), F.lit(own)))


def _per_segment(cols: Sequence[Newest], pick: Callable[[Newest, str | None, int], Column]) -> list[Column]:
    """Per column, `pick(column, its name in the version's segment, segment)` for the version's segment."""
    out = []
    for col in cols:
        expr = None
        for seg, own in enumerate(col.names):
            value = pick(col, own, seg)
            expr = F.when(F.col(SEGMENT) == seg, value) if expr is None else expr.when(F.col(SEGMENT) == seg, value)
        assert expr is not None  # every column has a name (or None) per segment, and there is one segment at least
        out.append(expr)
    return out


def _given(cols: Sequence[Newest]) -> list[Column]:
    """Per column, what a version says the row holds after it (null: it does not say, the value stayed): a removal
    says the row is gone, an insert gives every column, an update those it logged; a column its definition did
    not have yet holds what the ALTER that added it gave the row."""
    gone = (F.col(Col.TYPE) == "delete") | F.col(MOVED_AWAY)
    inserted = F.col(Col.TYPE).isin(*INSERTS)

    def pick(col: Newest, own: str | None, _seg: int) -> Column:
        if own is None:
            return F.when(gone, _gone(col)).otherwise(_pair(col.added, F.lit(None).cast(StringType())))
        logged = F.col(Col.ABSENT).isNull() | ~F.array_contains(F.col(Col.ABSENT), own)
        return F.when(gone, _gone(col)).when(inserted | logged, _own("after", col, own))

    return [g.alias(f"_g{i}") for i, g in enumerate(_per_segment(cols, pick))]


def _seeds(state: DataFrame, cols: Sequence[Newest]) -> DataFrame:
    """Current-state rows (`_cdc_pk`, `_cdc_order_key`, the newest definition's columns, `_cdc_raw`) as versions
    that give every column."""
    raw = F.col(images.RAW)
    return state.select(
        F.col("_cdc_pk").alias(PK),
        F.col("_cdc_order_key").alias(Col.ORDER_KEY),
        F.lit(True).alias("_seed"),
        *[_pair(F.col(f"`{c.name}`"), F.element_at(raw, F.lit(c.name))).alias(f"_g{i}") for i, c in enumerate(cols)],
    )


def _passes(moves: list[tuple[int, str, str]]) -> int:
    """Passes of the fold the flush's partial moves need: one, plus the longest chain of moves of one row."""
    depth: dict[str, int] = {}
    longest = 0
    for _key, old, new in sorted(moves):
        depth[new] = depth.get(old, 0) + 1
        longest = max(longest, depth[new])
    return 1 + longest


def _written_back(image: Column, pairs: Sequence[Column], cols: Sequence[Newest], wanted: StructType) -> Column:
    """`image` (typed as `wanted`) with each field of the version's own definition set from the pair of the newest
    definition's column it is (`pairs`: one per column), cast to the field's type; `_cdc_raw` likewise. Fields no
    column stands for in the version's segment (a column dropped since) keep the image's value."""
    fields: dict[str, Column] = {}
    raw_names, raw_values = [], []
    image_raw = image.getField(images.RAW)
    for f in wanted.fields:
        if f.name == images.RAW:
            continue
        value, text = image.getField(f.name), F.element_at(image_raw, F.lit(f.name))
        for i, col in enumerate(cols):
            for seg, own in enumerate(col.names):
                if own == f.name:
                    here = F.col(SEGMENT) == seg
                    value = F.when(here, pairs[i].getField("v").try_cast(f.dataType)).otherwise(value)
                    text = F.when(here, pairs[i].getField("r")).otherwise(text)
        fields[f.name] = value
        raw_names.append(F.lit(f.name))
        raw_values.append(text)
    raw = F.map_filter(F.map_from_arrays(F.array(*raw_names), F.array(*raw_values)), lambda _k, v: v.isNotNull())
    fields[images.RAW] = F.when(F.size(raw) > 0, raw)
    return F.struct(*[fields[f.name].alias(f.name) for f in wanted.fields])


def complete(versions: DataFrame, state: DataFrame | None, cols: Sequence[Newest], wanted: StructType) -> DataFrame:
    """`versions` (history rows: HISTORY_META, `before`/`after` typed as `wanted`, `Col.ABSENT`, SEGMENT, HELD)
    with every partial image of a keyed row completed (module doc), without the HELD ones and without ABSENT and
    SEGMENT; `state`: the current-state rows the flush starts from, carried to the newest definition (`cols`), or
    None. Rows of keys without a partial image pass untouched."""
    idx = range(len(cols))
    keys = versions.where(F.col(Col.ABSENT).isNotNull() & F.col(PK).isNotNull()).select(PK).distinct()
    keys = keys.localCheckpoint()
    columns = [c for c in versions.columns if c not in (Col.ABSENT, SEGMENT, HELD)]
    mine = versions.where(~F.col(HELD))
    rest = mine.join(keys, PK, "left_anti").select(*columns)
    subject = versions.join(keys, PK, "left_semi").withColumn("_seed", F.lit(False))
    rows = subject.select("*", *_given(cols))
    if state is not None:
        held = state.join(keys.withColumnRenamed(PK, "_cdc_pk"), "_cdc_pk", "left_semi")
        rows = rows.unionByName(_seeds(held, cols), allowMissingColumns=True)
    unknown = [F.lit(None).cast(_pair_type(c.type)).alias(f"_c{i}") for i, c in enumerate(cols)]
    rows = rows.select("*", *unknown).localCheckpoint()
    # A move's old-key listing is `moved_away`; its new-key listing shares its ordering key.
    away = F.col(MOVED_AWAY) & F.col(Col.ABSENT).isNotNull()
    moves = (
        rows.where(away)
        .alias("m")
        .join(rows.where(~F.col(MOVED_AWAY)).alias("n"), Col.ORDER_KEY)
        .select(Col.ORDER_KEY, F.col(f"m.{PK}").alias("old"), F.col(f"n.{PK}").alias("new"))
    )
    found = [(int(r[Col.ORDER_KEY]), str(r["old"]), str(r["new"])) for r in moves.collect()]
    order = Window.partitionBy(PK).orderBy(F.col("_seed").desc(), Col.ORDER_KEY)
    now = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    earlier = order.rowsBetween(Window.unboundedPreceding, -1)
    given = [F.col(f"_g{i}") for i in idx]
    folded = rows
    for n in range(_passes(found)):
        step = rows
        if n:  # a move's new-key listing: the columns it did not log, from the old key's previous version
            carried = folded.where(away).select(Col.ORDER_KEY, *[F.col(f"_p{i}").alias(f"_i{i}") for i in idx])
            joined = rows.drop(*[f"_c{i}" for i in idx]).join(carried, Col.ORDER_KEY, "left")
            into = ~F.col(MOVED_AWAY) & F.col("_i0").isNotNull()
            step = joined.select(
                *[c for c in joined.columns if not c.startswith(("_g", "_i"))],
                *[
                    F.when(into, F.coalesce(g, F.col(f"_i{i}"))).otherwise(g).alias(f"_g{i}")
                    for i, g in enumerate(given)
                ],
                *[F.when(into, F.col(f"_i{i}")).alias(f"_c{i}") for i in idx],
            )
        folded = step.select(
            *step.columns,
            *[F.last(g, ignorenulls=True).over(now).alias(f"_f{i}") for i, g in enumerate(given)],
            *[F.last(g, ignorenulls=True).over(earlier).alias(f"_p{i}") for i, g in enumerate(given)],
        )
        if found:
            folded = folded.localCheckpoint()
    partial = F.col(Col.ABSENT).isNotNull()
    kind = F.col(Col.TYPE)

    def own_pairs(image: str) -> list[Column]:
        def pick(col: Newest, own: str | None, _seg: int) -> Column:
            return F.lit(None).cast(_pair_type(col.type)) if own is None else _own(image, col, own)

        return _per_segment(cols, pick)

    # Before: the old key's version for a move's new-key listing, else the key's previous version.
    prior = [F.coalesce(F.col(f"_c{i}"), F.col(f"_p{i}"), b) for i, b in enumerate(own_pairs("before"))]

    def was_logged(_col: Newest, own: str | None, _seg: int) -> Column:
        return F.lit(False) if own is None else ~F.array_contains(F.col(Col.ABSENT), own)

    logged = _per_segment(cols, was_logged)
    # After: an update's logged columns over the previous version (a move's old-key listing has no fold of its
    # own: the row left that key).
    moved = [F.when(ok, a).otherwise(p) for ok, a, p in zip(logged, own_pairs("after"), prior, strict=True)]
    filled = [F.col(f"_f{i}") for i in idx]
    out = folded.where(~F.col("_seed") & ~F.col(HELD)).select(
        *[c for c in columns if c not in ("before", "after")],
        F.when(partial & F.col("before").isNotNull(), _written_back(F.col("before"), prior, cols, wanted))
        .otherwise(F.col("before"))
        .alias("before"),
        F.when(
            partial & F.col(MOVED_AWAY) & F.col("after").isNotNull(), _written_back(F.col("after"), moved, cols, wanted)
        )
        .when(
            partial & F.col("after").isNotNull() & ~kind.isin(*INSERTS),
            _written_back(F.col("after"), filled, cols, wanted),
        )
        .otherwise(F.col("after"))
        .alias("after"),
    )
    return rest.unionByName(out.select(*columns))
