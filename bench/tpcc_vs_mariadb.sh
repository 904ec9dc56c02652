#!/usr/bin/env bash
# TPC-C through an unmodified third-party driver (go-tpc, a Go module, here
# installed with `go install`) against norr and MariaDB (InnoDB, as in
# sysbench_vs_mariadb.sh) on the same machine in the same run: `tpcc prepare`,
# `run` and `check` on each; prints tpmC, per-transaction p95 / p99 and server
# CPU per New-Order, and appends them to bench/RESULTS.md (issue 23).
#
#   bench/tpcc_vs_mariadb.sh
#
# Env: TPCC_WAREHOUSES=4 TPCC_THREADS=16 TPCC_TIME=120s (the issue's target
#      run); a smoke run: TPCC_WAREHOUSES=2 TPCC_THREADS=8 TPCC_TIME=30s
#      GO_TPC_VERSION=v1.0.7, GO_TPC (a go-tpc binary; default: go install)
#      NORR_BIN (default: release build), NORR_LAYOUT=separate | colocated
#      CHECK=1 (default): run `tpcc check` (0 skips it), CHECK_TIMEOUT=600 (s)
#      RESULTS=1 (default): append to bench/RESULTS.md (0: print only)
set -euo pipefail
. "$(dirname "$0")/sysbench_common.sh"
TPCC_WAREHOUSES="${TPCC_WAREHOUSES:-4}"
TPCC_THREADS="${TPCC_THREADS:-16}"
TPCC_TIME="${TPCC_TIME:-120s}"
GO_TPC_VERSION="${GO_TPC_VERSION:-v1.0.7}"
CHECK="${CHECK:-1}"
CHECK_TIMEOUT="${CHECK_TIMEOUT:-600}"

ensure_packages mariadb-server mariadb-client time

# go-tpc itself, built from its module at the pinned version.
go_tpc_bin() {
  if [ -n "${GO_TPC:-}" ]; then echo "$GO_TPC"; return; fi
  local gobin="$WORK/gobin"
  mkdir -p "$gobin"
  command -v go >/dev/null || { echo "go is not installed (needed to build go-tpc)" >&2; exit 1; }
  GOBIN="$gobin" go install "github.com/pingcap/go-tpc/cmd/go-tpc@$GO_TPC_VERSION" >&2
  echo "$gobin/go-tpc"
}
GOTPC="$(go_tpc_bin)"

declare -A PORT SRV
start_mariadb
PORT[mariadb]="$MARIA_PORT"; SRV[mariadb]="${PIDS[-1]}"
n0=${#PIDS[@]}
start_norr
PORT[norr]="$NORR_PORT"; SRV[norr]="${PIDS[*]:$n0}"
TARGETS="mariadb norr"
echo "targets: mariadb=${PORT[mariadb]} norr=${PORT[norr]}, logs in $WORK" >&2
TICK="$(getconf CLK_TCK)"
cpu_of() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }

tpcc() { # port command [flags...]
  local port="$1"; shift
  "$GOTPC" tpcc -H 127.0.0.1 -P "$port" -U root -D tpcc --warehouses "$TPCC_WAREHOUSES" "$@"
}
# From a go-tpc run log: "[Summary] NEW_ORDER - ..., 95th(ms): x, 99th(ms): y, ..."
summary_field() { # log txn field
  sed -n "s/^\[Summary\] $2 - .*[, ]$3: *\([0-9.]*\).*/\1/p" "$1" | tail -1
}
summary_count() { sed -n "s/^\[Summary\] $2 - .*Count: *\([0-9]*\).*/\1/p" "$1" | tail -1; }

