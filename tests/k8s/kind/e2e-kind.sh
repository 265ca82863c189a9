#!/usr/bin/env bash
# `make e2e-kind`: the end-to-end scenario on a real (kind) cluster, for people with Docker and kind.
# Not run by this repository's CI (its machines have no container engine); the same path is covered there by
# tests/k8s against a real API server with a stand-in kubelet.
#
# Builds the worker, operator and compaction images, loads them into a kind cluster, installs the chart,
# starts a MariaDB source (tests/k8s/kind/mariadb.yaml), applies examples/capture-cluster.yaml (source and
# sink pointed at that cluster), waits for phase Streaming, writes rows and waits for the status to move.
# Needs: docker, kind, kubectl, helm (v3.8+ or v4). KEEP=1 leaves the cluster running.
set -euo pipefail
cd "$(dirname "$0")/../../.."

CLUSTER=${KIND_CLUSTER:-mysqlcapture-e2e}
TAG=${TAG:-e2e}
NS=shop
PYTHON=${PYTHON:-python3}
for tool in docker kind kubectl helm "$PYTHON"; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 2; }
done
step() { printf '\n== %s\n' "$*"; }
cleanup() {
  status=$?
  if [ "$status" != 0 ]; then
    kubectl -n "$NS" get mysqlcaptures,deployments,pods -o wide || true
    kubectl -n "$NS" describe mysqlcapture shop || true
    kubectl -n mysqlcapture-system logs deploy/mysqlcapture-operator --tail=100 || true
    kubectl -n "$NS" logs deploy/shop-worker --tail=100 || true
  fi
  [ "${KEEP:-0}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  exit "$status"
}

step "images"
docker build -q -f worker/Dockerfile -t "mysqlcapture-worker:$TAG" .
docker build -q -f operator/Dockerfile -t "mysqlcapture-operator:$TAG" .
docker build -q -f spark/Dockerfile -t "mysqlcapture-compaction:$TAG" .

step "kind cluster $CLUSTER"
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s
trap cleanup EXIT
for image in worker operator compaction; do
  kind load docker-image --name "$CLUSTER" "mysqlcapture-$image:$TAG"
done

step "helm install"
helm upgrade --install mysqlcapture-operator charts/mysqlcapture-operator --namespace mysqlcapture-system \
  --create-namespace --wait --timeout 5m \
  --set image.tag="$TAG" --set workerImage.tag="$TAG" --set compactionImage.tag="$TAG"

step "source database"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$NS" apply -f tests/k8s/kind/mariadb.yaml
kubectl -n "$NS" rollout status deploy/shop-db --timeout=5m

step "capture"
# The example as published, pointed at the test source and a change log in the worker's /tmp.
"$PYTHON" - <<'PY' | kubectl -n "$NS" apply -f -
import sys, yaml
doc = yaml.safe_load(open("examples/capture-cluster.yaml"))
spec = doc["spec"]
spec["source"]["host"] = "shop-db"
spec["source"]["tls"] = {"mode": "disabled"}
spec["sink"]["delta"] = {"uri": "/tmp/changelog"}
spec["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
yaml.safe_dump(doc, sys.stdout, sort_keys=False)
PY
kubectl -n "$NS" wait mysqlcapture/shop --for=jsonpath='{.status.phase}'=Streaming --timeout=5m

step "rows flow"
before=$(kubectl -n "$NS" get mysqlcapture shop -o jsonpath='{.status.binlogPosition}')
kubectl -n "$NS" exec deploy/shop-db -- mariadb -uroot -pe2e-root \
  -e "INSERT INTO shop.orders VALUES (2, 'after'), (3, 'the capture started')"
for _ in $(seq 60); do
  after=$(kubectl -n "$NS" get mysqlcapture shop -o jsonpath='{.status.binlogPosition}')
  if [ -n "$after" ] && [ "$after" != "$before" ]; then break; fi
  sleep 5
done
[ "$after" != "$before" ] || { echo "the capture's position did not move after the inserts" >&2; exit 1; }
kubectl -n "$NS" get mysqlcaptures -o wide
echo "e2e-kind: OK"
