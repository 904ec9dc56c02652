#!/usr/bin/env bash
# sysbench against two synchronously replicated clusters on loopback, side by
# side in one run (issue 20's SQL target: norr >= 2.0x Galera on
# oltp_read_write):
#
#   norr:   `norr mgmd`, 2 `norr datad --mgm` data nodes (replicas = 2, one node
#           group, in memory unless NORR_DISK=1) and one `norr sqld --mgm`;
#           sysbench connects to the SQL node.
#   Galera: 3 mariadbd processes (MariaDB + galera-4 from apt), each with its
#           own datadir and ports, wsrep_on=ON, binlog_format=ROW,
#           innodb_autoinc_lock_mode=2, the first bootstrapped with
#           --wsrep-new-cluster, the others joined by rsync SST; sysbench
#           connects to node 1 (and, with GALERA_SPREAD=1, in a second row to
#           all three: sysbench spreads its threads over the nodes' ports).
#
# For each workload: REPS runs of each system, alternating (norr, Galera,
# norr, ...) so that load from elsewhere on a shared machine hits both (with
# ORDER=staged: Galera's runs first, then Galera is shut down and norr started,
# so an idle system cannot take CPU from the one measured); medians
# of transactions/s and p95 latency, the ratio norr/Galera, and server CPU per
# transaction: utime + stime (/proc/PID/stat) of every server process of the
# system over the run (norr: mgmd + data nodes + sqld; Galera: the three
# mariadbd) divided by the run's transactions, with the per-process split.
# Prints a Markdown section and appends it to bench/RESULTS.md (NO_RECORD=1:
# print only). Logs and data directories under /tmp/norr-sysbench.XXXXXX
# (data directories removed on exit unless KEEP=1); every process it started
# is stopped on exit (SIGTERM, SIGKILL after 60 s).
#
#   bench/sysbench_vs_galera.sh
#   NORR_BIN=/path/to/norr REPS=5 SB_TIME=60 bench/sysbench_vs_galera.sh
#
# Env (defaults for a 2-core machine):
#   SB_TABLES=4 SB_TABLE_SIZE=100000 SB_THREADS=16 SB_TIME=30 REPS=3
#   WORKLOADS="oltp_point_select oltp_read_write"
#   NORR_BIN       norr binary (default: a release build, see sysbench_common.sh)
#   NORR_DISK=1    data nodes keep REDO and checkpoints on disk (default 0:
#                  --in-memory, durable through the second replica only)
#   NORR_DATA_KNOBS  lines for the cluster file's [data] section
#                  (e.g. "idle_spin_us = 0")
#   NORR_SQLD_ARGS extra `norr sqld` flags (e.g. "--threads 2")
#   GALERA_BUFFER_POOL  innodb_buffer_pool_size of each node (default: ~1 KiB
#                  per row, at least 128M: the data fits in memory, as in norr)
#   GALERA_SLAVE_THREADS=2  wsrep_slave_threads
#   GALERA_SPREAD=1  also run with sysbench's threads spread over the three
#                  Galera nodes (0 skips it; one node only is the headline)
#   ORDER=alternate (default: both clusters up, runs take turns) | staged
#                  (Galera alone, then norr alone; the other system's CPU
#                  during each run is reported in the alternate order)
#   KEEP=1 keep the data directories; NO_RECORD=1 do not append to RESULTS.md
#   COMMIT         label of the norr build in the title (default: git HEAD)
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "no arguments (settings are environment variables; see --help)" >&2; exit 2 ;;
esac
. "$(dirname "$0")/sysbench_common.sh"
REPS="${REPS:-3}"
WORKLOADS="${WORKLOADS:-oltp_point_select oltp_read_write}"
GALERA_SLAVE_THREADS="${GALERA_SLAVE_THREADS:-2}"
GALERA_SPREAD="${GALERA_SPREAD:-1}"
ORDER="${ORDER:-alternate}"
ROWS=$((SB_TABLES * SB_TABLE_SIZE))
GALERA_BUFFER_POOL="${GALERA_BUFFER_POOL:-$(( (ROWS / 1024 + 1) > 128 ? (ROWS / 1024 + 1) : 128 ))M}"
GALERA_PROVIDER=/usr/lib/galera/libgalera_smm.so
TICK="$(getconf CLK_TCK)"
log() { echo "== $*" >&2; }
wait_listen() { # port seconds what pid: wait_port that gives up when the process died
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    if ! kill -0 "$4" 2>/dev/null; then echo "$3 exited before it listened on port $1" >&2; return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$3 did not listen on port $1 within $2 s" >&2
  return 1
}

