"""What the operator may do in the cluster: the rules its ClusterRole needs (the Helm chart mirrors them)."""

from __future__ import annotations

from typing import Any

RULES: tuple[dict[str, Any], ...] = (
    # Its own resource: watch it, write status, and kopf's progress annotations and finalizer-free patches.
    {
        "apiGroups": ["cdc.mysqlcapture.io"],
        "resources": ["mysqlcaptures"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    },
    {"apiGroups": ["cdc.mysqlcapture.io"], "resources": ["mysqlcaptures/status"], "verbs": ["get", "patch", "update"]},
    # Children, by server-side apply (patch creates); delete for a compaction kind no longer used.
    {
        "apiGroups": [""],
        "resources": ["configmaps", "services"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["cronjobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["sparkoperator.k8s.io"],
        "resources": ["scheduledsparkapplications", "sparkapplications"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["monitoring.coreos.com"],
        "resources": ["servicemonitors", "prometheusrules"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    # No Secrets: the worker pod mounts its password's Secret (the kubelet reads it with the pod's rights), so the
    # operator reads none, lists none, watches none.
    # Events on captures (failover, purge risk, snapshot, errors), by kopf's poster and ours.
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    # Leader election among replicas (in the operator's own namespace; a Role would do there).
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
    # Discovery of optional APIs and kopf's scanning of namespaces and CRDs.
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
)
"""The operator's ClusterRole rules. The worker needs none: it talks to no Kubernetes API."""


def cluster_role(name: str = "mysqlcapture-operator") -> dict[str, Any]:
    """RULES as a ClusterRole manifest."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [dict(rule) for rule in RULES],
    }
