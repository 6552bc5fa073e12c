#!/usr/bin/env bash
# The gate, `make test` (docs/testing.md): the live tier (real-time runs against the real cluster; about a third of
# the 2 cores idle while they run) and, beside it at a lower priority (nice 10: the live tier's clusters and
# workloads come first), the unit and corpus tiers (CPU-bound, no cluster), each its own pytest with the same
# arguments. The fast tiers' output follows the live tier's; the exit status is the first failing tier's (a tier
# that selects nothing, as with a -k of the other tier's, does not fail alone).
# Usage: scripts/gate.sh PYTHON [pytest arguments...]
set -uo pipefail
py=$1
shift
log=$(mktemp -t txnlab-fast-tiers.XXXXXX)
nice -n 10 "$py" -m pytest -m "(unit or corpus) and not campaign" "$@" >"$log" 2>&1 &
fast=$!
trap 'kill "$fast" 2>/dev/null; rm -f "$log"' EXIT
"$py" -m pytest -m "live and not campaign" "$@"
live=$?
wait "$fast"
fast_rc=$?
echo
echo "==================== the unit and corpus tiers (run beside the live tier) ===================="
cat "$log"
# pytest's 5: no test selected
if [ "$live" -eq 5 ] && [ "$fast_rc" -eq 5 ]; then exit 5; fi
[ "$live" -eq 5 ] && live=0
[ "$fast_rc" -eq 5 ] && fast_rc=0
[ "$live" -ne 0 ] && exit "$live"
exit "$fast_rc"
