#!/usr/bin/env bash
# Fetch Debian sid's MySQL server (mysql-server-core, the 9.7 LTS series) and its library closure into DEST,
# unpacked with dpkg -x: the system's apt sources and installed packages are not touched (sid's libc6 and
# libstdc++6 would replace bookworm's). mysqld runs through DEST/root's own loader (see
# dev/mysqlcapture_dev/embedded/mysql.py). sid moves on: whatever version it has is fetched and recorded in
# DEST/VERSION, never pinned. A failure is recorded in DEST/FAILED with its reason, which the MySQL test tier
# reports instead of skipping; this script then exits 0 so that `make setup` goes on with the other tiers.
set -uo pipefail
DEST=${1:?usage: fetch-mysql.sh DEST}
SUITE=${MYSQL_DEBIAN_SUITE:-sid}
MIRROR=${MYSQL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=(mysql-server-core mysql-client-core)
# Not needed to run mysqld or mysql: perl (mysql-server-core's scripts) and what only perl pulls in.
EXCLUDE='^(perl|perl-base|perl-modules-.*|libperl.*|libgdbm.*|libdb5.*|debconf|dpkg|coreutils|tar|.*-dev)$'

loader() { echo "$DEST/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $DEST/root/usr/lib/x86_64-linux-gnu"; }
works() { $(loader) "$DEST/root/usr/sbin/mysqld" --version >/dev/null 2>&1; }

if [ -f "$DEST/VERSION" ] && works; then
  exit 0
fi

fail() {
  mkdir -p "$DEST"
  echo "fetching Debian $SUITE's mysql-server-core failed: $*" | tee "$DEST/FAILED" >&2
  exit 0
}

rm -rf "$DEST"
mkdir -p "$DEST/apt/lists/partial" "$DEST/apt/cache/archives/partial" "$DEST/debs" "$DEST/root"
echo "deb $MIRROR $SUITE main" > "$DEST/apt/sources.list"
APT=(-o "Dir::Etc::sourcelist=$DEST/apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$DEST/apt/lists"
     -o "Dir::Cache=$DEST/apt/cache" -o APT::Sandbox::User=root -o Dir::State::status=/dev/null
     -o Debug::NoLocking=1)
echo "fetching Debian $SUITE's MySQL server into $DEST"
apt-get "${APT[@]}" -qq update >"$DEST/apt.log" 2>&1 || fail "apt-get update: $(tail -3 "$DEST/apt.log")"
mapfile -t closure < <(apt-cache "${APT[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances --no-pre-depends "${PACKAGES[@]}" 2>>"$DEST/apt.log" \
  | grep -v '^[ <]' | sort -u | grep -Ev "$EXCLUDE")
[ "${#closure[@]}" -gt 10 ] || fail "apt-cache found no dependency closure for ${PACKAGES[*]}: $(tail -3 "$DEST/apt.log")"
(cd "$DEST/debs" && apt-get "${APT[@]}" -qq download "${closure[@]}" >>"$DEST/apt.log" 2>&1) \
  || fail "apt-get download: $(tail -3 "$DEST/apt.log")"
for deb in "$DEST"/debs/*.deb; do
  dpkg -x "$deb" "$DEST/root" || fail "dpkg -x $deb"
done
rm -rf "$DEST/debs" "$DEST/apt/cache"
works || fail "the unpacked mysqld does not run: $($(loader) "$DEST/root/usr/sbin/mysqld" --version 2>&1 | tail -2)"
$(loader) "$DEST/root/usr/sbin/mysqld" --version | tee "$DEST/VERSION"
