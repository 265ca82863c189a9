"""`python -m mysqlcapture_operator`: serve /metrics and /healthz, wait for the Lease, run kopf while holding it."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

import kopf
from prometheus_client import CollectorRegistry

from mysqlcapture_operator import handlers
from mysqlcapture_operator.kube import Kube, KubeError, load_api_client
from mysqlcapture_operator.leader import LeaderElector
from mysqlcapture_operator.metrics import OperatorMetrics, serve

log = logging.getLogger("mysqlcapture_operator")
EXIT_LOST_LEASE = 3


async def _hold(elector: LeaderElector, stop: asyncio.Event, period: float) -> None:
    """Renew every `period` seconds; on failure stop kopf (the process then exits and restarts as standby)."""
    failing_since: float | None = None
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        await asyncio.sleep(period)
        try:
            ok = await asyncio.to_thread(elector.try_acquire_or_renew)
        except (KubeError, OSError) as exc:
            log.warning("lease renewal failed: %s", exc)
            ok = True if failing_since is None else loop.time() - failing_since < elector.lease_seconds * 2 / 3
            failing_since = failing_since or loop.time()
        else:
            failing_since = None
        if not ok:
            log.error("lost the lease %s/%s: stopping", elector.namespace, elector.name)
            stop.set()


async def run(namespaces: Sequence[str], liveness: str | None) -> int:
    settings = handlers.SETTINGS
    metrics = OperatorMetrics(CollectorRegistry())
    # From the start, before the Lease: a standby is live and scrapeable too.
    runner, _ = await serve(metrics, host="0.0.0.0", port=settings.http_port)
    try:
        return await _lead_then_operate(namespaces, liveness, metrics)
    finally:
        await runner.cleanup()


async def _lead_then_operate(namespaces: Sequence[str], liveness: str | None, metrics: OperatorMetrics) -> int:
    settings = handlers.SETTINGS
    kube = Kube(load_api_client())
    elector = LeaderElector(
        kube,
        namespace=settings.lease_namespace,
        name=settings.lease_name,
        identity=settings.identity,
        lease_seconds=settings.lease_seconds,
    )
    period = max(0.5, settings.lease_seconds / 3)
    log.info("%s: waiting to lead (lease %s/%s)", settings.identity, settings.lease_namespace, settings.lease_name)
    while True:
        try:
            if await asyncio.to_thread(elector.try_acquire_or_renew):
                break
        except (KubeError, OSError) as exc:
            log.warning("lease: %s", exc)
        await asyncio.sleep(period)
    log.info("%s: leading; starting the operator", settings.identity)
    metrics.leader.set(1)
    stop = asyncio.Event()
    holder = asyncio.create_task(_hold(elector, stop, period))
    try:
        await kopf.operator(
            standalone=True,  # the Lease, not kopf peering, decides who acts
            clusterwide=not namespaces,
            namespaces=list(namespaces),
            stop_flag=stop,
            liveness_endpoint=liveness,
            memo=kopf.Memo(metrics=metrics),
        )
    finally:
        metrics.leader.set(0)
        lost = stop.is_set() and not elector.leading
        holder.cancel()
        if not lost:
            await asyncio.to_thread(elector.release)
    return EXIT_LOST_LEASE if lost else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mysqlcapture_operator", description=__doc__)
    parser.add_argument("-n", "--namespace", action="append", default=[], help="namespace (glob) to watch; default all")
    parser.add_argument(
        "--liveness",
        default=None,
        help="also kopf's own liveness endpoint, e.g. http://0.0.0.0:8081/healthz (served only while leading; "
        "/healthz on MYSQLCAPTURE_HTTP_PORT is served by every replica)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # kopf logs every timer tick at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    return asyncio.run(run(args.namespace, args.liveness))


if __name__ == "__main__":
    sys.exit(main())