declare -A TPMC NO_P95 NO_P99 PAY_P95 PAY_P99 CPU_NO CHECKED ERRS
for target in $TARGETS; do
  port="${PORT[$target]}"
  sql "$port" "DROP DATABASE IF EXISTS tpcc; CREATE DATABASE tpcc"
  t0=$(date +%s)
  # --no-check: the consistency checks run once, as `check` below, timed.
  tpcc "$port" prepare -T "$TPCC_THREADS" --no-check >"$WORK/$target-prepare.log" 2>&1 \
    || { echo "$target prepare failed:" >&2; tail -20 "$WORK/$target-prepare.log" >&2; exit 1; }
  echo "$target: prepare took $(($(date +%s) - t0)) s" >&2
  log="$WORK/$target-run.log"
  # shellcheck disable=SC2086 # a list of pids
  c0="$(cpu_of ${SRV[$target]})"
  tpcc "$port" run -T "$TPCC_THREADS" --time "$TPCC_TIME" >"$log" 2>&1 \
    || { echo "$target run failed:" >&2; tail -20 "$log" >&2; exit 1; }
  # shellcheck disable=SC2086
  c1="$(cpu_of ${SRV[$target]})"
  TPMC[$target]="$(sed -n 's/^tpmC: *\([0-9.]*\).*/\1/p' "$log" | tail -1)"
  NO_P95[$target]="$(summary_field "$log" NEW_ORDER '95th(ms)')"
  NO_P99[$target]="$(summary_field "$log" NEW_ORDER '99th(ms)')"
  PAY_P95[$target]="$(summary_field "$log" PAYMENT '95th(ms)')"
  PAY_P99[$target]="$(summary_field "$log" PAYMENT '99th(ms)')"
  ERRS[$target]="$(grep -c '_ERR' "$log" || true)"
  no="$(summary_count "$log" NEW_ORDER)"
  CPU_NO[$target]="$(awk -v t=$((c1 - c0)) -v n="${no:-0}" -v hz="$TICK" \
    'BEGIN { if (n > 0) printf "%.2f", t * 1000 / hz / n; else print "n/a" }')"
  echo "$target: tpmC ${TPMC[$target]}, New-Order p95 ${NO_P95[$target]} ms p99 ${NO_P99[$target]} ms, server CPU per New-Order ${CPU_NO[$target]} ms, *_ERR summary lines (rollbacks, incl. New-Order's intended 1%) ${ERRS[$target]}" >&2
  if [ "$CHECK" = 1 ]; then
    t0=$(date +%s)
    # go-tpc reports a failed check (or a statement error) in its log and
    # still exits 0: both count.
    if timeout "$CHECK_TIMEOUT" "$GOTPC" tpcc -H 127.0.0.1 -P "$port" -U root -D tpcc \
      --warehouses "$TPCC_WAREHOUSES" check >"$WORK/$target-check.log" 2>&1 \
      && ! grep -qi 'failed' "$WORK/$target-check.log"; then
      CHECKED[$target]="passed in $(($(date +%s) - t0)) s"
    else
      CHECKED[$target]="FAILED or timed out after $(($(date +%s) - t0)) s (see $WORK/$target-check.log)"
      tail -5 "$WORK/$target-check.log" >&2
    fi
    echo "$target: check ${CHECKED[$target]}" >&2
  else
    CHECKED[$target]="not run"
  fi
done

label() { case "$1" in mariadb) echo "MariaDB" ;; norr) echo "norr, ${NORR_LAYOUT:-separate}" ;; esac; }
table="| server | tpmC | vs MariaDB | New-Order p95 / p99 ms | Payment p95 / p99 ms | server CPU per New-Order ms | check |
|---|---|---|---|---|---|---|"
for target in $TARGETS; do
  ratio="$(awk -v a="${TPMC[$target]:-0}" -v b="${TPMC[mariadb]:-0}" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }')"
  table="$table
| $(label "$target") | ${TPMC[$target]} | $ratio | ${NO_P95[$target]} / ${NO_P99[$target]} | ${PAY_P95[$target]} / ${PAY_P99[$target]} | ${CPU_NO[$target]} | ${CHECKED[$target]} |"
done
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
report="
## TPC-C (go-tpc $GO_TPC_VERSION) vs MariaDB, $(date -u '+%Y-%m-%d %H:%M UTC')

Command: \`bench/tpcc_vs_mariadb.sh\` (warehouses=$TPCC_WAREHOUSES threads=$TPCC_THREADS time=$TPCC_TIME)
Machine: nproc=$(nproc), CPU: $cpu; $(mariadbd --version | head -1)
norr commit: ${COMMIT:-$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)}${NORR_BIN:+ (binary: $NORR_BIN)}

$table

Server CPU per New-Order: user + system time of the server processes during
the run divided by the New-Order transactions (so it includes the other four
transaction types' work, as the TPC-C mix does).
"
echo "$report"
if [ "${RESULTS:-1}" = 1 ]; then echo "$report" >>"$ROOT/bench/RESULTS.md"; fi
