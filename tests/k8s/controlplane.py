"""A real Kubernetes control plane as local processes: etcd, kube-apiserver, kube-controller-manager.

Run the way controller-runtime's envtest runs them: everything on 127.0.0.1 with free ports, a private CA
whose client certificate (O=system:masters) is the admin user, service-account signing keys, RBAC
authorization and the ServiceAccount admission plugin off (no token controller is needed for tests). The
binaries come from tests/k8s/build-control-plane.sh (`make control-plane`), cached outside the repository.
No kubelet or scheduler runs: Pods are never started by the cluster (tests/k8s/kubelet.py plays that part).
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from mysqlcapture_dev.embedded.mariadb import free_port

K8S_VERSION = os.environ.get("K8S_VERSION", "v1.36.3")
CACHE = Path(os.environ.get("MYSQLCAPTURE_CACHE", Path.home() / ".cache" / "mysqlcapture"))
BIN_DIR = Path(os.environ.get("MYSQLCAPTURE_K8S_BIN", CACHE / f"k8s-{K8S_VERSION}" / "bin"))
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
CONTROLLERS = "garbagecollector,deployment,replicaset,namespace"


class ControlPlaneError(RuntimeError):
    """A component did not start or did not become healthy; the message carries its log's tail."""


def missing_binaries() -> list[str]:
    """The control-plane binaries not built yet (`make control-plane` builds them)."""
    return [name for name in BINARIES if not os.access(BIN_DIR / name, os.X_OK)]


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed: {done.stderr.strip()}")


def _ec_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=path.parent)


def make_pki(directory: Path) -> None:
    """CA, apiserver serving certificate (127.0.0.1, localhost), admin client certificate, SA key pair."""
    d = directory
    _ec_key(d / "ca.key")
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=mysqlcapture-test-ca", "-days", "7",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-out", "ca.crt", cwd=d)  # fmt: skip
    for name, subject, usage, san in (
        ("apiserver", "/CN=kube-apiserver", "serverAuth", "IP:127.0.0.1,DNS:localhost"),
        ("admin", "/O=system:masters/CN=admin", "clientAuth", None),
    ):
        _ec_key(d / f"{name}.key")
        extra = ["-addext", f"subjectAltName={san}"] if san else []
        _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-subj", subject, "-days", "7", "-addext", f"extendedKeyUsage={usage}",
                 "-addext", "basicConstraints=CA:FALSE", *extra, "-out", f"{name}.crt", cwd=d)  # fmt: skip
    _ec_key(d / "sa.key")
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


@dataclass
class _Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in `workdir`; `start()` / `stop()`, or `with`."""

    workdir: Path | None = None
    start_timeout: float = 90.0
    api_port: int = 0
    kubeconfig: Path = field(init=False)
    _procs: list[_Process] = field(default_factory=list, init=False)
    _owns_workdir: bool = field(default=False, init=False)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        missing = missing_binaries()
        if missing:
            raise ControlPlaneError(f"{', '.join(missing)} not built in {BIN_DIR}: run `make control-plane`")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="mysqlcapture-k8s-"))
            self._owns_workdir = True
        w = self.workdir
        pki = w / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        make_pki(pki)
        self.api_port = free_port()
        self.kubeconfig = w / "kubeconfig"
        self._write_kubeconfig(pki)
        try:
            etcd_port = free_port()
            self._spawn("etcd", [
                "--name=default", f"--data-dir={w / 'etcd'}", "--unsafe-no-fsync=true",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{free_port()}", "--log-level=warn",
            ])  # fmt: skip
            self._wait_http("etcd", f"http://127.0.0.1:{etcd_port}/health")
            self._spawn("kube-apiserver", [
                f"--etcd-servers=http://127.0.0.1:{etcd_port}", f"--cert-dir={w / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}", f"--secure-port={self.api_port}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
                "--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount",
                f"--service-account-issuer={self.server}", f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}", "--endpoint-reconciler-type=none",
            ])  # fmt: skip
            self._wait_http("kube-apiserver", f"{self.server}/readyz", pki=pki)
            kcm_port = free_port()
            self._spawn("kube-controller-manager", [
                f"--kubeconfig={self.kubeconfig}", "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--authentication-skip-lookup=true", f"--controllers={CONTROLLERS}",
                f"--root-ca-file={pki / 'ca.crt'}", f"--service-account-private-key-file={pki / 'sa.key'}",
                "--leader-elect=false", f"--cert-dir={w / 'kcm-certs'}",
            ])  # fmt: skip
            self._wait_http("kube-controller-manager", f"https://127.0.0.1:{kcm_port}/healthz", insecure=True)
        except BaseException:
            self.stop()
            raise
        return self

    def _write_kubeconfig(self, pki: Path) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": self.server, "certificate-authority": str(pki / "ca.crt")}}
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
                }
            ],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin", "namespace": "default"}}],
            "current-context": "test",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.workdir is not None
        log = self.workdir / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([str(BIN_DIR / name), *args], stdout=out, stderr=subprocess.STDOUT)
        self._procs.append(_Process(name, proc, log))

    def _wait_http(self, name: str, url: str, *, pki: Path | None = None, insecure: bool = False) -> None:
        context: ssl.SSLContext | None = None
        if pki is not None:
            context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        elif insecure:
            context = ssl._create_unverified_context()  # the controller-manager's self-signed serving cert
        proc = next(p for p in self._procs if p.name == name)
        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if proc.proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {proc.proc.returncode}:\n{proc.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read()[-500:]!r}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{name} not healthy at {url} after {self.start_timeout}s (last: {last}):\n{proc.tail()}"
        )

    def log_tail(self, name: str, chars: int = 3000) -> str:
        """The end of a component's log, for failure messages."""
        return next((p.tail(chars) for p in self._procs if p.name == name), "")

    def stop(self) -> None:
        for p in reversed(self._procs):
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        for p in reversed(self._procs):
            try:
                p.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=15)
        self._procs.clear()
        if self._owns_workdir and self.workdir is not None:
            with contextlib.suppress(OSError):
                subprocess.run(["rm", "-rf", str(self.workdir)], check=False)
            self.workdir = None
