# Shared helpers for bench/sysbench_*.sh (sourced, not run).
# Starts processes on loopback only and stops them on exit.

SB_TABLES="${SB_TABLES:-4}"
SB_TABLE_SIZE="${SB_TABLE_SIZE:-100000}"
SB_THREADS="${SB_THREADS:-16}"
SB_TIME="${SB_TIME:-30}"
SB_WRAP=()
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d /tmp/norr-sysbench.XXXXXX)"
PIDS=()

cleanup_procs() {
  local p
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
}
trap cleanup_procs EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_port() { # port seconds what
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$3 did not listen on port $1 within $2 s" >&2
  return 1
}

ensure_packages() { # packages...
  local missing=()
  local p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# norr binary: $NORR_BIN, else a build with cargo profile $NORR_PROFILE
# (default release; `profiling` is release with debug info, for profilers),
# built if missing.
norr_bin() {
  if [ -n "${NORR_BIN:-}" ]; then echo "$NORR_BIN"; return; fi
  local target="${CARGO_TARGET_DIR:-$ROOT/target}" profile="${NORR_PROFILE:-release}"
  if [ ! -x "$target/$profile/norr" ] || [ "${NORR_REBUILD:-1}" = 1 ]; then
    (cd "$ROOT" && cargo build --profile "$profile" -p norr-cli >&2)
  fi
  echo "$target/$profile/norr"
}

# start_norr -> sets NORR_PORT and NORR_SOCKET. Extra flags: $NORR_DATAD_ARGS
# (data node knobs), $NORR_SQLD_ARGS (separate layout only).
# NORR_LAYOUT=separate (default): `norr datad` and `norr sqld` processes; sqld
#   reaches the data node over a Unix socket (both run on this host), or over
#   loopback TCP with NORR_DATA_LINK=tcp.
# NORR_LAYOUT=colocated: one `norr up --data-nodes 1` process; its SQL node reaches the data
#   node through the in-process link.
# Files go to $WORK/norr-<layout>, or $WORK/norr-<layout>-<NORR_INSTANCE> when
# one run starts several servers of the same layout.
start_norr() {
  local bin data_port data_node data_sock_args=() layout="${NORR_LAYOUT:-separate}" dir
  bin="$(norr_bin)"
  dir="$WORK/norr-$layout${NORR_INSTANCE:+-$NORR_INSTANCE}"
  mkdir -p "$dir"
  data_port="$(free_port)"
  NORR_PORT="$(free_port)"
  NORR_SOCKET="$dir/norr.sock"
  if [ "$layout" = colocated ]; then
    # shellcheck disable=SC2086 # extra flags are word-split on purpose
    # --in-memory: like the separate layout's `norr datad` without --data-dir
    # (durability has its own runs); --data-dir keeps its files under $dir.
    NORR_ROOT_PASSWORD="" "$bin" up --data-nodes 1 --port-base "$data_port" --sql-port "$NORR_PORT" \
      --sql-socket "$NORR_SOCKET" --in-memory --data-dir "$dir/up-data" ${NORR_DATAD_ARGS:-} >"$dir/up.log" 2>&1 &
    PIDS+=($!)
    wait_port "$NORR_PORT" 60 "norr up"
    return
  fi
  data_node="127.0.0.1:$data_port"
  # durable: the separate layout with the data node's REDO log, global and
  # local checkpoints on disk (`--data-dir`); separate runs in memory only.
  if [ "$layout" = durable ]; then
    data_sock_args+=(--data-dir "$dir/datad-data")
  fi
  if [ "${NORR_DATA_LINK:-unix}" = unix ]; then
    data_sock_args+=(--socket "$dir/datad.sock")
    data_node="unix:$dir/datad.sock"
  fi
  # shellcheck disable=SC2086 # extra flags are word-split on purpose
  "$bin" datad --listen "127.0.0.1:$data_port" "${data_sock_args[@]}" ${NORR_DATAD_ARGS:-} >"$dir/datad.log" 2>&1 &
  PIDS+=($!)
  wait_port "$data_port" 60 "norr datad"
  NORR_ROOT_PASSWORD="" "$bin" sqld --listen "127.0.0.1:$NORR_PORT" --data-node "$data_node" \
    --socket "$NORR_SOCKET" --max-connections 1000 ${NORR_SQLD_ARGS:-} >"$dir/sqld.log" 2>&1 &
  PIDS+=($!)
  wait_port "$NORR_PORT" 60 "norr sqld"
}

# start_null_sqld -> sets NULL_PORT and NULL_SOCKET: the protocol ceiling
# (crates/sql/examples/null_sqld.rs), norr's protocol layer answering every
# query without database work. Binary: $NULL_SQLD_BIN, else a release build.
start_null_sqld() {
  local bin="${NULL_SQLD_BIN:-}" dir="$WORK/null-sqld"
  if [ -z "$bin" ]; then
    bin="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/null_sqld"
    if [ ! -x "$bin" ] || [ "${NORR_REBUILD:-1}" = 1 ]; then
      (cd "$ROOT" && cargo build --release -p norr-sql --example null_sqld >&2)
    fi
  fi
  mkdir -p "$dir"
  NULL_PORT="$(free_port)"
  NULL_SOCKET="$dir/null.sock"
  "$bin" --listen "127.0.0.1:$NULL_PORT" --socket "$NULL_SOCKET" >"$dir/null-sqld.log" 2>&1 &
  PIDS+=($!)
  wait_port "$NULL_PORT" 30 "null_sqld"
}

# start_mariadb -> sets MARIA_PORT and MARIA_SOCKET
start_mariadb() {
  MARIA_PORT="$(free_port)"
  local dir="$WORK/mariadb"
  MARIA_SOCKET="$dir/sock"
  mkdir -p "$dir/data"
  mariadb-install-db --user=root --datadir="$dir/data" --auth-root-authentication-method=normal \
    >"$WORK/mariadb-install.log" 2>&1
  mariadbd --no-defaults --user=root --datadir="$dir/data" --socket="$dir/sock" \
    --port="$MARIA_PORT" --bind-address=127.0.0.1 --skip-grant-tables --skip-log-bin \
    --default-storage-engine=InnoDB --innodb-buffer-pool-size=2G \
    --innodb-flush-log-at-trx-commit=2 --max-connections=1000 \
    >"$WORK/mariadb.log" 2>&1 &
  PIDS+=($!)
  wait_port "$MARIA_PORT" 120 "mariadbd"
}

sql() { # port statement
  mysql -h127.0.0.1 -P"$1" -uroot --protocol=TCP -e "$2"
}

# sb PORT WORKLOAD COMMAND [extra...]: over TCP, or over the server's Unix
# socket when SB_TRANSPORT=socket (PORT then selects which server's socket).
# The array SB_WRAP, if set, prefixes the command (e.g. /usr/bin/time ...).
sb() {
  local port="$1" wl="$2" cmd="$3"
  shift 3
  local conn=(--mysql-host=127.0.0.1 --mysql-port="$port")
  if [ "${SB_TRANSPORT:-tcp}" = socket ]; then
    if [ "$port" = "${NORR_PORT:-}" ]; then conn=(--mysql-socket="$NORR_SOCKET"); else conn=(--mysql-socket="$MARIA_SOCKET"); fi
  fi
  "${SB_WRAP[@]}" sysbench "$wl" --db-driver=mysql "${conn[@]}" \
    --mysql-user=root --mysql-password= --mysql-db=sbtest \
    --tables="$SB_TABLES" --table-size="$SB_TABLE_SIZE" --threads="$SB_THREADS" \
    --time="$SB_TIME" "$@" "$cmd"
}

# tps_of FILE: transactions per second from a sysbench run log.
tps_of() { sed -n 's/.*transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$1" | head -1; }
qps_of() { sed -n 's/.*queries: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$1" | head -1; }
p95_of() { sed -n 's/.*95th percentile: *\([0-9.]*\).*/\1/p' "$1" | head -1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