# Stop everything this script started: SIGTERM (mariadbd shuts down cleanly,
# norr processes exit), SIGKILL what is left after 60 s; then remove the data
# directories (the logs stay).
cleanup_all() {
  local p i alive
  set +e
  for p in "${PIDS[@]:-}"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null; fi
  done
  for ((i = 0; i < 600; i++)); do
    alive=0
    for p in "${PIDS[@]:-}"; do
      if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]:-}"; do
    if [ -n "$p" ]; then kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; fi
  done
  if [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"/galera/node*/data "$WORK"/galera/template "$WORK"/norr/node-*
  fi
}
trap cleanup_all EXIT

ensure_packages sysbench mariadb-server mariadb-client galera-4 rsync time

# ---- norr: mgmd + 2 data nodes (replicas = 2) + sqld --------------------------
NORR="$(norr_bin)"
[ -x "$NORR" ] || { log "no norr binary at $NORR"; exit 1; }
start_norr_cluster() {
  local dir="$WORK/norr" mgm_port d1 d2 i started=0
  mkdir -p "$dir"
  mgm_port="$(free_port)"; d1="$(free_port)"; d2="$(free_port)"
  NORR_MGM="127.0.0.1:$mgm_port"
  NORR_PORT="$(free_port)"
  NORR_SOCKET="$dir/sqld.sock"
  {
    printf '[cluster]\nname = "sysbench_vs_galera"\nreplicas = 2\n[data]\n%b\n' "${NORR_DATA_KNOBS:-}"
    printf '[[node]]\nid = 1\nkind = "mgmd"\nhost = "127.0.0.1"\nport = %d\n' "$mgm_port"
    for i in 2 3; do
      printf '[[node]]\nid = %d\nkind = "data"\nhost = "127.0.0.1"\nport = %d\n' "$i" "$([ "$i" = 2 ] && echo "$d1" || echo "$d2")"
      [ "${NORR_DISK:-0}" = 1 ] && printf 'data_dir = "%s"\n' "$dir/node-$i"
    done
    printf '[[node]]\nid = 100\nkind = "sql"\nhost = "127.0.0.1"\n'
  } >"$dir/cluster.toml"
  "$NORR" mgmd --config "$dir/cluster.toml" >"$dir/mgmd.log" 2>&1 &
  PIDS+=($!); NORR_MGMD_PID=$!
  wait_listen "$mgm_port" 60 "norr mgmd" "$NORR_MGMD_PID" || { tail -20 "$dir/mgmd.log" >&2; exit 1; }
  NORR_DATAD_PIDS=()
  for i in 2 3; do
    local mem=(--in-memory)
    [ "${NORR_DISK:-0}" = 1 ] && mem=()
    "$NORR" datad --mgm "$NORR_MGM" --node-id "$i" "${mem[@]}" >"$dir/datad-$i.log" 2>&1 &
    PIDS+=($!); NORR_DATAD_PIDS+=($!)
  done
  for ((i = 0; i < 600; i++)); do
    started=$("$NORR" mgm --mgm "$NORR_MGM" status 2>/dev/null | grep -c ': started' || true)
    [ "$started" -ge 2 ] && break
    sleep 0.2
  done
  if [ "$started" -lt 2 ]; then
    log "only $started of 2 norr data nodes started"; tail -20 "$dir"/datad-*.log >&2; exit 1
  fi
  # shellcheck disable=SC2086 # extra flags are word-split on purpose
  NORR_ROOT_PASSWORD="" "$NORR" sqld --mgm "$NORR_MGM" --listen "127.0.0.1:$NORR_PORT" \
    --socket "$NORR_SOCKET" --max-connections 1000 ${NORR_SQLD_ARGS:-} >"$dir/sqld.log" 2>&1 &
  PIDS+=($!); NORR_SQLD_PID=$!
  wait_listen "$NORR_PORT" 60 "norr sqld" "$NORR_SQLD_PID" || { tail -20 "$dir/sqld.log" >&2; exit 1; }
  "$NORR" mgm --mgm "$NORR_MGM" show >&2 || true
}

