"""Processes the k8s tests run: the operator (`python -m mysqlcapture_operator`) and a kubelet stand-in.

No kubelet can run here, so `run_pod_template` plays one for a Deployment: it reads the pod template as the
API server holds it (command, args, env with Secret values resolved, ConfigMap and Secret volumes written
to files) and starts that container's command as a local process against whatever the config points at (a
private server in the tests). Paths under a volume's mountPath are mapped to a local directory and the
command's `python` is this interpreter; nothing else of the template is changed. `LocalPod.sync_volumes`
does what the kubelet does every minute or so: it writes the volumes' files again from their objects.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.k8s.fixtures import Cluster
from tests.support import REPO, wait_until

SOURCES = os.pathsep.join(str(REPO / d) for d in ("api", "worker", "operator", "spark")) + os.pathsep + str(REPO)


class OperatorProcess:
    """The operator as a subprocess with the test cluster's kubeconfig; `env` adds operator settings."""

    def __init__(self, cluster: Cluster, log_path: Path, *, namespaces: list[str], env: dict[str, str]):
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115
        args = [sys.executable, "-m", "mysqlcapture_operator"]
        for ns in namespaces:
            args += ["--namespace", ns]
        full_env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": SOURCES, **env}
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=REPO)

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def http_url(self, timeout: float = 30.0) -> str:
        """Base URL of the operator's /metrics and /healthz (MYSQLCAPTURE_HTTP_PORT=0 logs the port it got)."""

        def logged() -> str | None:
            assert self.alive(), f"the operator exited: {self.log_text()[-3000:]}"
            found = re.search(r"metrics and health on :(\d+)", self.log_text())
            return found.group(1) if found else None

        port = wait_until(logged, timeout=timeout, what="the operator to serve /metrics and /healthz", interval=0.1)
        return f"http://127.0.0.1:{port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        self._log.close()
        return self.proc.returncode


@dataclass
class LocalPod:
    """One container of a pod template running as a local process."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    template_hash: str
    command: list[str]
    env: dict[str, str]
    sync_volumes: Any  # () -> None: the volumes' files written again from their ConfigMaps and Secrets

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=timeout)


def _secret_value(cluster: Cluster, namespace: str, ref: dict[str, Any]) -> str:
    secret = cluster.kube.get("v1", "Secret", ref["name"], namespace)
    assert secret is not None, f"the pod's Secret {namespace}/{ref['name']} does not exist"
    return base64.b64decode(secret["data"][ref["key"]]).decode()


def _config_map_files(cluster: Cluster, namespace: str, name: str, directory: Path) -> None:
    cm = cluster.kube.get("v1", "ConfigMap", name, namespace)
    assert cm is not None, f"the pod's ConfigMap {namespace}/{name} does not exist"
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in (cm.get("data") or {}).items():
        (directory / key).write_text(value)


def _secret_files(cluster: Cluster, namespace: str, source: dict[str, Any], directory: Path) -> None:
    """A secret volume as the kubelet writes it: `items` (key -> path), or every key; nothing when an optional
    Secret or key is missing (a required one keeps the kubelet from starting the container)."""
    secret = cluster.kube.get("v1", "Secret", source["secretName"], namespace)
    optional = bool(source.get("optional"))
    assert secret is not None or optional, f"the pod's Secret {namespace}/{source['secretName']} does not exist"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    data = (secret or {}).get("data") or {}
    items = source.get("items") or [{"key": k, "path": k} for k in data]
    for item in items:
        if item["key"] not in data:
            assert optional, f"the pod's Secret {namespace}/{source['secretName']} has no key {item['key']!r}"
            continue
        (directory / item["path"]).write_bytes(base64.b64decode(data[item["key"]]))


def run_pod_template(cluster: Cluster, deployment: dict[str, Any], workdir: Path) -> LocalPod:
    """Start the Deployment's (first) container as the kubelet would, locally; see the module docstring."""
    namespace = deployment["metadata"]["namespace"]
    template = deployment["spec"]["template"]
    pod = template["spec"]
    container = pod["containers"][0]
    mounts: dict[str, Path] = {}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def sync_volumes() -> None:
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            local = workdir / "volumes" / mount["name"]
            if "configMap" in volume:
                _config_map_files(cluster, namespace, volume["configMap"]["name"], local)
            elif "secret" in volume:
                _secret_files(cluster, namespace, volume["secret"], local)
            elif "emptyDir" in volume:
                local.mkdir(parents=True, exist_ok=True)
            else:
                raise AssertionError(f"the kubelet stand-in cannot mount volume {volume}")
            mounts[mount["mountPath"]] = local

    sync_volumes()

    def local_path(arg: str) -> str:
        for mount_path, local in mounts.items():
            if arg == mount_path or arg.startswith(mount_path.rstrip("/") + "/"):
                return str(local) + arg[len(mount_path.rstrip("/")) :]
        return arg

    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = local_path(var["value"])
        elif "secretKeyRef" in var.get("valueFrom", {}):
            env[var["name"]] = _secret_value(cluster, namespace, var["valueFrom"]["secretKeyRef"])
        else:
            raise AssertionError(f"the kubelet stand-in cannot resolve env {var}")
    command = [local_path(a) for a in [*container.get("command", []), *container.get("args", [])]]
    assert command and command[0] == "python", f"the worker container runs python, not {command[:1]}"
    command[0] = sys.executable
    log_path = workdir / "pod.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": SOURCES, **env},
            cwd=REPO,
        )
    annotations = template.get("metadata", {}).get("annotations", {})
    return LocalPod(proc, log_path, str(annotations), command, env, sync_volumes)


def wait_for(cluster: Cluster, api_version: str, kind: str, name: str, namespace: str, timeout: float = 60) -> Any:
    """The object once it exists."""
    return wait_until(
        lambda: cluster.kube.get(api_version, kind, name, namespace),
        timeout=timeout,
        what=f"{kind} {namespace}/{name} to exist",
        interval=0.2,
    )
