#!/usr/bin/env bash
# sysbench oltp_point_select and oltp_read_write against norr, in each of its
# layouts (colocated: one `norr up` process whose SQL node reaches the data node
# through the in-process link; separate: `norr datad` + `norr sqld` processes
# over a Unix socket), and MariaDB (InnoDB, 2G buffer pool, flush_log_at_trx_commit=2) on the same
# machine in the same run; 3 repetitions each; prints medians and ratios and
# appends them to bench/RESULTS.md.
#
#   bench/sysbench_vs_mariadb.sh
#
# Env: SB_TABLES=4 SB_TABLE_SIZE=100000 SB_THREADS=16 SB_TIME=30 REPS=3
#      NORR_BIN (default: release build), COMMIT (label of NORR_BIN's commit; default: HEAD), WORKLOADS="oltp_point_select oltp_read_write"
#      NORR_LAYOUTS="colocated separate" (each is a column of the results;
#        "durable" is the separate layout with the data node on disk: REDO,
#        global and local checkpoints in its --data-dir)
#      SB_TRANSPORT=tcp (default) | socket (both servers' Unix sockets)
#      WITH_CEILING=1 (default): also run the protocol ceiling, a server that
#        answers every query without database work (crates/sql/examples/
#        null_sqld.rs; NULL_SQLD_BIN, else a release build): what the client
#        and the socket path alone allow on this machine. 0 skips it.
set -euo pipefail
. "$(dirname "$0")/sysbench_common.sh"
REPS="${REPS:-3}"
WORKLOADS="${WORKLOADS:-oltp_point_select oltp_read_write}"