# ---- Galera: 3 mariadbd nodes ----------------------------------------------------
galera_status() { # port variable
  mysql -h127.0.0.1 -P"$1" -uroot --protocol=TCP -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2
}
start_galera() {
  local dir="$WORK/galera" i gm=() ist=() sst=() addr="" ok
  # mariadbd runs as the mysql user, as packaged: the rsync SST script starts
  # an rsync daemon as mariadbd's user, and one started by root would switch to
  # "nobody" and could not write the joiner's files.
  chmod 711 "$WORK"
  mkdir -p "$dir/template"
  chown mysql: "$dir"
  mariadb-install-db --user=mysql --datadir="$dir/template" --auth-root-authentication-method=normal \
    >"$dir/install.log" 2>&1 || { tail -20 "$dir/install.log" >&2; exit 1; }
  GALERA_PORTS=(); GALERA_PIDS=()
  for i in 1 2 3; do
    GALERA_PORTS+=("$(free_port)"); gm+=("$(free_port)"); ist+=("$(free_port)"); sst+=("$(free_port)")
  done
  addr="gcomm://127.0.0.1:${gm[0]},127.0.0.1:${gm[1]},127.0.0.1:${gm[2]}"
  for i in 0 1 2; do
    local n=$((i + 1))
    mkdir -p "$dir/node$n"
    cp -a "$dir/template" "$dir/node$n/data"
    chown mysql: "$dir/node$n"
    cat >"$dir/node$n/my.cnf" <<EOF
[mysqld]
user = mysql
datadir = $dir/node$n/data
socket = $dir/node$n/sock
pid-file = $dir/node$n/mariadbd.pid
log-error = $dir/node$n/error.log
port = ${GALERA_PORTS[$i]}
bind-address = 127.0.0.1
skip-grant-tables
skip-log-bin
max_connections = 1000
default_storage_engine = InnoDB
binlog_format = ROW
innodb_autoinc_lock_mode = 2
innodb_buffer_pool_size = $GALERA_BUFFER_POOL
innodb_flush_log_at_trx_commit = 2
wsrep_on = ON
wsrep_provider = $GALERA_PROVIDER
wsrep_cluster_name = norr_bench
wsrep_cluster_address = $addr
wsrep_node_name = node$n
wsrep_node_address = 127.0.0.1:${gm[$i]}
wsrep_provider_options = "base_port=${gm[$i]};gmcast.listen_addr=tcp://127.0.0.1:${gm[$i]};ist.recv_addr=127.0.0.1:${ist[$i]}"
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:${sst[$i]}
wsrep_slave_threads = $GALERA_SLAVE_THREADS
EOF
    local extra=()
    [ "$n" = 1 ] && extra=(--wsrep-new-cluster)
    mariadbd --defaults-file="$dir/node$n/my.cnf" "${extra[@]}" >"$dir/node$n/stdout.log" 2>&1 &
    PIDS+=($!); GALERA_PIDS+=($!)
    # One joiner at a time: each takes its SST from a synced node.
    if ! wait_listen "${GALERA_PORTS[$i]}" 300 "mariadbd node$n" "${GALERA_PIDS[$i]}"; then
      tail -30 "$dir/node$n/error.log" >&2; exit 1
    fi
    for ((ok = 0; ok < 600; ok++)); do
      kill -0 "${GALERA_PIDS[$i]}" 2>/dev/null || { log "mariadbd node$n exited"; tail -30 "$dir/node$n/error.log" >&2; exit 1; }
      [ "$(galera_status "${GALERA_PORTS[$i]}" wsrep_local_state_comment)" = Synced ] && break
      sleep 0.5
    done
  done
  for ((ok = 0; ok < 600; ok++)); do
    local good=1
    for i in 0 1 2; do
      [ "$(galera_status "${GALERA_PORTS[$i]}" wsrep_cluster_size)" = 3 ] || good=0
      [ "$(galera_status "${GALERA_PORTS[$i]}" wsrep_ready)" = ON ] || good=0
    done
    [ "$good" = 1 ] && break
    sleep 0.5
  done
  if [ "$good" != 1 ]; then
    log "Galera did not reach wsrep_cluster_size=3 with wsrep_ready=ON on every node"
    for i in 1 2 3; do tail -15 "$dir/node$i/error.log" >&2; done
    exit 1
  fi
  rm -rf "$dir/template"
  log "Galera: 3 nodes synced, cluster size 3, ready (ports ${GALERA_PORTS[*]})"
}

# ---- runs ---------------------------------------------------------------------------
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime; the comm field has no spaces here
txns_of() { sed -n 's/.*transactions: *\([0-9]*\) .*/\1/p' "$1" | head -1; }
errs_of() { sed -n 's/.*ignored errors: *\([0-9]*\) .*/\1/p' "$1" | head -1; }
# ms of CPU per transaction: ms_per_txn TICKS TXNS
ms_per_txn() { awk -v t="$1" -v n="$2" -v hz="$TICK" 'BEGIN { if (n > 0) printf "%.3f", t * 1e3 / hz / n; else print "n/a" }'; }

