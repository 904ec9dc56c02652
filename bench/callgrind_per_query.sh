#!/usr/bin/env bash
# Instructions per sysbench event (transaction or query) in each norr server
# process, counted by callgrind: deterministic for a given binary and input, so
# two builds can be compared on a shared, noisy machine where timings cannot.
#
#   bench/callgrind_per_query.sh [WORKLOAD] [EVENTS]
#
# WORKLOAD: a sysbench OLTP script (default oltp_point_select); EVENTS: events
# counted (default 2000). One sysbench thread, one table of SB_TABLE_SIZE rows
# (default 2000). datad and sqld run under callgrind; after prepare and a
# warm-up of EVENTS/4 events, runs of EVENTS and 2 x EVENTS events are
# counted and their difference is divided by EVENTS, so that the connection's
# fixed cost (handshake, statement prepares) drops out. Prints "process
# Ir-per-event" lines.
#
# Spinning is turned off in both servers (datad idle_spin_us=0, sqld
# --reply-spin-us 0): it burns instructions per unit of wall time, and under
# callgrind wall time is ~50x longer, so it would swamp the per-event work.
#
# Env: NORR_BIN (default: a build with the `profiling` cargo profile, the
#      release build with debug info, so costs are attributed to source
#      lines; NORR_PROFILE picks another), NORR_DATAD_ARGS / NORR_SQLD_ARGS
#      (extra flags), NORR_SQL_SETUP (a statement run first, e.g. SET GLOBAL ...),
#      CG_KEEP=1 keeps the callgrind files (path printed).
set -euo pipefail
. "$(dirname "$0")/sysbench_common.sh"
export NORR_PROFILE="${NORR_PROFILE:-profiling}"
WL="${1:-oltp_point_select}"
EVENTS="${2:-2000}"
SB_TABLES=1
SB_TABLE_SIZE="${SB_TABLE_SIZE:-2000}"
SB_THREADS=1
SB_TIME=0

ensure_packages sysbench mariadb-client valgrind
bin="$(norr_bin)"
data_port="$(free_port)"
NORR_PORT="$(free_port)"
NORR_SOCKET="$WORK/norr.sock"
cg=(valgrind --tool=callgrind --vgdb=yes --collect-atstart=yes)
# shellcheck disable=SC2086 # extra flags are word-split on purpose
"${cg[@]}" --callgrind-out-file="$WORK/datad.%p.cg" "$bin" datad --listen "127.0.0.1:$data_port" \
  --socket "$WORK/datad.sock" --set idle_spin_us=0 ${NORR_DATAD_ARGS:-} >"$WORK/datad.log" 2>&1 &
DATAD=$!
PIDS+=("$DATAD")
wait_port "$data_port" 120 "norr datad (callgrind)"
# shellcheck disable=SC2086
NORR_ROOT_PASSWORD="" "${cg[@]}" --callgrind-out-file="$WORK/sqld.%p.cg" "$bin" sqld \
  --listen "127.0.0.1:$NORR_PORT" --data-node "unix:$WORK/datad.sock" --socket "$NORR_SOCKET" \
  --reply-spin-us 0 ${NORR_SQLD_ARGS:-} >"$WORK/sqld.log" 2>&1 &
SQLD=$!
PIDS+=("$SQLD")
wait_port "$NORR_PORT" 120 "norr sqld (callgrind)"

sql "$NORR_PORT" "CREATE DATABASE sbtest"
# NORR_SQL_SETUP: a statement run before the counted runs (e.g. `SET GLOBAL
# norr_text_plan_cache = OFF`, so that one binary gives both sides of an A/B).
if [ -n "${NORR_SQL_SETUP:-}" ]; then sql "$NORR_PORT" "$NORR_SQL_SETUP"; fi
sb "$NORR_PORT" "$WL" prepare >"$WORK/prepare.log" 2>&1 || { tail -20 "$WORK/prepare.log" >&2; exit 1; }
sb "$NORR_PORT" "$WL" run --events=$((EVENTS / 4)) >"$WORK/warmup.log" 2>&1 || { tail -20 "$WORK/warmup.log" >&2; exit 1; }
# Each sysbench run opens a connection and prepares its statements: a fixed
# cost. Count a run of EVENTS events and one of 2 x EVENTS; their difference
# is the cost of EVENTS events alone.
count_run() { # events -> "datad-Ir sqld-Ir" of one run
  local p
  for p in "$DATAD" "$SQLD"; do callgrind_control -z "$p" >/dev/null; done
  sb "$NORR_PORT" "$WL" run --events="$1" >"$WORK/run.log" 2>&1 || { tail -20 "$WORK/run.log" >&2; exit 1; }
  for p in "$DATAD" "$SQLD"; do callgrind_control -d "$p" >/dev/null; done
  echo "$(total_of datad "$DATAD") $(total_of sqld "$SQLD")"
}
# Instructions in the dump just made: the highest-numbered part file.
total_of() { # process pid
  local f
  f="$(ls -v "$WORK/$1.$2.cg".* | tail -1)"
  sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$f" | head -1
}
read -r d1 s1 < <(count_run "$EVENTS")
read -r d2 s2 < <(count_run $((2 * EVENTS)))
echo "datad $(((d2 - d1) / EVENTS))"
echo "sqld $(((s2 - s1) / EVENTS))"
echo "(one run of $EVENTS events, connection included: datad $((d1 / EVENTS)), sqld $((s1 / EVENTS)) per event)" >&2
trap - EXIT
cleanup_procs
if [ "${CG_KEEP:-0}" = 1 ]; then echo "callgrind files in $WORK" >&2; else rm -rf "$WORK"; fi
