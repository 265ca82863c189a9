"""`make demo`: a private MariaDB (or MySQL: `make demo FLAVOR=mysql`), a small shop workload, the worker streaming it
into a local change log, a summary."""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from mysqlcapture_api.changelog import read_delta
from mysqlcapture_worker.app import Worker
from mysqlcapture_worker.settings import MetricsSettings, SinkSettings, SourceSettings, WorkerSettings
from prometheus_client import CollectorRegistry

from mysqlcapture_dev.embedded import start_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the embedded demo")
    parser.add_argument("--flavor", choices=("mariadb", "mysql"), default="mariadb", help="the private source server")
    flavor = parser.parse_args(argv).flavor
    out = Path("demo-output").resolve()
    # Each demo starts a new private server: a change log (and its checkpoint) of an earlier run, from another
    # server, would be resumed as if that server had failed over to this one.
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    server = start_server(1, flavor=flavor)
    print(f"source: a private {server.version} on port {server.port}", flush=True)
    try:
        server.execute(
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id INT PRIMARY KEY, customer VARCHAR(64), total DECIMAL(10,2), "
            "status ENUM('new','paid','shipped'), placed DATETIME(3))",
        )
        for i in range(1, 201):
            server.execute(f"INSERT INTO shop.orders VALUES ({i}, 'customer {i % 17}', {i}.25, 'new', NOW(3))")
        server.execute(
            "UPDATE shop.orders SET status = 'paid' WHERE id % 3 = 0", "DELETE FROM shop.orders WHERE id % 10 = 0"
        )
        uri = str(out / "changelog")
        settings = WorkerSettings(
            name="demo",
            source=SourceSettings(
                host="127.0.0.1", port=server.port, user="root", password="root", replica_server_id=900
            ),
            sink=SinkSettings(delta_uri=uri),
            metrics=MetricsSettings(port=0),
        )
        worker = Worker(settings, registry=CollectorRegistry(), exit_at_end=True)
        worker.run(threading.Event())
        rows = read_delta(uri).to_pylist()
        counts = collections.Counter((r["database"], r["table"], r["type"]) for r in rows)
        print(f"change log at {uri}: {len(rows)} events")
        for (db, table, kind), n in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2])):
            print(f"  {db}.{table or '-'} {kind}: {n}")
        print(f"checkpoint: {worker.position}")
    finally:
        server.stop()
    compact(uri)


def compact(changelog: str) -> None:
    """Fold the change log into current-state tables, show a few rows and one row's history.

    Runs the Spark job as a subprocess: the worker package never imports pyspark.
    """
    cli = [sys.executable, "-m", "mysqlcapture_compaction.cli"]
    for args in (
        ["run", "--changelog", changelog, "--master", "local[2]"],
        ["show", "--changelog", changelog, "--table", "shop.orders", "--limit", "5"],
        ["history", "--changelog", changelog, "--table", "shop.orders", "--pk", "3"],
    ):
        print(f"\n$ mysqlcapture-compact {' '.join(args)}", flush=True)
        subprocess.run([*cli, *args], check=True)


if __name__ == "__main__":
    main()