# Targets: name -> sysbench connection flags, the pids of the system's server
# processes and their names. OTHER: the other system's pids while it is up
# (its CPU during a run is reported: an idle system should cost nothing).
declare -A CONN SRV NAMES
TARGETS="norr galera"
[ "$GALERA_SPREAD" = 1 ] && TARGETS="$TARGETS galera3"
NORR_UP=0; GALERA_UP=0
up_norr() {
  start_norr_cluster
  CONN[norr]="--mysql-host=127.0.0.1 --mysql-port=$NORR_PORT"
  SRV[norr]="$NORR_MGMD_PID ${NORR_DATAD_PIDS[*]} $NORR_SQLD_PID"
  NAMES[norr]="mgmd datad-2 datad-3 sqld"
  NORR_UP=1
}
up_galera() {
  start_galera
  CONN[galera]="--mysql-host=127.0.0.1 --mysql-port=${GALERA_PORTS[0]}"
  CONN[galera3]="--mysql-host=127.0.0.1 --mysql-port=$(IFS=,; echo "${GALERA_PORTS[*]}")"
  SRV[galera]="${GALERA_PIDS[*]}"; SRV[galera3]="${SRV[galera]}"
  NAMES[galera]="node1 node2 node3"; NAMES[galera3]="${NAMES[galera]}"
  GALERA_VERSION="$(galera_status "${GALERA_PORTS[0]}" wsrep_provider_version)"
  GALERA_UP=1
}
# Staged order: Galera is shut down (cleanly) before norr starts.
down_galera() {
  local p i alive
  kill "${GALERA_PIDS[@]}" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    alive=0
    for p in "${GALERA_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${GALERA_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  GALERA_UP=0
}
other_pids() { # target: the other system's pids, if it is up
  case "$1" in
    norr) [ "$GALERA_UP" = 1 ] && echo "${GALERA_PIDS[*]}" ;;
    *) [ "$NORR_UP" = 1 ] && echo "$NORR_MGMD_PID ${NORR_DATAD_PIDS[*]} $NORR_SQLD_PID" ;;
  esac
  return 0
}

sbx() { # target workload command [extra...]
  local t="$1" wl="$2" cmd="$3"
  shift 3
  # shellcheck disable=SC2086 # connection flags are word-split on purpose
  sysbench "$wl" --db-driver=mysql ${CONN[$t]} --mysql-user=root --mysql-password= --mysql-db=sbtest \
    --tables="$SB_TABLES" --table-size="$SB_TABLE_SIZE" --threads="$SB_THREADS" \
    --time="$SB_TIME" "$@" "$cmd"
}

# One schema per system, prepared once (oltp_read_write deletes and inserts the
# same ids, so the tables keep their size across workloads).
prepare() { # norr | galera
  local t="$1" port s0 i n3
  if [ "$t" = galera ]; then port="${GALERA_PORTS[0]}"; else port="$NORR_PORT"; fi
  sql "$port" "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
  log "$t: sysbench prepare ($SB_TABLES x $SB_TABLE_SIZE rows)"
  s0=$(date +%s)
  sbx "$t" oltp_read_write prepare >"$WORK/$t-prepare.log" 2>&1 \
    || { log "$t prepare failed:"; tail -20 "$WORK/$t-prepare.log" >&2; exit 1; }
  PREPARE_S[$t]=$(( $(date +%s) - s0 ))
  log "$t: prepared in ${PREPARE_S[$t]} s"
  if [ "$t" = galera ]; then
    # Every node must hold the tables before the runs.
    for ((i = 0; i < 600; i++)); do
      n3="$(mysql -h127.0.0.1 -P"${GALERA_PORTS[2]}" -uroot --protocol=TCP -N -B -e "SELECT COUNT(*) FROM sbtest.sbtest$SB_TABLES" 2>/dev/null || true)"
      [ "$n3" = "$SB_TABLE_SIZE" ] && break
      sleep 0.5
    done
  fi
}

