#!/usr/bin/env bash
# Copies the third-party CRDs the Kubernetes tests install (the Spark operator's and the Prometheus operator's) out of
# their projects' published Go modules into a cache outside the repository, one directory per set of pins; prints
# that directory. The modules, versions, sums and files are pinned in tests/k8s/thirdparty-crds.pins, read here and by
# tests/k8s/thirdparty.py. `go mod download` fetches a module through the Go module proxy and checks it against
# sum.golang.org; its "Sum" is then checked against the pinned one. Instant when cached. A failure is recorded in
# DEST/FAILED with its reason, which the Kubernetes tests report instead of skipping; this script then exits 0 so
# that `make setup` goes on with the other tiers.
set -uo pipefail

PINS="$(cd "$(dirname "$0")" && pwd)/thirdparty-crds.pins"
CACHE=${MYSQLCAPTURE_CACHE:-$HOME/.cache/mysqlcapture}

modules=() versions=() sums=() files=()  # files: "INDEX PATH", INDEX into the module arrays
while read -r first second third fourth; do
  case "$first" in
    '' | '#'*) ;;
    module) modules+=("$second") versions+=("$third") sums+=("$fourth") ;;
    *) files+=("$(( ${#modules[@]} - 1 )) $first") ;;
  esac
done < "$PINS"

key=""
for i in "${!modules[@]}"; do
  project=${modules[$i]##*/}
  [[ $project =~ ^v[0-9]+$ ]] && { project=${modules[$i]%/*}; project=${project##*/}; }
  key+="${key:+-}$project-${versions[$i]}"
done
DEST=${1:-$CACHE/thirdparty-crds-$key}

cached() {
  cmp -s "$PINS" "$DEST/pins" || return 1
  for entry in "${files[@]}"; do [ -s "$DEST/$(basename "${entry#* }")" ] || return 1; done
}
if cached; then
  echo "$DEST"
  exit 0
fi

fail() {
  rm -rf "$DEST"
  mkdir -p "$DEST"
  echo "fetching the third-party CRDs failed: $*" | tee "$DEST/FAILED" >&2
  echo "$DEST"
  exit 0
}

command -v go >/dev/null || fail "go is not installed (https://go.dev/dl, or apt-get install golang-go): the CRDs come from their projects' Go modules"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/crds"
echo "==> fetching the Spark and Prometheus operators' CRDs (${key}) into $DEST" >&2
for i in "${!modules[@]}"; do
  module="${modules[$i]}@${versions[$i]}"
  # Outside any module, with the machine's own Go: a go.work, a GOFLAGS or a toolchain switch of the caller's
  # must not change what is fetched.
  json=$(cd "$work" && GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod go mod download -json "$module" 2>"$work/go.log") \
    || fail "go mod download: $(sed -n 's/^\s*"Error": "\(.*\)",\?$/\1/p' <<<"$json")$(tail -3 "$work/go.log")"
  dir=$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' <<<"$json")
  sum=$(sed -n 's/^\s*"Sum": "\(.*\)",$/\1/p' <<<"$json")
  [ "$sum" = "${sums[$i]}" ] || fail "$module has sum ${sum:-(none)}, $PINS pins ${sums[$i]}"
  for entry in "${files[@]}"; do
    [ "${entry%% *}" = "$i" ] || continue
    path=${entry#* }
    [ -f "$dir/$path" ] || fail "$module has no $path"
    cp "$dir/$path" "$work/crds/" && chmod 644 "$work/crds/$(basename "$path")" || fail "copying $dir/$path"
  done
done
cp "$PINS" "$work/crds/pins"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$work/crds" "$DEST" || fail "moving the CRDs into $DEST"
echo "$DEST"
