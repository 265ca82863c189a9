"""The `mysqlcapture` commands: run a capture from its MySQLCapture manifest, check it, ask for a resnapshot, print
the CRD (`cli` loads this module)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from mysqlcapture_api.manifest import ManifestError, load_manifest
from mysqlcapture_api.spec import MySQLCapture
from prometheus_client import CollectorRegistry

from mysqlcapture_worker.logs import configure_logging
from mysqlcapture_worker.settings import SettingsError, SourceSettings, WorkerSettings, settings_from_capture

log = logging.getLogger("mysqlcapture")

EXIT_CONFIG = 2
EXIT_SOURCE = 3
EXIT_WOULD_LOSE = 4  # continuing would lose events: binlog purged, failover target behind
EXIT_FATAL = 1


# Server errors a person fixes at the source or in the manifest: (codes, status reason, what to do).
_SOURCE_ERRORS: tuple[tuple[frozenset[int], str, str], ...] = (
    (
        frozenset({1045, 1698}),
        "AccessDenied",
        "check spec.source.user and the password spec.source.passwordFrom names (and the user's host part)",
    ),
    (
        frozenset({1044, 1142, 1143, 1227, 1370}),
        "MissingGrant",
        "GRANT the privilege the message names to the capture user",
    ),
    (frozenset({1130}), "HostNotAllowed", "allow the worker's host for the capture user (CREATE USER 'user'@'host')"),
    (
        frozenset({2003, 2005, 2013, 2006}),
        "SourceUnreachable",
        "check spec.source.host and spec.source.port, and that the server runs",
    ),
    (
        frozenset({2026}),
        "TlsFailed",
        "TLS failed: check spec.source.tls (mode, caFile) against the server's certificate, or tls.mode: disabled",
    ),
    (
        frozenset({2059, 2061}),
        "AuthenticationNeedsTls",
        "the server's authentication needs TLS or its RSA public key: set spec.source.tls.mode: required",
    ),
)


@dataclass(frozen=True)
class Failure:
    """Why the worker stopped: its exit code, a CamelCase reason (the capture's condition), one line for a person."""

    code: int
    reason: str
    line: str


def source_failure(exc: BaseException) -> Failure:
    """The failure an error raised by the source server, or the connection to it, stands for."""
    import pymysql

    code = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
    message = exc.args[-1] if isinstance(exc, pymysql.err.MySQLError) and exc.args else str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in str(message) or "[SSL" in str(message):
        # PyMySQL reports a failed handshake as 2003 "can't connect": the fix is in the TLS settings.
        return Failure(
            EXIT_SOURCE,
            "TlsFailed",
            f"TLS to the source failed: {message} (check spec.source.tls: mode, and caFile for verify-ca and "
            "verify-identity: it must hold the CA that signed the server's certificate)",
        )
    for codes, reason, fix in _SOURCE_ERRORS:
        if code in codes:
            return Failure(EXIT_SOURCE, reason, f"source error {code}: {message} ({fix})")
    if isinstance(exc, ssl_errors()):
        return Failure(
            EXIT_SOURCE, "TlsFailed", f"TLS to the source failed: {exc} (check spec.source.tls: mode and caFile)"
        )
    if code is not None:
        return Failure(EXIT_FATAL, "SourceError", f"source error {code}: {message}")
    return Failure(EXIT_FATAL, "Fatal", f"{type(exc).__name__}: {exc}")


def source_error_line(exc: BaseException) -> tuple[int, str]:
    """(exit code, one line) for an error raised by the source server or the connection to it."""
    failure = source_failure(exc)
    return failure.code, failure.line


def failure_of(exc: BaseException) -> Failure:
    """The failure any error that stops `run` stands for."""
    from mysqlcapture_worker.column_rules import ColumnRuleError
    from mysqlcapture_worker.engine import CaptureError
    from mysqlcapture_worker.failover.purge import BinlogPurgedError
    from mysqlcapture_worker.failover.resume import FailoverError
    from mysqlcapture_worker.positions import CheckpointKeyError
    from mysqlcapture_worker.sinks import SinkError, SinkMismatch
    from mysqlcapture_worker.source.checks import SourceConfigError

    if isinstance(exc, SourceConfigError):
        return Failure(EXIT_SOURCE, exc.reason, str(exc))
    if isinstance(exc, SettingsError):
        return Failure(EXIT_CONFIG, exc.reason, str(exc))
    if isinstance(exc, BinlogPurgedError):
        return Failure(EXIT_WOULD_LOSE, "BinlogPurged", str(exc))
    if isinstance(exc, FailoverError):
        return Failure(EXIT_WOULD_LOSE, "FailoverWouldLoseEvents", str(exc))
    if isinstance(exc, ColumnRuleError):
        return Failure(EXIT_CONFIG, "ColumnRuleInvalid", str(exc))
    if isinstance(exc, CheckpointKeyError):
        return Failure(EXIT_CONFIG, "ColumnKeyChanged", str(exc))
    if isinstance(exc, CaptureError):
        return Failure(EXIT_FATAL, "CaptureFailed", str(exc))
    if isinstance(exc, SinkError):
        return Failure(EXIT_WOULD_LOSE if isinstance(exc, SinkMismatch) else EXIT_FATAL, exc.reason, str(exc))
    return source_failure(exc)


# --retry-errors: the first retry after this many seconds, doubling up to the last.
RETRY_SECONDS = (10.0, 300.0)


def ssl_errors() -> tuple[type[BaseException], ...]:
    import ssl

    return (ssl.SSLError, ssl.CertificateError)


def _load(path: str) -> tuple[MySQLCapture, WorkerSettings]:
    capture = load_manifest(path)
    return capture, settings_from_capture(capture)


class _NoPandas:
    """A meta-path finder that refuses pandas (see `_without_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (not in the worker's process)", name=name)


def _without_pandas() -> None:
    """The worker never uses pandas, but PyArrow's shim imports it on the first `pa.array` of a Python list: about
    0.2 s of every start and 40 MiB. The worker's process runs as if it were not installed (PyArrow and delta-rs
    work without it)."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def cmd_run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    _without_pandas()
    from mysqlcapture_worker.app import Worker
    from mysqlcapture_worker.column_rules import KeyRotated
    from mysqlcapture_worker.metrics import HealthState, serve_http

    capture = load_manifest(args.manifest)
    configure_logging(capture.metadata.name, args.log_level or capture.spec.log_level, json_lines=not args.plain_logs)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: committing and stopping", signum)
        stop.set()

    # Before anything a supervisor can see (the metrics port): a SIGTERM from then on is a clean stop.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    registry = CollectorRegistry()
    health = HealthState()
    port = capture.spec.metrics.port if args.metrics_port is None else args.metrics_port
    try:
        server = serve_http(registry, health, port)
    except OSError as exc:  # the port taken (another capture's worker, say): one line, nothing started
        where = "--metrics-port" if args.metrics_port is not None else "spec.metrics.port"
        print(
            f"mysqlcapture: cannot serve metrics on port {port} ({exc.strerror or exc}): another process listens "
            f"there (another capture's worker?); set {where} to a free port (0: any free port)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    log.info("metrics on :%d", server.server_address[1])
    delay = RETRY_SECONDS[0]
    try:
        while True:
            started = time.monotonic()
            try:
                settings = settings_from_capture(capture)
                settings = replace(settings, metrics=replace(settings.metrics, port=port))
                Worker(settings, registry=registry, health=health, exit_at_end=args.exit_at_end).run(stop)
                return 0
            except KeyRotated as exc:  # committed: the same capture runs on at once with the new key
                log.info("%s", exc)
                continue
            except Exception as exc:  # one line for the person, the traceback in the debug log
                log.debug("stopped by an error", exc_info=True)
                failure = failure_of(exc)
                log.error("%s", failure.line)
                if not args.retry_errors:
                    print(f"mysqlcapture: {failure.line}", file=sys.stderr)
                    return failure.code
            # --retry-errors (the worker pod): stay up and say why on /status until the cause is fixed.
            if time.monotonic() - started > RETRY_SECONDS[1]:
                delay = RETRY_SECONDS[0]  # it ran a good while: a new failure, not the same one again
            health.failed(failure.reason, failure.line, delay)
            log.warning("%s: running again in %.0f s", failure.reason, delay)
            deadline = time.monotonic() + delay
            while not stop.wait(min(5.0, max(0.0, deadline - time.monotonic()))):
                health.beat()  # alive, waiting: not a stalled loop for the liveness probe
                if time.monotonic() >= deadline:
                    break
            if stop.is_set():
                return 0
            delay = min(delay * 2, RETRY_SECONDS[1])
    finally:
        server.shutdown()


def _connect_source(s: SourceSettings) -> Any:
    """A connection to the capture's source, or None after printing why there is none."""
    import pymysql

    from mysqlcapture_worker.replication.stream import SourceConnection

    try:
        return SourceConnection(
            host=s.host,
            port=s.port,
            user=s.user,
            password=s.password,
            connect_timeout=s.connect_timeout,
            ssl=s.ssl,
            ssl_disabled=s.ssl_disabled,
        )
    except (pymysql.err.MySQLError, OSError) as exc:
        _, line = source_error_line(exc)
        print(f"mysqlcapture: cannot connect to {s.host}:{s.port}: {line}", file=sys.stderr)
        return None


def _nothing_matched(s: WorkerSettings) -> str:
    return (
        f"warning: spec.tables (include {list(s.tables.include)}, exclude {list(s.tables.exclude)}) matches no table "
        "on the server now: nothing is captured until a matching table is created; check the globs"
    )


def _storage_problem(s: WorkerSettings) -> str | None:
    """Why the worker could not write where a local sink path points, found by making what is missing there (and
    removing it again); None when it can, or when the sink is not on the local file system."""
    import contextlib
    import os
    import tempfile
    from pathlib import Path

    if s.sink.type == "delta":
        setting, target = "spec.sink.delta.uri", s.sink.delta_uri.removeprefix("file://")
    elif s.sink.type == "jsonl" and s.sink.jsonl.path != "-":
        setting, target = "spec.sink.jsonl.path", str(Path(s.sink.jsonl.path).parent)
    else:
        return None
    if "://" in target:
        return None  # an object store: its credentials are the worker's, checked when it starts
    path = Path(target).absolute()
    made: list[Path] = []
    try:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for p in reversed(missing):
            p.mkdir()
            made.append(p)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".mysqlcapture-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return (
            f"{setting} {target}: the worker could not write there ({exc.strerror or exc}): set it to a directory "
            "the worker can create and write"
        )
    finally:
        for p in reversed(made):
            with contextlib.suppress(OSError):
                p.rmdir()
    return None