declare -A TPS P95 CPUMS SPLIT IDLE ERRS LOADS PREPARE_S
run_one() { # target workload rep
  local t="$1" wl="$2" rep="$3" log pids others names c0 o0 o1 tot split d k n cms idle load p
  log="$WORK/$t-$wl-run$rep.log"
  read -r -a pids <<<"${SRV[$t]}"
  read -r -a others <<<"$(other_pids "$t")"
  read -r -a names <<<"${NAMES[$t]}"
  c0=(); for p in "${pids[@]}"; do c0+=("$(cpu_ticks "$p")"); done
  o0=0; for p in "${others[@]}"; do o0=$((o0 + $(cpu_ticks "$p"))); done
  if ! sbx "$t" "$wl" run --report-interval=0 >"$log" 2>&1; then
    log "$t $wl run $rep failed:"; tail -20 "$log" >&2; exit 1
  fi
  n="$(txns_of "$log")"
  tot=0; split=""
  for k in "${!pids[@]}"; do
    d=$(( $(cpu_ticks "${pids[$k]}") - c0[k] ))
    tot=$((tot + d))
    split="$split ${names[$k]}=$(ms_per_txn "$d" "$n")"
  done
  o1=0; for p in "${others[@]}"; do o1=$((o1 + $(cpu_ticks "$p"))); done
  cms="$(ms_per_txn "$tot" "$n")"
  idle="n/a"  # the other system is not running (staged order)
  [ ${#others[@]} -gt 0 ] && idle="$(awk -v t=$((o1 - o0)) -v hz="$TICK" -v s="$SB_TIME" 'BEGIN { printf "%.0f", t / hz / s * 100 }')"
  load="$(cut -d' ' -f1 /proc/loadavg)"
  log "$t $wl run $rep: $(tps_of "$log") tps, p95 $(p95_of "$log") ms, server CPU $cms ms/txn (${split# }), the other system's CPU meanwhile $([ "$idle" = n/a ] && echo 'n/a (not running)' || echo "$idle% of a core"), ignored errors $(errs_of "$log"), load $load"
  TPS[$t,$wl]="${TPS[$t,$wl]:-} $(tps_of "$log")"
  P95[$t,$wl]="${P95[$t,$wl]:-} $(p95_of "$log")"
  CPUMS[$t,$wl]="${CPUMS[$t,$wl]:-} $cms"
  SPLIT[$t,$wl]="${SPLIT[$t,$wl]:-}; ${split# }"
  IDLE[$t,$wl]="${IDLE[$t,$wl]:-} $idle"
  ERRS[$t,$wl]="${ERRS[$t,$wl]:-} $(errs_of "$log")"
  LOADS[$wl]="${LOADS[$wl]:-} $load"
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
case "$ORDER" in
  alternate)
    up_norr; up_galera
    prepare norr; prepare galera
    for wl in $WORKLOADS; do
      for rep in $(seq 1 "$REPS"); do
        for t in $TARGETS; do run_one "$t" "$wl" "$rep"; done
      done
    done
    ;;
  staged)
    up_galera; prepare galera
    for wl in $WORKLOADS; do
      for rep in $(seq 1 "$REPS"); do
        for t in $TARGETS; do [ "$t" = norr ] || run_one "$t" "$wl" "$rep"; done
      done
    done
    down_galera
    up_norr; prepare norr
    for wl in $WORKLOADS; do
      for rep in $(seq 1 "$REPS"); do run_one norr "$wl" "$rep"; done
    done
    ;;
  *) log "ORDER must be alternate or staged"; exit 2 ;;
esac
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- report -------------------------------------------------------------------------
# Median of each process's share: "a=1 b=2; a=3 b=4" -> "a 2, b 3"
split_median() {
  tr ';' '\n' | tr ' ' '\n' | grep '=' | awk -F= '{v[$1] = v[$1] " " $2; if (!($1 in seen)) {seen[$1] = 1; order[++n] = $1}}
    END { for (i = 1; i <= n; i++) print order[i], v[order[i]] }' | while read -r name vals; do
    printf '%s %s, ' "$name" "$(echo "$vals" | median)"
  done | sed 's/, $//'
}
idle_median() { # values: their median, or "not running" (staged order)
  if [[ "$1" == *n/a* ]]; then echo "- (not running)"; else echo "$1" | median; fi
}
label() {
  case "$1" in
    norr) echo "norr (mgmd + 2 datad, replicas = 2, + sqld; sysbench -> sqld)" ;;
    galera) echo "Galera, 3 nodes (sysbench -> node 1)" ;;
    galera3) echo "Galera, 3 nodes (sysbench threads spread over nodes 1-3)" ;;
  esac
}
table="| workload | system | tps | norr / this | p95 ms | server CPU ms/txn | CPU ms/txn per process | the other system's CPU meanwhile, % of a core | sysbench ignored errors |
|---|---|---|---|---|---|---|---|---|"
verdict=""
for wl in $WORKLOADS; do
  for t in $TARGETS; do
    tps="$(echo "${TPS[$t,$wl]}" | median)"
    ratio="$(awk -v a="$(echo "${TPS[norr,$wl]}" | median)" -v b="$tps" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')"
    [ "$t" = norr ] && ratio="-"
    table="$table
