"""`mysqlcapture-compact`: compact a capture's change log; ask the row histories (history, undo, as-of); show
current rows."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import read_delta
from mysqlcapture_api.manifest import ManifestError, load_manifest

from mysqlcapture_compaction import history_cli, history_output, history_scope, targets
from mysqlcapture_compaction import output as layout


class Usage(Exception):
    """The command's arguments name nothing it can work on: one line, exit 2."""


def _paths(args: argparse.Namespace) -> tuple[str, str, int, dict[str, str]]:
    """(change log, output, retention hours, extra Spark conf) from the manifest, or `--changelog`, and flags."""
    if args.manifest is None:
        if not args.changelog:
            raise Usage("give the capture's manifest (the worker's MySQLCapture file), or --changelog URI")
        changelog = _changelog(args.changelog, "--changelog")
        return changelog, args.output or layout.default_output(changelog), 168, {}
    capture = load_manifest(args.manifest)
    sink = capture.spec.sink
    if sink.delta is None:
        raise ManifestError(args.manifest, ["spec.sink.delta: compaction needs a Delta change log"])
    changelog = _changelog(sink.delta.uri, f"{args.manifest}: spec.sink.delta.uri", dict(sink.delta.storage_options))
    compaction = capture.spec.compaction
    output = args.output or compaction.output_uri or layout.default_output(changelog)
    return changelog, output, compaction.retention_hours, dict(compaction.spark_conf)


def _changelog(uri: str, named_by: str, storage_options: dict[str, str] | None = None) -> str:
    """`uri`, when a change log is there: a local path is looked at here (a remote store, by the reader)."""
    if storage_options or ("://" in uri and not uri.startswith("file://")):
        return uri
    path = uri.removeprefix("file://")
    if not RsTable.is_deltatable(path):
        what = "does not exist" if not os.path.exists(path) else "holds no Delta table (no _delta_log)"
        raise Usage(
            f"{named_by} {uri} {what}: give the change log the capture's worker writes (its manifest's "
            "spec.sink.delta.uri), after the worker's first commit"
        )
    return uri


def _compact(args: argparse.Namespace) -> int:
    changelog, output, retention, conf = _paths(args)
    return _compact_uri(args, changelog=changelog, output=output, retention=retention, conf=conf)


def _run(args: argparse.Namespace) -> int:
    changelog = _changelog(args.changelog, "--changelog")
    output = args.output or layout.default_output(changelog)
    return _compact_uri(args, changelog=changelog, output=output, retention=args.retention_hours, conf={})


def _compact_uri(args: argparse.Namespace, *, changelog: str, output: str, retention: int, conf: dict[str, str]) -> int:
    # Spark's modules: only the commands that run a job load them (a history question starts faster).
    from mysqlcapture_compaction import job, maintenance
    from mysqlcapture_compaction.session import build_session

    spark = build_session(master=args.master, conf=conf)
    try:
        result = job.run(spark, changelog=changelog, output=output)
        print(
            f"compacted change-log version {result.changelog_version}: {result.events} events, ordering keys "
            f"{result.start_key + 1}..{result.end_key}, {len(result.tables)} tables, {result.seconds:.1f}s"
        )
        if args.optimize:
            removed = maintenance.optimize(spark, changelog)
            hours = maintenance.vacuum(
                spark, changelog, configured_hours=retention, compacted_version=layout.last_compacted_version(output)
            )
            print(f"change log: OPTIMIZE removed {removed} small files; VACUUM retention {hours:.2f}h")
            # Each run adds a file (or a few) to each table's history; bin-packing keeps a key lookup at few files.
            packed = sum(maintenance.optimize(spark, str(p)) for p in layout.history_tables(output))
            print(f"history: OPTIMIZE removed {packed} small files")
    finally:
        spark.stop()
    return 0


def _history_question(args: argparse.Namespace) -> int:
    changelog, output, _, _ = _paths(args)
    return history_cli.HANDLERS[args.command](changelog, output, args)


def _show(args: argparse.Namespace) -> int:
    changelog, output, _, _ = _paths(args)
    if args.limit < 1:
        raise Usage("--limit must be 1 or more")
    place = history_cli.table_of(args)
    assert place is not None  # --table is required
    database, table = place
    target = targets.Target(output, database, table)
    why = targets.dropped_for(target.path)
    if why == targets.NO_KEY:
        print(
            f"{args.table} has no current-state table: its rows have no primary key (its history is in "
            f"{target.history}). Fix: {targets.no_key_fix(args.table)}.",
            file=sys.stderr,
        )
        return 1
    if why is not None:
        gone = "dropped on the source" if RsTable.is_deltatable(target.path) else f"no table at {target.path}"
        print(f"{args.table}: {gone}", file=sys.stderr)
        return 1
    rows = read_delta(target.path)
    if targets.by_value(target.path):  # rows without a key (`<value hash>#<instance>`): as they are stored
        keys: list[Any] = rows.column("_cdc_order_key").to_pylist()
    else:
        keys = [json.loads(k) for k in rows.column("_cdc_pk").to_pylist()]  # by key value: [2] before [10]
    order = sorted(range(rows.num_rows), key=keys.__getitem__)[: args.limit]
    shown = rows.take(order).select([n for n in rows.column_names if not n.startswith("_cdc_")])
    columns = [c.combine_chunks() for c in shown.columns]
    images = pa.StructArray.from_arrays(columns, fields=list(shown.schema)) if columns else None
    defs, _ = history_scope.definitions(changelog)
    if images is not None:
        sys.stdout.write(
            history_output.rows_render(args.format, defs.get((database, table)), images, (database, table))
        )
    if len(order) < rows.num_rows:
        print(f"note: the first {len(order)} of {rows.num_rows} rows by key (--limit)", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="mysqlcapture-compact", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("manifest", nargs="?", help="the MySQLCapture manifest (the worker's)")
    common.add_argument("--changelog", help="the change log's URI, instead of a manifest")
    common.add_argument("--output", help="current-state location (default: spec.compaction.outputUri or beside)")
    compact = sub.add_parser("compact", parents=[common], help="fold the change log into current-state tables")
    compact.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    compact.add_argument("--no-optimize", dest="optimize", action="store_false", help="skip OPTIMIZE and VACUUM")
    run = sub.add_parser("run", help="compact a change log given by URI (the Kubernetes entrypoint)")
    run.add_argument("--changelog", required=True, help="the change log's URI")
    run.add_argument("--output", help="current-state location (default: <changelog>-compacted)")
    run.add_argument("--retention-hours", type=int, default=168, help="VACUUM retention of the change log")
    run.add_argument("--master", default=None, help="Spark master (default: as spark-submit set it)")
    run.add_argument("--no-optimize", dest="optimize", action="store_false", help="skip OPTIMIZE and VACUUM")
    history_cli.add_commands(sub, common)
    show = sub.add_parser("show", parents=[common], help="print current rows of one table")
    show.add_argument("--table", required=True, help="database.table")
    show.add_argument("--limit", type=int, default=10, help="at most this many rows, by key (default 10)")
    show.add_argument("--format", choices=history_output.FORMATS, default="table")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    handler = {"compact": _compact, "run": _run, "show": _show}.get(args.command, _history_question)
    try:
        return handler(args)
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2
    except Usage as exc:
        print(f"mysqlcapture-compact {args.command}: {exc}", file=sys.stderr)
        return 2
    except history_cli.Refused as exc:
        print(exc, file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
