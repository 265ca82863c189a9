"""`make source` as a new user meets it: the private server it starts, with a capture user holding exactly README's
grants, passes `mysqlcapture check` (heartbeats on, as by default) and captures its table with `mysqlcapture run`;
Ctrl-C stops the server."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from tests.support import REPO, read_changelog, run_cli, wait_until, worker_env

README = REPO / "README.md"


def test_the_private_source_and_its_manifest_work_with_readmes_grants(tmp_path: Path, flavor: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlcapture_dev.source", "--flavor", flavor, "--venv", "/v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=worker_env(),
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("mysqlcapture run" in line for line in said), timeout=180, what="the source's start")
        text = "".join(said)
        path = tmp_path / "demo-output" / "capture.yaml"
        assert f"MYSQL_PASSWORD=capture mysqlcapture check {path}" in text, text
        assert 'export PATH="/v/bin:$PATH"' in text, text
        # The grants it gives are the ones README's "What the source needs" lists.
        for grant in re.findall(r"GRANT [^;\n]+", text.split("capture user", 1)[1].split("\n", 1)[0]):
            listed = grant.split(" TO ")[0]
            assert listed.replace("GRANT ", "") in README.read_text(), listed
        check = run_cli("check", str(path), password="capture")
        assert check.returncode == 0, check.stderr
        assert "heartbeat needs CREATE, INSERT, UPDATE on mysqlcapture.*" in check.stdout, check.stdout
        run = run_cli("run", str(path), "--exit-at-end", password="capture", timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        uri = yaml.safe_load(path.read_text())["spec"]["sink"]["delta"]["uri"]
        assert Path(uri).parent.parent == tmp_path / "demo-output", uri  # its own, not `make demo`'s changelog
        rows = read_changelog(uri)
        inserted = sorted(r["data"] for r in rows if r["table"] == "orders" and r["type"] == "insert")
        assert inserted == [
            '{"id":1,"customer":"first customer","total":10.50}',
            '{"id":2,"customer":"second customer","total":99.00}',
        ], rows
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        reader.join(timeout=30)  # the pipe's end: everything it printed is read
        proc.stdout.close()
        assert code == 0, "".join(said)[-3000:]
    assert said[-1] == "source stopped\n", said[-3:]