def cmd_check(args: argparse.Namespace) -> int:
    from mysqlcapture_worker.column_rules import ColumnRuleError
    from mysqlcapture_worker.filters import TableFilter
    from mysqlcapture_worker.row_filters import RowFilters
    from mysqlcapture_worker.schema.introspect import capture_schema
    from mysqlcapture_worker.source import foreign_keys
    from mysqlcapture_worker.source.checks import SourceConfigError, check_source
    from mysqlcapture_worker.source.snapshot_needs import heartbeat_need, snapshot_needs

    _, settings = _load(args.manifest)
    s = settings
    conn = _connect_source(s.source)
    if conn is None:
        return EXIT_SOURCE
    try:
        info = check_source(
            conn,
            replica_server_id=s.source.replica_server_id,
            user=s.source.user,
            server_id_wait_seconds=0,
            require_gtids=s.failover.mode == "gtid",
        )
        needs = (
            [heartbeat_need(conn, user=s.source.user, database=s.heartbeat.database)]
            if s.heartbeat.interval_s > 0
            else []
        )
        if s.snapshot.mode != "never":
            needs += snapshot_needs(
                conn,
                info.dialect,
                user=s.source.user,
                heartbeat_database=s.heartbeat.database,
                parallelism=s.snapshot.parallelism,
            )
        missing = [n for n in needs if not n.ok]
        if missing:
            reason = "SnapshotNotPossible" if missing[0].who == "snapshot" else "MissingGrant"
            raise SourceConfigError(missing[0].line(), reason)
        captured = TableFilter(s.tables.include, s.tables.exclude, s.heartbeat.database).includes
        schema = capture_schema(conn, captured)
        storage = _storage_problem(s)
        if storage is not None:
            print(f"mysqlcapture: {storage}", file=sys.stderr)
            return EXIT_CONFIG
        notes = [] if schema.tables else [_nothing_matched(s)]
        keys = foreign_keys.report(conn, info.dialect).lines(schema, captured, foreign_keys.all_constraints(conn))
        ruled = s.columns.lines(schema.tables.values()) if s.columns is not None else []
        ruled += RowFilters(s.rows, s.columns).check(schema.tables.values())
    except ColumnRuleError as exc:
        print(f"mysqlcapture: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SourceConfigError as exc:
        print(f"mysqlcapture: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except Exception as exc:  # a server error: one line, never a traceback
        code, line = source_error_line(exc)
        print(f"mysqlcapture: {line}", file=sys.stderr)
        return code
    finally:
        conn.close()
    print(f"ok: {info.version} server_id={info.server_id} binlog_row_metadata={info.row_metadata}")
    for line in notes:
        print(line)
    for need in needs:
        print(need.line())
    for line in keys:
        print(line)
    for line in ruled:
        print(line)
    return 0


def _table_exists(conn: Any, database: str, table: str) -> bool:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s", (database, table)
        )
        return cur.fetchone() is not None


def cmd_resnapshot(args: argparse.Namespace) -> int:
    from mysqlcapture_worker.filters import TableFilter
    from mysqlcapture_worker.snapshot.requests import request_snapshot

    _, s = _load(args.manifest)
    if args.table is not None and "." not in args.table:
        print(f"mysqlcapture: --table {args.table}: expected database.table", file=sys.stderr)
        return EXIT_CONFIG
    if args.table is not None:
        db, _, name = args.table.partition(".")
        if not TableFilter(s.tables.include, s.tables.exclude, s.heartbeat.database).includes(db, name):
            print(
                f"mysqlcapture: --table {args.table}: not a table this capture includes (spec.tables.include "
                f"{list(s.tables.include)}, exclude {list(s.tables.exclude)}); name one it captures",
                file=sys.stderr,
            )
            return EXIT_CONFIG
    conn = _connect_source(s.source)
    if conn is None:
        return EXIT_SOURCE
    try:
        if args.table is not None and not _table_exists(conn, db, name):
            print(f"mysqlcapture: --table {args.table}: the source has no such table; nothing asked", file=sys.stderr)
            return EXIT_CONFIG
        request_id = request_snapshot(conn, database=s.heartbeat.database, client_id=s.name, table=args.table)
    except Exception as exc:  # a server error (a missing grant on the heartbeat database): one line
        code, line = source_error_line(exc)
        print(f"mysqlcapture: {line}", file=sys.stderr)
        return code
    finally:
        conn.close()
    what = args.table or "every captured table"
    print(f"resnapshot request {request_id} for {what} written to {s.heartbeat.database}; the running worker takes it")
    return 0


def cmd_crd(args: argparse.Namespace) -> int:
    from mysqlcapture_api.crd import render_crd_yaml

    sys.stdout.write(render_crd_yaml())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mysqlcapture", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="stream a capture described by a MySQLCapture manifest")
    run.add_argument("manifest", help="path to a MySQLCapture YAML manifest")
    run.add_argument("--metrics-port", type=int, default=None, help="override spec.metrics.port (0: any free port)")
    run.add_argument("--log-level", default=None, help="override spec.logLevel")
    run.add_argument("--exit-at-end", action="store_true", help="stop once the binlog's current end is committed")
    run.add_argument("--plain-logs", action="store_true", help="human-readable logs instead of JSON lines")
    run.add_argument(
        "--retry-errors",
        action="store_true",
        help="on an error, serve it on /status and run again after a backoff instead of exiting (the worker pod)",
    )
    run.set_defaults(func=cmd_run)
    check = sub.add_parser("check", help="validate the manifest and the source server, then exit")
    check.add_argument("manifest")
    check.set_defaults(func=cmd_check)
    resnap = sub.add_parser("resnapshot", help="ask the running worker to snapshot a table (or all) again")
    resnap.add_argument("manifest")
    resnap.add_argument("--table", default=None, help="database.table (default: every captured table)")
    resnap.set_defaults(func=cmd_resnapshot)
    crd = sub.add_parser("crd", help="print the MySQLCapture CustomResourceDefinition")
    crd.set_defaults(func=cmd_crd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ManifestError, SettingsError) as exc:
        print(f"mysqlcapture: {exc}", file=sys.stderr)
        return EXIT_CONFIG
