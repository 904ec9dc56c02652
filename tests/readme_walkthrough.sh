#!/usr/bin/env bash
# Runs the README's five-minute walk-through ("A first cluster") as written:
# start a cluster with `norr up`, connect with the mysql client, create a
# table, query it, kill a data node, look at the cluster with `norr mgm show`,
# query again, stop. Fails on the first step that does not do what the README
# says. Free ports and a temporary directory, so it runs beside anything.
#
#   tests/readme_walkthrough.sh
#
# The norr binary: $NORR_BIN, else target/debug/norr (built here unless
# NORR_SKIP_BUILD=1). Needs the mysql client (installed with apt if missing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

if [ -z "${NORR_BIN:-}" ]; then
  if [ "${NORR_SKIP_BUILD:-0}" != 1 ]; then
    (cd "$root" && cargo build -p norr-cli)
  fi
  NORR_BIN="${CARGO_TARGET_DIR:-$root/target}/debug/norr"
fi
[ -x "$NORR_BIN" ] || { echo "norr binary not found at $NORR_BIN" >&2; exit 2; }
if ! command -v mysql >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq default-mysql-client >/dev/null
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Two consecutive free ports for the two data nodes (--port-base and the next).
free_pair() {
  python3 - <<'EOF'
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
EOF
}

dir="$(mktemp -d -t norr-walkthrough-XXXXXX)"
sql_port="$(free_port)"; mgm_port="$(free_port)"; base="$(free_pair)"
up_pid=""
finish() {
  status=$?
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -INT "$up_pid"; wait "$up_pid" || true
  fi
  if [ "$status" != 0 ]; then
    echo "walk-through FAILED; norr up's output and logs:" >&2
    cat "$dir/up.out" "$dir/up.err" >&2 || true
    tail -n 30 "$dir"/norr-data/*.log >&2 || true
  fi
  rm -rf "$dir"
}
trap finish EXIT
step() { echo "== $*"; }
sql() { mysql -h127.0.0.1 -P"$sql_port" -uroot --batch --skip-column-names -e "$1"; }

cd "$dir"
step "norr up (mgmd, 2 data nodes with 2 replicas, a SQL node)"
"$NORR_BIN" up --sql-port "$sql_port" --mgm-port "$mgm_port" --port-base "$base" >up.out 2>up.err &
up_pid=$!
for _ in $(seq 1 600); do
  grep -q "is up" up.out 2>/dev/null && break
  kill -0 "$up_pid" 2>/dev/null || { echo "norr up exited before the cluster was up" >&2; exit 1; }
  sleep 0.1
done
grep -q "is up" up.out || { echo "the cluster was not up within 60 s" >&2; exit 1; }
grep -q "ALTER USER 'root'@'localhost'" up.out || { echo "norr up did not say how to set root's password" >&2; exit 1; }

step "connect, create, query"
sql "CREATE DATABASE shop;
     CREATE TABLE shop.orders (id INT PRIMARY KEY AUTO_INCREMENT, item VARCHAR(40), qty INT);
     INSERT INTO shop.orders (item, qty) VALUES ('apple', 3), ('pear', 5), ('apple', 2);"
got="$(sql "SELECT item, SUM(qty) FROM shop.orders GROUP BY item ORDER BY item")"
[ "$got" = "$(printf 'apple\t5\npear\t5')" ] || { echo "unexpected result: $got" >&2; exit 1; }

step "kill -9 a data node; the cluster keeps serving"
victim="$(grep -Eo 'kill -9 [0-9]+' up.out | head -1 | awk '{print $3}')"
[ -n "$victim" ] || { echo "norr up did not print a data node to kill" >&2; exit 1; }
kill -9 "$victim"
sql "INSERT INTO shop.orders (item, qty) VALUES ('plum', 7)"
[ "$(sql "SELECT COUNT(*) FROM shop.orders")" = 4 ] || { echo "rows lost after the kill" >&2; exit 1; }

step "norr mgm show"
"$NORR_BIN" mgm --mgm "127.0.0.1:$mgm_port" show | tee show.out
grep -q "President" show.out
# norr up starts the killed node again; it copies from its replica.
for _ in $(seq 1 600); do
  "$NORR_BIN" mgm --mgm "127.0.0.1:$mgm_port" show >show.out 2>&1 || true
  [ "$(grep -cE '^ *[0-9]+ +data .* started' show.out)" = 2 ] && break
  sleep 0.2
done
[ "$(grep -cE '^ *[0-9]+ +data .* started' show.out)" = 2 ] || { cat show.out; echo "the killed node did not come back" >&2; exit 1; }
cat show.out
[ "$(sql "SELECT SUM(qty) FROM shop.orders")" = 17 ] || { echo "wrong sum after the restart" >&2; exit 1; }

step "Ctrl-C stops the cluster"
kill -INT "$up_pid"; wait "$up_pid"; up_pid=""
echo "walk-through: 1 passed, 0 failed"
