#!/usr/bin/env bash
# The six sysbench OLTP workloads against norr only (prepare, run, cleanup);
# fails on any non-retriable error (sysbench exits non-zero on those; lock
# wait timeouts and deadlocks (1205, 1213) are retried by sysbench itself).
#
#   bench/sysbench_acceptance.sh
#
# Runs against each norr layout in turn (NORR_LAYOUTS, default "separate
# colocated": `norr datad` + `norr sqld` processes, then one `norr up` process
# whose SQL node uses the in-process link).
#
# Env: SB_TABLES=4 SB_TABLE_SIZE=100000 SB_THREADS=16 SB_TIME=30, NORR_BIN,
#      WORKLOADS (default: all six), NORR_LAYOUTS.
set -euo pipefail
. "$(dirname "$0")/sysbench_common.sh"
WORKLOADS="${WORKLOADS:-oltp_read_write oltp_read_only oltp_point_select oltp_update_index oltp_insert oltp_delete}"

ensure_packages sysbench default-mysql-client
fail=0
for layout in ${NORR_LAYOUTS:-separate colocated}; do
  n0=${#PIDS[@]}
  NORR_LAYOUT="$layout" start_norr
  echo "== norr ($layout) SQL port $NORR_PORT, logs in $WORK/norr-$layout" >&2
  for wl in $WORKLOADS; do
    sql "$NORR_PORT" "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
    for step in prepare run cleanup; do
      log="$WORK/$layout-$wl-$step.log"
      if sb "$NORR_PORT" "$wl" "$step" >"$log" 2>&1 && ! grep -q "FATAL" "$log"; then
        if [ "$step" = run ]; then
          echo "ok   $layout $wl: $(tps_of "$log") tps, $(qps_of "$log") qps, p95 $(p95_of "$log") ms, ignored errors: $(sed -n 's/.*ignored errors: *\([0-9]*\).*/\1/p' "$log")"
        fi
      else
        echo "FAIL $layout $wl $step:"; tail -20 "$log"; fail=1
        break
      fi
    done
  done
  if [ "$fail" != 0 ]; then
    echo "norr log tails:"; tail -20 "$WORK/norr-$layout"/*.log
    exit 1
  fi
  # Stop this layout's processes before the next one starts.
  for p in "${PIDS[@]:$n0}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=("${PIDS[@]:0:$n0}")
done
echo "all workloads passed"
