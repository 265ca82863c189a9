#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from their published Go modules into a cache
# outside the repository (one directory per Kubernetes version), for the tests' real control plane.
#
# `go install k8s.io/kubernetes/cmd/...@vX` is refused because k8s.io/kubernetes's go.mod replaces its
# staging modules (k8s.io/api, client-go, ...) with local paths at v0.0.0. A small wrapper module requires
# k8s.io/kubernetes and replaces each of those with its published v0.<minor>.<patch> instead; the replace
# list is read from that release's own go.mod since the set changes between releases.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
DEST=${1:-${MYSQLCAPTURE_CACHE:-$HOME/.cache/mysqlcapture}/k8s-$K8S_VERSION}
BINARIES=(etcd kube-apiserver kube-controller-manager)

have_all() { for b in "${BINARIES[@]}"; do [ -x "$DEST/bin/$b" ] || return 1; done; }
if have_all; then exit 0; fi

export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
staging_version="v0.${K8S_VERSION#v1.}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

start=$(date +%s)
echo "==> building the test control plane $K8S_VERSION into $DEST (7 to 13 minutes cold on two cores)" >&2
k8s_mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$k8s_mod")
go_line=$(grep -m1 '^go ' "$k8s_mod")
godebug_line=$(grep -m1 '^godebug ' "$k8s_mod" || true)

{
  echo "module mysqlcapture.test/controlplane"
  echo
  echo "$go_line"
  echo "$godebug_line"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes $K8S_VERSION"
  echo "	go.etcd.io/etcd/server/v3 $etcd_version"
  echo ")"
  echo
  echo "replace ("
  awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$k8s_mod" | sort -u |
    while read -r m; do echo "	$m => $m $staging_version"; done
  echo ")"
} > go.mod

# Versions pinned on every package: a bare `go get pkg` would upgrade to the newest release.
# `go get` prints a line per module it resolves (about 60): kept in a log, shown only when it fails.
echo "  resolving the modules (go get)" >&2
go get "go.etcd.io/etcd/server/v3@$etcd_version" \
  "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" >"$work/go-get.log" 2>&1 \
  || { cat "$work/go-get.log" >&2; exit 1; }
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
  -X k8s.io/component-base/version.gitTreeState=clean"
mkdir -p "$DEST/bin.partial"
echo "  building etcd" >&2
go build -trimpath -ldflags "$ldflags" -o "$DEST/bin.partial/etcd" go.etcd.io/etcd/server/v3
for cmd in kube-apiserver kube-controller-manager; do
  echo "  building $cmd" >&2
  go build -trimpath -ldflags "$ldflags" -o "$DEST/bin.partial/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
rm -rf "$DEST/bin" && mv "$DEST/bin.partial" "$DEST/bin"
echo "$etcd_version" > "$DEST/etcd-version"
echo "built in $(( $(date +%s) - start )) s" | tee "$DEST/build-seconds" >&2
