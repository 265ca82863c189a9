"""`make source`: a private source server to try `mysqlcapture check` and `run` against, until Ctrl-C.

It is the server `make demo` starts (MariaDB; FLAVOR=mysql: MySQL 9.7), with a `shop.orders` table, a capture user
holding exactly the grants README lists (no more), and a manifest pointing at it written to demo-output/ (its
change log: demo-output/source-<time>/changelog, one per run). Its data lives in a temporary directory and goes when
it stops.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from mysqlcapture_dev.embedded import start_server

USER = "capture"
PASSWORD = "capture"
GRANTS = (
    f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{USER}'@'%'",
    f"GRANT CREATE, INSERT, UPDATE ON mysqlcapture.* TO '{USER}'@'%'",
)


def manifest(port: int, out: Path) -> str:
    """examples/capture-local.yaml's capture, pointed at the private server and writing its change log to `out`."""
    return f"""apiVersion: cdc.mysqlcapture.io/v1alpha1
kind: MySQLCapture
metadata:
  name: local
spec:
  source:
    host: 127.0.0.1
    port: {port}
    user: {USER}
    passwordFrom:
      env: MYSQL_PASSWORD
    serverId: 4242
    tls:
      mode: disabled
  tables:
    include: ["shop.*"]
  start:
    from: earliest
  sink:
    type: delta
    delta:
      uri: {out}
  metrics:
    port: 0
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavor", choices=("mariadb", "mysql"), default="mariadb", help="the private source server")
    parser.add_argument("--venv", default="", help="the virtual environment whose bin/ holds mysqlcapture")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    out = Path("demo-output").resolve()
    out.mkdir(exist_ok=True)
    server = start_server(1, flavor=args.flavor)
    try:
        plugin = " WITH caching_sha2_password" if args.flavor == "mysql" else ""
        server.execute(
            f"CREATE USER '{USER}'@'%' IDENTIFIED{plugin} BY '{PASSWORD}'",
            *GRANTS,
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id INT PRIMARY KEY, customer VARCHAR(64), total DECIMAL(10,2))",
            "INSERT INTO shop.orders VALUES (1, 'first customer', 10.50), (2, 'second customer', 99.00)",
        )
        path = out / "capture.yaml"
        # A change log of its own: each run's server is new, and `make demo` writes demo-output/changelog.
        path.write_text(manifest(server.port, out / f"source-{time.strftime('%Y%m%d-%H%M%S')}" / "changelog"))
        bin_dir = f"{args.venv}/bin" if args.venv else "<the virtual environment>/bin"
        print(
            f"source: a private {server.version} on 127.0.0.1:{server.port}, until Ctrl-C (its data goes with it)\n"
            f"  capture user {USER!r}, password {PASSWORD!r}: {'; '.join(GRANTS)}\n"
            f"  root: mysql -h 127.0.0.1 -P {server.port} -u root -proot shop\n"
            f"a capture of shop.* from it: {path}\n"
            "in another terminal:\n"
            f'  export PATH="{bin_dir}:$PATH"\n'
            f"  MYSQL_PASSWORD={PASSWORD} mysqlcapture check {path}\n"
            f"  MYSQL_PASSWORD={PASSWORD} mysqlcapture run {path}",
            flush=True,
        )
        stop.wait()
    finally:
        server.stop()
        print("source stopped", flush=True)


if __name__ == "__main__":
    main()