| $wl | $(label "$t") | $tps | $ratio | $(echo "${P95[$t,$wl]}" | median) | $(echo "${CPUMS[$t,$wl]}" | median) | $(echo "${SPLIT[$t,$wl]}" | split_median) | $(idle_median "${IDLE[$t,$wl]}") | $(echo "${ERRS[$t,$wl]}" | median) |"
    if [ "$wl" = oltp_read_write ] && [ "$t" = galera ]; then
      met="$(awk -v r="${ratio%x}" 'BEGIN { print (r >= 2.0) ? "met" : "**not met**" }')"
      verdict="Issue 20's target, norr >= 2.0x a 3-node Galera cluster on oltp_read_write: $ratio, $met."
    fi
  done
done
raw=""
for wl in $WORKLOADS; do
  for t in $TARGETS; do
    raw="$raw
- $wl, $t: tps${TPS[$t,$wl]}; server CPU ms/txn${CPUMS[$t,$wl]}; other system's CPU while this one ran (% of a core)${IDLE[$t,$wl]}"
  done
  raw="$raw
- $wl: 1-minute load average at the end of each run:${LOADS[$wl]}"
done
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
commit="${COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
report="
## $(date -u '+%Y-%m-%d %H:%M') UTC: sysbench vs 3-node Galera ($commit)

- command: \`bench/sysbench_vs_galera.sh\` (ORDER=$ORDER SB_TABLES=$SB_TABLES SB_TABLE_SIZE=$SB_TABLE_SIZE SB_THREADS=$SB_THREADS SB_TIME=$SB_TIME REPS=$REPS GALERA_SPREAD=$GALERA_SPREAD${NORR_DISK:+ NORR_DISK=$NORR_DISK}${NORR_DATA_KNOBS:+ NORR_DATA_KNOBS=\"$NORR_DATA_KNOBS\"}${NORR_SQLD_ARGS:+ NORR_SQLD_ARGS=\"$NORR_SQLD_ARGS\"}), norr binary \`$NORR\`
- machine: nproc=$(nproc), CPU: $cpu, shared with other work; load average (1/5/15 min) before the runs: $LOAD_BEFORE, after: $LOAD_AFTER
- $(sysbench --version), over TCP to 127.0.0.1; $(mariadbd --version | head -1); galera-4 provider $GALERA_VERSION
- norr: \`norr mgmd\`, 2 \`norr datad --mgm\` (one node group, replicas = 2, $([ "${NORR_DISK:-0}" = 1 ] && echo "REDO and checkpoints on disk" || echo "--in-memory"), ${NORR_DATA_KNOBS:-default knobs}), one \`norr sqld --mgm\` (${NORR_SQLD_ARGS:-default flags}); the SQL node reaches the data nodes over loopback TCP
- Galera: 3 mariadbd, wsrep_slave_threads=$GALERA_SLAVE_THREADS, innodb_buffer_pool_size=$GALERA_BUFFER_POOL each, innodb_flush_log_at_trx_commit=2, binlog_format=ROW (binary log off), innodb_autoinc_lock_mode=2, rsync SST, other settings default
- every system's processes and sysbench share the same $(nproc) cores; $([ "$ORDER" = staged ] && echo "ORDER=staged: Galera's runs first with norr not started, then Galera shut down and norr started" || echo "both clusters stay up for the whole run and take turns (norr, Galera, ... for each repetition)"); median of $REPS runs of ${SB_TIME} s each; prepare took ${PREPARE_S[norr]} s (norr) and ${PREPARE_S[galera]} s (Galera)

$table

$verdict

Server CPU per transaction: utime + stime of all of the system's server processes over the
run (norr: mgmd, both data nodes and sqld; Galera: the three mariadbd) divided by the
run's transactions; the per-process column splits it (medians per process, so they need
not add up exactly).

Raw figures:$raw
"
echo "$report"
if [ -z "${NO_RECORD:-}" ]; then
  echo "$report" >>"$ROOT/bench/RESULTS.md"
  log "appended to bench/RESULTS.md (logs in $WORK)"
fi