ensure_packages sysbench mariadb-server mariadb-client time
NORR_LAYOUTS="${NORR_LAYOUTS:-colocated separate}"
declare -A PORT SRV SOCK
start_mariadb
TARGETS="mariadb"
PORT[mariadb]="$MARIA_PORT"; SRV[mariadb]="${PIDS[-1]}"; SOCK[mariadb]="$MARIA_SOCKET"
for layout in $NORR_LAYOUTS; do
  n0=${#PIDS[@]}
  NORR_LAYOUT="$layout" start_norr
  TARGETS="$TARGETS norr-$layout"
  PORT[norr-$layout]="$NORR_PORT"; SRV[norr-$layout]="${PIDS[*]:$n0}"; SOCK[norr-$layout]="$NORR_SOCKET"
done
if [ "${WITH_CEILING:-1}" = 1 ]; then
  start_null_sqld
  TARGETS="$TARGETS ceiling"
  CEILING_NOTE="

Protocol ceiling: \`crates/sql/examples/null_sqld.rs\`, norr's protocol layer (one
session thread, the same runtime and allocator as \`norr sqld\`) answering every
query at once with a canned row or OK, without any database work. Its row is what
the client and the socket path alone leave room for on this machine."
  PORT[ceiling]="$NULL_PORT"; SRV[ceiling]="${PIDS[-1]}"; SOCK[ceiling]="$NULL_SOCKET"
fi
echo "targets: $TARGETS (ports: $(for t in $TARGETS; do printf '%s=%s ' "$t" "${PORT[$t]}"; done)), logs in $WORK" >&2
TICK="$(getconf CLK_TCK)"

# CPU seconds (user + system) the given processes have used so far.
cpu_of() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
# Transactions in a sysbench run log.
txns_of() { sed -n 's/.*transactions: *\([0-9]*\) .*/\1/p' "$1" | head -1; }
# Microseconds of CPU per transaction: us_per_txn TICKS TXNS
us_per_txn() { awk -v t="$1" -v n="$2" -v hz="$TICK" 'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n; else print "n/a" }'; }

declare -A TPS QPS P95 SBCPU SRVCPU
# Each workload is prepared on every target, then the runs alternate between
# the targets (rep 1 of each, rep 2 of each, ...): a change in the machine's
# load (other processes on the shared cores) then falls on every target alike
# instead of on whichever ran during it.
declare -A R_TPS R_QPS R_P95 R_SB R_SRV
for wl in $WORKLOADS; do
  for target in $TARGETS; do
    port="${PORT[$target]}"
    NORR_PORT="$port"; NORR_SOCKET="${SOCK[$target]}"
    sql "$port" "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
    sb "$port" "$wl" prepare >"$WORK/$target-$wl-prepare.log" 2>&1 \
      || { echo "$target $wl prepare failed:" >&2; tail -20 "$WORK/$target-$wl-prepare.log" >&2; exit 1; }
    R_TPS[$target]=""; R_QPS[$target]=""; R_P95[$target]=""; R_SB[$target]=""; R_SRV[$target]=""
  done
  for rep in $(seq 1 "$REPS"); do
    for target in $TARGETS; do
      port="${PORT[$target]}"
      # sb picks the Unix socket by port; point it at this target's.
      NORR_PORT="$port"; NORR_SOCKET="${SOCK[$target]}"
      srv="${SRV[$target]}"
      log="$WORK/$target-$wl-run$rep.log"
      # shellcheck disable=SC2086 # a list of pids
      c0="$(cpu_of $srv)"
      SB_WRAP=(/usr/bin/time -f "%U %S" -o "$WORK/sbtime")
      if ! sb "$port" "$wl" run --report-interval=0 >"$log" 2>&1; then
        echo "$target $wl run $rep failed:" >&2; tail -20 "$log" >&2; exit 1
      fi
      # shellcheck disable=SC2086
      c1="$(cpu_of $srv)"
      SB_WRAP=()
      n="$(txns_of "$log")"
      sbc="$(us_per_txn "$(awk -v hz="$TICK" '{ printf "%.0f", ($1 + $2) * hz }' "$WORK/sbtime")" "$n")"
      svc="$(us_per_txn $((c1 - c0)) "$n")"
      echo "$target $wl run $rep: $(tps_of "$log") tps, $(qps_of "$log") qps, p95 $(p95_of "$log") ms, CPU per txn: sysbench $sbc us, server $svc us" >&2
      R_TPS[$target]="${R_TPS[$target]} $(tps_of "$log")"; R_QPS[$target]="${R_QPS[$target]} $(qps_of "$log")"
      R_P95[$target]="${R_P95[$target]} $(p95_of "$log")"
      R_SB[$target]="${R_SB[$target]} $sbc"; R_SRV[$target]="${R_SRV[$target]} $svc"
    done
  done
  for target in $TARGETS; do
    TPS[$target,$wl]="$(echo "${R_TPS[$target]}" | median)"
    QPS[$target,$wl]="$(echo "${R_QPS[$target]}" | median)"
    P95[$target,$wl]="$(echo "${R_P95[$target]}" | median)"
    SBCPU[$target,$wl]="$(echo "${R_SB[$target]}" | median)"
    SRVCPU[$target,$wl]="$(echo "${R_SRV[$target]}" | median)"
    sb "${PORT[$target]}" "$wl" cleanup >"$WORK/$target-$wl-cleanup.log" 2>&1 || true
  done
done

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
label() { case "$1" in mariadb) echo "MariaDB" ;; norr-*) echo "norr, ${1#norr-}" ;; ceiling) echo "protocol ceiling" ;; *) echo "$1" ;; esac; }
table="| workload | server | tps | qps | vs MariaDB | p95 ms | CPU/txn: sysbench us | CPU/txn: server us |
|---|---|---|---|---|---|---|---|"
for wl in $WORKLOADS; do
  for target in $TARGETS; do
    ratio="$(awk -v a="${TPS[$target,$wl]}" -v b="${TPS[mariadb,$wl]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
    table="$table
| $wl | $(label "$target") | ${TPS[$target,$wl]} | ${QPS[$target,$wl]} | $ratio | ${P95[$target,$wl]} | ${SBCPU[$target,$wl]} | ${SRVCPU[$target,$wl]} |"
  done
done
report="
## sysbench vs MariaDB, $(date -u '+%Y-%m-%d %H:%M UTC')

Command: \`bench/sysbench_vs_mariadb.sh\` (transport=${SB_TRANSPORT:-tcp} tables=$SB_TABLES table-size=$SB_TABLE_SIZE threads=$SB_THREADS time=${SB_TIME}s, median of $REPS runs, alternating between the servers)
Machine: nproc=$(nproc), CPU: $cpu; $(sysbench --version); $(mariadbd --version | head -1)
norr commit: ${COMMIT:-$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)}${NORR_BIN:+ (binary: $NORR_BIN)}

$table

CPU per transaction: user + system microseconds of sysbench and of the server
processes (norr colocated: one process; separate: datad + sqld), median of the
runs. The client's share bounds what any server can reach on this machine.${CEILING_NOTE:-}
"
echo "$report"
echo "$report" >>"$ROOT/bench/RESULTS.md"
