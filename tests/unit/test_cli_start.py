"""What a person meets before the worker reaches a server: the command itself, a port where no MySQL server listens,
a metrics port taken, Ctrl-C while the command loads. Each is one line and an exit code, within a bound, never a
traceback or a hang."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, manifest, run_cli, wait_until, worker_env, write_manifest


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A TCP port that accepts connections and, unless told otherwise, never says a word (an HTTP server's way)."""
    sock = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    yield sock, accepted
    sock.close()
    for conn in accepted:
        conn.close()


def _serve(sock: socket.socket, accepted: list[socket.socket], greeting: bytes) -> None:
    def loop() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed by the fixture
                return
            accepted.append(conn)
            if greeting:
                conn.sendall(greeting)

    threading.Thread(target=loop, daemon=True).start()


def _doc(tmp_path: Path, port: int, **spec: object) -> Path:
    doc = manifest("start", port=port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "changelog")}})
    doc["spec"]["source"]["connectTimeoutSeconds"] = 2
    doc["spec"].update(spec)
    return write_manifest(tmp_path / "start.yaml", doc)


@pytest.mark.parametrize(
    ("greeting", "said"),
    [
        (b"", "accepts connections but sent no MySQL greeting within 2 s: something else listens there"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "answered, but not as a MySQL server does"),
    ],
    ids=["silent", "ssh-banner"],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_port_where_no_mysql_server_listens_is_one_line_within_the_connect_timeout(
    tmp_path: Path, listener: tuple[socket.socket, list[socket.socket]], greeting: bytes, said: str, command: str
) -> None:
    sock, accepted = listener
    _serve(sock, accepted, greeting)
    port = sock.getsockname()[1]
    started = time.monotonic()
    result = run_cli(command, str(_doc(tmp_path, port)), timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("mysqlcapture: ")]
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port} {said}" in lines[0], lines[0]
    assert "check spec.source.host and spec.source.port" in lines[0], lines[0]
    assert took < 30, f"{command} took {took:.1f} s with a 2 s connect timeout"
    assert not (tmp_path / "changelog").exists()


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path, listener: tuple[socket.socket, list[socket.socket]]) -> None:
    sock, _ = listener  # listening: the worker cannot bind it
    taken = sock.getsockname()[1]
    path = _doc(tmp_path, 1, metrics={"port": taken})
    result = run_cli("run", str(path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        f"mysqlcapture: cannot serve metrics on port {taken} (Address already in use): another process listens there "
        "(another capture's worker?); set spec.metrics.port to a free port (0: any free port)"
    )
    flag = run_cli("run", str(_doc(tmp_path, 1)), "--metrics-port", str(taken), timeout=60)
    assert flag.returncode == 2 and "set --metrics-port to a free port" in flag.stderr, flag.stderr


def _loading(pid: int) -> bool:
    """The interpreter is up and loads the command's modules: an extension module of the environment is mapped."""
    try:
        return "site-packages" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:  # ended already: what it said is checked next
        return True


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3, 0.6, 1.0])
def test_ctrl_c_while_the_command_loads_is_no_traceback(
    tmp_path: Path, listener: tuple[socket.socket, list[socket.socket]], delay: float
) -> None:
    """SIGINT at any moment of the start, once the interpreter runs the command (a signal during the interpreter's
    own start-up is Python's to report): a quiet end (130 before the worker's own handler is in place, then its
    clean stop), never Python's KeyboardInterrupt traceback."""
    sock, accepted = listener
    _serve(sock, accepted, b"")  # the worker waits on its greeting: still running when the signal comes
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlcapture_worker.cli", "run", str(_doc(tmp_path, sock.getsockname()[1]))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=worker_env("root"),
        cwd=REPO,
    )
    wait_until(lambda: _loading(proc.pid), timeout=60, what="the command's modules loading", interval=0.005)
    time.sleep(delay)  # a point in its start, not a wait for a condition
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode in (-signal.SIGINT, 130, 3), (proc.returncode, err)
    if proc.returncode == 130:
        assert err.strip() == "mysqlcapture: interrupted before it started; nothing was written", err


@pytest.mark.parametrize("command", ["mysqlcapture", "mysqlcapture-compact"])
def test_the_environments_commands_run_this_checkout_without_pythonpath(tmp_path: Path, command: str) -> None:
    """README's way to the commands (`export PATH="$(make venv-path)/bin:$PATH"`, no $PYTHONPATH): they import this
    checkout's code, though the cached environment is shared by checkouts and its editable install names the one that
    made it, which may be gone (the commands then stopped with ModuleNotFoundError)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import mysqlcapture_worker, mysqlcapture_compaction as c; print(mysqlcapture_worker.__file__, c.__file__)",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, f"run `make venv-checkout` (or any make target) in {REPO}: {where.stderr}"
    files = [Path(f) for f in where.stdout.split()]
    assert len(files) == 2 and all(f.is_relative_to(REPO) for f in files), (files, REPO)
    done = subprocess.run(
        [str(Path(sys.executable).parent / command), "--help"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {command} "), done.stdout
