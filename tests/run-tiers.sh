#!/usr/bin/env bash
# `make test`'s pytest run: the Spark tier (tests/spark) in a pytest process of its own, beside one for every other
# tier, so that the two take about as long as the longer of them instead of their sum.
#
# Measured on a two-core machine (2026-11-28): the Spark tier keeps about 90% of the cores busy for ~33 minutes;
# the others (private servers, workers, the Kafka broker, the control plane) keep a third of them busy for ~38
# minutes, mostly waiting on those processes. One after the other they took 71 minutes; side by side 43.
#
# Both processes share nothing but the machine: every server, broker and worker they start takes a free port and a
# temporary directory of its own. The Spark tier's output is printed when both have ended; either failing fails
# the run. Usage: PY=<venv python> tests/run-tiers.sh (from the repository's root, with PYTHONPATH set).
set -uo pipefail

py=${PY:?PY: the virtual environment python}
work=$(mktemp -d "${TMPDIR:-/tmp}/mysqlcapture-tests.XXXXXX")
spark_log="$work/spark.log"

# A command started with `&` here ignores SIGINT (bash does so without job control): `env` gives it back, so that
# Ctrl-C stops this pytest as it stops the other, tearing down the servers and JVMs its tests started.
env --default-signal=INT "$py" -m pytest tests/spark -p no:cacheprovider --basetemp="$work/spark" >"$spark_log" 2>&1 &
spark=$!
# Ctrl-C reached both processes: wait for the Spark tier's teardown. Terminated (a CI timeout): interrupt it likewise.
trap 'wait "$spark"; exit 130' INT
trap 'kill -INT "$spark" 2>/dev/null; wait "$spark"; exit 143' TERM

echo "==> the Spark tier (tests/spark) runs beside the other tiers; its output follows theirs (log: $spark_log)"
"$py" -m pytest --ignore=tests/spark --basetemp="$work/other"
others=$?

wait "$spark"
spark_status=$?
echo
echo "==> the Spark tier (tests/spark), run beside the others:"
cat "$spark_log"

if [ "$others" -ne 0 ] || [ "$spark_status" -ne 0 ]; then
    echo "==> failed: the other tiers exited $others, the Spark tier $spark_status (files kept in $work)" >&2
    exit 1
fi
rm -rf "$work"
