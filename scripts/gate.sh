#!/usr/bin/env bash
# The gate, `make test` (docs/testing.md): three pytest processes at once, each with the same arguments.
#   - the live tier in two streams: the modules marked own_clusters (each starts the clusters it uses: the compose
#     stack, a bug's sides, the demo's, the secured cluster, the lifecycle's), and the others (on the session's
#     shared clusters); the live tier alone keeps about a third of the 2 cores idle (real-time schedules, waits for
#     recovery), which the second stream uses. The own_clusters stream has a Spark Connect server of its own
#     (TXNLAB_TEST_SPARK_CONNECT_PORT).
#   - beside them at a lower priority (nice 10: the live tier's clusters and workloads come first), the unit and
#     corpus tiers (CPU-bound, no cluster).
# The shared stream prints as it goes; the own-clusters stream's and the fast tiers' output follow. The exit status
# is the first failing process's (one that selects nothing, as with a -k of another's tests, does not fail alone).
# Usage: scripts/gate.sh PYTHON [pytest arguments...]
set -uo pipefail
py=$1
shift
own_log=$(mktemp -t txnlab-own-clusters.XXXXXX)
fast_log=$(mktemp -t txnlab-fast-tiers.XXXXXX)
TXNLAB_TEST_SPARK_CONNECT_PORT=31600 "$py" -m pytest -m "live and own_clusters and not campaign" "$@" >"$own_log" 2>&1 &
own=$!
nice -n 10 "$py" -m pytest -m "(unit or corpus) and not campaign" "$@" >"$fast_log" 2>&1 &
fast=$!
# stopping the gate stops the background streams by their pids with SIGTERM, which pytest takes as Ctrl-C
# (tests/conftest.py): each tears its fixtures down, its clusters stopped, before the gate exits
stop() {
  kill -TERM "$own" "$fast" 2>/dev/null
  wait "$own" "$fast" 2>/dev/null
  rm -f "$own_log" "$fast_log"
}
trap stop EXIT
trap 'exit 130' INT TERM
"$py" -m pytest -m "live and not own_clusters and not campaign" "$@"
shared_rc=$?
wait "$own"
own_rc=$?
wait "$fast"
fast_rc=$?
echo
echo "==================== the live tier's own-clusters stream (run beside the shared one) ===================="
cat "$own_log"
echo
echo "==================== the unit and corpus tiers (run beside the live tier) ===================="
cat "$fast_log"
# pytest's 5: no test selected
if [ "$shared_rc" -eq 5 ] && [ "$own_rc" -eq 5 ] && [ "$fast_rc" -eq 5 ]; then exit 5; fi
for rc in "$shared_rc" "$own_rc" "$fast_rc"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
done
exit 0
