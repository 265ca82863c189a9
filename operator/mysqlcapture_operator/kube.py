"""The thin Kubernetes API layer: server-side apply of any manifest, get, delete, status patches, discovery.

Plain REST over the official client's configured connection (kubeconfig or in-cluster), so a manifest dict
from a builder goes to the API server as it is, and kinds are mapped to resource paths by discovery.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes import client, config

FIELD_MANAGER = "mysqlcapture-operator"


class KubeError(RuntimeError):
    """A request the API server refused: `status` is the HTTP status, `message` its Status message."""

    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None):
        self.status = status
        self.message = message
        self.body = body or {}
        super().__init__(f"HTTP {status}: {message}")


@dataclass(frozen=True)
class ApiResource:
    """Where a kind lives: its group/version, plural and whether it is namespaced."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool


def load_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient from `kubeconfig`, else $KUBECONFIG / ~/.kube/config, else the in-cluster account."""
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()


class Kube:
    """A few verbs over any kind; thread-safe (kopf runs sync handlers in a thread pool)."""

    def __init__(self, api: client.ApiClient, *, field_manager: str = FIELD_MANAGER, discovery_ttl: float = 60.0):
        self.api = api
        self.field_manager = field_manager
        # Discovery answers are kept for discovery_ttl seconds: CRDs installed later (the Prometheus or
        # Spark operator) are noticed by the next reconcile after that.
        self.discovery_ttl = discovery_ttl
        self._resources: dict[str, tuple[float, dict[str, ApiResource] | None]] = {}
        self._lock = threading.Lock()

    # -- transport ------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One API request; the decoded JSON answer, or KubeError with the server's message."""
        url = self.api.configuration.host + path + (f"?{urlencode(query)}" if query else "")
        # The client's default headers too (a User-Agent; Impersonate-User where a caller set one).
        headers = {**self.api.default_headers, "Accept": "application/json", "Content-Type": content_type}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], url, method, body)
        # The client's REST layer serialises a dict body as JSON (valid YAML for apply patches).
        resp = self.api.rest_client.request(method, url, headers=headers, body=body, _request_timeout=30)
        raw = resp.read()
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"message": raw.decode(errors="replace")}
        if not 200 <= resp.status < 300:
            message = answer.get("message") if isinstance(answer, dict) else None
            raise KubeError(resp.status, str(message or resp.reason), answer if isinstance(answer, dict) else None)
        return answer if isinstance(answer, dict) else {"items": answer}

    # -- discovery ------------------------------------------------------------------------------------
    def resources(self, api_version: str, *, refresh: bool = False) -> dict[str, ApiResource] | None:
        """Kind -> ApiResource served under `api_version`, or None when the API server does not serve it."""
        with self._lock:
            cached = self._resources.get(api_version)
            if not refresh and cached is not None and time.monotonic() - cached[0] < self.discovery_ttl:
                return cached[1]
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            found = self.request("GET", path)
        except KubeError as exc:
            if exc.status != 404:
                raise
            table = None
        else:
            table = {
                r["kind"]: ApiResource(api_version, r["kind"], r["name"], bool(r["namespaced"]))
                for r in found.get("resources", [])
                if "/" not in r["name"]
            }
        with self._lock:
            self._resources[api_version] = (time.monotonic(), table)
        return table

    def serves(self, api_version: str, kind: str, *, refresh: bool = False) -> bool:
        """True when the API server serves `kind` in `api_version` (e.g. a third-party CRD is installed)."""
        table = self.resources(api_version, refresh=refresh)
        return table is not None and kind in table

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        table = self.resources(api_version)
        if table is None or kind not in table:
            table = self.resources(api_version, refresh=True)
        if table is None or kind not in table:
            raise KubeError(404, f"the API server does not serve {kind} in {api_version}")
        res = table[kind]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if res.namespaced:
            if not namespace:
                raise ValueError(f"{kind} is namespaced: a namespace is required")
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{res.plural}"
        return base + (f"/{quote(name)}" if name else "")

    # -- verbs ----------------------------------------------------------------------------------------
    def apply(self, obj: dict[str, Any], *, dry_run: bool = False, force: bool = True) -> dict[str, Any]:
        """Server-side apply of a whole manifest (our field manager owns what it sets)."""
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        query = {"fieldManager": self.field_manager, "fieldValidation": "Strict"}
        if force:
            query["force"] = "true"
        if dry_run:
            query["dryRun"] = "All"
        return self.request("PATCH", path, body=obj, query=query, content_type="application/apply-patch+yaml")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", self.path(api_version, kind, name, namespace))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None, **query: str) -> list[dict[str, Any]]:
        items = self.request("GET", self.path(api_version, kind, namespace=namespace), query=query or None)
        return list(items.get("items", []))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete in the background (the garbage collector removes dependents); False when already gone."""
        try:
            self.request(
                "DELETE",
                self.path(api_version, kind, name, namespace),
                body={"propagationPolicy": "Background"},
            )
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str | None, status: dict[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch of the status subresource."""
        path = self.path(api_version, kind, name, namespace) + "/status"
        return self.request("PATCH", path, body={"status": status}, content_type="application/merge-patch+json")

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.request(
            "POST", self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace")), body=obj
        )
