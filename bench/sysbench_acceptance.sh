#!/usr/bin/env bash
# The six sysbench OLTP workloads against norr only (prepare, run, cleanup);
# fails on any non-retriable error (sysbench exits non-zero on those; lock
# wait timeouts and deadlocks (1205, 1213) are retried by sysbench itself).
#
#   bench/sysbench_acceptance.sh
#
# Env: SB_TABLES=4 SB_TABLE_SIZE=100000 SB_THREADS=16 SB_TIME=30, NORR_BIN,
#      WORKLOADS (default: all six).
set -euo pipefail
. "$(dirname "$0")/sysbench_common.sh"
WORKLOADS="${WORKLOADS:-oltp_read_write oltp_read_only oltp_point_select oltp_update_index oltp_insert oltp_delete}"

ensure_packages sysbench default-mysql-client
start_norr
echo "norr sqld on $NORR_PORT, logs in $WORK" >&2
fail=0
for wl in $WORKLOADS; do
  sql "$NORR_PORT" "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
  for step in prepare run cleanup; do
    log="$WORK/$wl-$step.log"
    if sb "$NORR_PORT" "$wl" "$step" >"$log" 2>&1 && ! grep -q "FATAL" "$log"; then
      if [ "$step" = run ]; then
        echo "ok   $wl: $(tps_of "$log") tps, $(qps_of "$log") qps, p95 $(p95_of "$log") ms, ignored errors: $(sed -n 's/.*ignored errors: *\([0-9]*\).*/\1/p' "$log")"
      fi
    else
      echo "FAIL $wl $step:"; tail -20 "$log"; fail=1
      break
    fi
  done
done
if [ "$fail" != 0 ]; then
  echo "sqld log tail:"; tail -20 "$WORK/sqld.log"
  exit 1
fi
echo "all workloads passed"
