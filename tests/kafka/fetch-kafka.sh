#!/usr/bin/env bash
# The tests' Kafka broker: Apache Kafka's jars (tests/kafka/pom.xml, pinned) and their closure from Maven Central,
# copied into $1 (a cache directory outside the repository) when missing. A failed fetch is recorded in $1/FAILED
# with its reason, which the Kafka tests report.
set -euo pipefail
dest=${1:?usage: fetch-kafka.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
pin=$(sha256sum "$here/pom.xml" | cut -c1-12)
if [ -f "$dest/READY-$pin" ]; then exit 0; fi
rm -rf "$dest" && mkdir -p "$dest"
echo "==> resolving the Kafka broker's jars from Maven Central into $dest (about 30 s cold)"
if mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dest/libs" \
     -Dmaven.repo.local="$dest/m2" >"$dest/fetch.log" 2>&1; then
  rm -rf "$dest/m2"
  touch "$dest/READY-$pin"
else
  { echo "mvn dependency:copy-dependencies failed (tests/kafka/pom.xml):"; tail -20 "$dest/fetch.log"; } >"$dest/FAILED"
  cat "$dest/FAILED" >&2
  exit 1
fi
