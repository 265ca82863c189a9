"""One acting operator among replicas: a coordination.k8s.io Lease, renewed while this replica leads.

As client-go's leader election: a Lease whose record has not changed for its duration, by this replica's
own clock (no comparison of clocks across machines), may be taken over; updates carry the resourceVersion,
so two candidates cannot both win. A leader that cannot renew stops acting (the process exits).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mysqlcapture_operator.kube import Kube, KubeError

log = logging.getLogger(__name__)
LEASE_API = "coordination.k8s.io/v1"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """try_acquire_or_renew() once per retry period; `leading` says whether this replica may act."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.leading = False
        self._observed: tuple[Any, float] | None = None  # (the holder's record, when it last changed here)

    def _spec(self, acquire: bool, transitions: int) -> dict[str, Any]:
        now = _micro_time()
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(self.lease_seconds)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return spec

    def try_acquire_or_renew(self) -> bool:
        """One round: True when this replica holds the lease afterwards."""
        lease = self.kube.get(LEASE_API, "Lease", self.name, self.namespace)
        try:
            if lease is None:
                self.kube.create(
                    {
                        "apiVersion": LEASE_API,
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(True, 0),
                    }
                )
                return self._became(True)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            record = (holder, spec.get("renewTime"))
            now = self.clock()
            if self._observed is None or self._observed[0] != record:
                self._observed = (record, now)
            expired = now - self._observed[1] > float(spec.get("leaseDurationSeconds") or self.lease_seconds)
            if holder not in (None, "", self.identity) and not expired:
                return self._became(False)
            mine = holder == self.identity
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
            old = spec if mine else {}
            lease["spec"] = {**old, **self._spec(not mine, transitions)}
            path = self.kube.path(LEASE_API, "Lease", self.name, self.namespace)
            self.kube.request("PUT", path, body=lease)  # carries resourceVersion: a lost race is a 409
            return self._became(True)
        except KubeError as exc:
            if exc.status == 409:
                return self._became(False)
            raise

    def _became(self, leading: bool) -> bool:
        if leading != self.leading:
            log.info("%s %s the lease %s/%s", self.identity, "holds" if leading else "does not hold",
                     self.namespace, self.name)  # fmt: skip
        self.leading = leading
        return leading

    def release(self) -> None:
        """Give the lease up at a clean stop, so a standby takes over at once."""
        if not self.leading:
            return
        lease = self.kube.get(LEASE_API, "Lease", self.name, self.namespace)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = None
        path = self.kube.path(LEASE_API, "Lease", self.name, self.namespace)
        try:
            self.kube.request("PUT", path, body=lease)
        except KubeError as exc:
            log.warning("could not release the lease: %s", exc)
        self.leading = False
