#!/usr/bin/env bash
# NorrDB native API vs Redis on loopback, same machine, same run.
#
#   bench/redis_vs_norr.sh            # run, print, append a section to bench/RESULTS.md
#   NO_RECORD=1 bench/redis_vs_norr.sh  # run and print only
#
# What it does:
#   1. builds release binaries (norr, and the norr-client examples `datad` and
#      `bench` as fallbacks while `norr bench` / `norr datad` are not wired);
#   2. starts a data node on loopback, loads KEYS rows (k BIGINT, v VARBINARY)
#      with VALUE-byte values, measuring the node's memory per row;
#   3. runs norr bench: batched PK reads and PK updates (THREADS connections x
#      INFLIGHT transactions x BATCH ops), and unbatched reads (1 x 1 x 1);
#   4. installs redis-server / redis-tools (apt-get) if missing, starts
#      redis-server on loopback with persistence off and runs redis-benchmark
#      SET and GET with -P BATCH, the same key count, value size and number of
#      concurrent pipelines (THREADS*INFLIGHT connections, --threads THREADS);
#   5. repeats everything REPEAT times, reports medians and ratios against the
#      targets.
# Knobs (environment): KEYS VALUE THREADS INFLIGHT BATCH DURATION REPEAT NORR_PORT REDIS_PORT
# REDIS_N (requests per redis-benchmark run), COMMIT (label, default: git HEAD), NO_RECORD.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KEYS=${KEYS:-100000}
VALUE=${VALUE:-100}
THREADS=${THREADS:-2}
INFLIGHT=${INFLIGHT:-8}
BATCH=${BATCH:-64}
DURATION=${DURATION:-5s}
REPEAT=${REPEAT:-3}
NORR_PORT=${NORR_PORT:-22202}
REDIS_PORT=${REDIS_PORT:-16379}
REDIS_N=${REDIS_N:-2000000}
OUT=$(mktemp -d /tmp/redis_vs_norr.XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

log() { echo "== $*" >&2; }

wait_port() { # port, pid
    for _ in $(seq 1 100); do
        if ! kill -0 "$2" 2>/dev/null; then return 1; fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

# ---- build ------------------------------------------------------------------
log "building release binaries in $TARGET"
cd "$ROOT"
cargo build --release -p norr-client --examples >&2
cargo build --release -p norr-cli >&2 || log "norr-cli did not build; using the norr-client examples"

# ---- data node ----------------------------------------------------------------
ADDR="127.0.0.1:$NORR_PORT"
DATAD_DESC=""
if [ -x "$TARGET/release/norr" ]; then
    "$TARGET/release/norr" datad --listen "$ADDR" >"$OUT/datad.log" 2>&1 &
    PIDS+=($!)
    if wait_port "$NORR_PORT" "$!"; then DATAD_DESC="norr datad"; else log "norr datad did not start: $(tail -2 "$OUT/datad.log")"; fi
fi
if [ -z "$DATAD_DESC" ]; then
    "$TARGET/release/examples/datad" "$ADDR" >"$OUT/datad.log" 2>&1 &
    PIDS+=($!)
    wait_port "$NORR_PORT" "$!" || { cat "$OUT/datad.log" >&2; exit 1; }
    DATAD_DESC="norr-client example datad"
fi
if [ -x "$TARGET/release/norr" ] && "$TARGET/release/norr" bench --help >/dev/null 2>&1; then
    BENCH=("$TARGET/release/norr" bench)
    BENCH_DESC="norr bench"
else
    BENCH=("$TARGET/release/examples/bench")
    BENCH_DESC="norr-client example bench (same code as norr bench)"
fi
log "data node: $DATAD_DESC on $ADDR; bench: $BENCH_DESC"

COMMON=(--addr "$ADDR" --keys "$KEYS" --record-size "$VALUE" --table bench_kv)
log "loading $KEYS rows of $VALUE bytes"
"${BENCH[@]}" "${COMMON[@]}" --load --duration 0 --threads 1 --json >"$OUT/load.json"

# ---- redis ----------------------------------------------------------------------
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    log "installing redis-server and redis-tools"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >&2
fi
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --logfile "$OUT/redis.log" &
PIDS+=($!)
wait_port "$REDIS_PORT" "$!" || { log "redis-server did not start"; exit 1; }
REDIS_VERSION=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
REDIS_CLIENTS=$((THREADS * INFLIGHT))
RB=(redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -r "$KEYS" -d "$VALUE" --csv)
# Fill the key space so GETs hit.
"${RB[@]}" -t set -P "$BATCH" -n "$((KEYS * 4))" -c "$REDIS_CLIENTS" >/dev/null

# ---- runs -------------------------------------------------------------------------
LOAD_BEFORE=$(cut -d" " -f1-3 /proc/loadavg)
for i in $(seq 1 "$REPEAT"); do
    log "round $i/$REPEAT: norr batched reads"
    "${BENCH[@]}" "${COMMON[@]}" --mix read --threads "$THREADS" --inflight "$INFLIGHT" --batch "$BATCH" \
        --duration "$DURATION" --warmup 1s --json >"$OUT/norr_read_$i.json"
    log "round $i/$REPEAT: norr batched updates"
    "${BENCH[@]}" "${COMMON[@]}" --mix update --threads "$THREADS" --inflight "$INFLIGHT" --batch "$BATCH" \
        --duration "$DURATION" --warmup 1s --json >"$OUT/norr_update_$i.json"
    log "round $i/$REPEAT: norr unbatched reads"
    "${BENCH[@]}" "${COMMON[@]}" --mix read --threads 1 --inflight 1 --batch 1 \
        --duration "$DURATION" --warmup 1s --json >"$OUT/norr_single_$i.json"
    log "round $i/$REPEAT: redis GET/SET -P $BATCH"
    "${RB[@]}" -t get -P "$BATCH" -n "$REDIS_N" -c "$REDIS_CLIENTS" --threads "$THREADS" >"$OUT/redis_get_$i.csv"
    "${RB[@]}" -t set -P "$BATCH" -n "$REDIS_N" -c "$REDIS_CLIENTS" --threads "$THREADS" >"$OUT/redis_set_$i.csv"
    "${RB[@]}" -t get -P 1 -n 100000 -c 1 >"$OUT/redis_single_$i.csv"
done

# ---- report -----------------------------------------------------------------------
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
NPROC=$(nproc)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
COMMIT=${COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}
LOADAVG=$(cut -d" " -f1-3 /proc/loadavg)
CMDLINE="bench/redis_vs_norr.sh (KEYS=$KEYS VALUE=$VALUE THREADS=$THREADS INFLIGHT=$INFLIGHT BATCH=$BATCH DURATION=$DURATION REPEAT=$REPEAT)"

SECTION=$(python3 - "$OUT" "$REPEAT" <<EOF
import csv, json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
def norr(kind):
    return [json.load(open(f"{out}/norr_{kind}_{i}.json")) for i in range(1, n + 1)]
def redis(kind):
    rows = []
    for i in range(1, n + 1):
        r = list(csv.reader(open(f"{out}/redis_{kind}_{i}.csv")))
        head, vals = r[0], r[1]
        rows.append(dict(zip(head, vals)))
    return rows
med = statistics.median
nr, nu, ns = norr("read"), norr("update"), norr("single")
rg, rs, r1 = redis("get"), redis("set"), redis("single")
read_ops = med(x["ops_per_s"] for x in nr)
upd_ops = med(x["ops_per_s"] for x in nu)
get_ops = med(float(x["rps"]) for x in rg)
set_ops = med(float(x["rps"]) for x in rs)
single_p50 = med(x["latency"]["p50_us"] for x in ns)
single_p99 = med(x["latency"]["p99_us"] for x in ns)
single_p999 = med(x["latency"]["p999_us"] for x in ns)
r1_p50 = med(float(x.get("p50_latency_ms", "nan")) for x in r1) * 1000
r1_p99 = med(float(x.get("p99_latency_ms", "nan")) for x in r1) * 1000
mem = json.load(open(f"{out}/load.json"))["memory"] or {}
ovh = mem.get("overhead_per_row_bytes")
def lat(xs):
    return "p50 %d / p99 %d / p99.9 %d us" % tuple(med(x["latency"][k] for x in xs) for k in ("p50_us", "p99_us", "p999_us"))
def verdict(ok):
    return "met" if ok else "**missed**"
print("| measurement | NorrDB | Redis $REDIS_VERSION | ratio | target | |")
print("|---|---|---|---|---|---|")
print(f"| PK reads, batch $BATCH, $THREADS conn x $INFLIGHT in flight (ops/s) | {read_ops:,.0f} | GET -P $BATCH: {get_ops:,.0f} | {read_ops/get_ops:.2f}x | >= 1.0x | {verdict(read_ops >= get_ops)} |")
print(f"| PK updates, batch $BATCH (ops/s) | {upd_ops:,.0f} | SET -P $BATCH: {set_ops:,.0f} | {upd_ops/set_ops:.2f}x | >= 0.7x | {verdict(upd_ops >= 0.7 * set_ops)} |")
print(f"| unbatched PK read round trip, 1 x 1 (us) | p50 {single_p50} / p99 {single_p99} / p99.9 {single_p999} | GET -P 1 -c 1: p50 {r1_p50:.0f} / p99 {r1_p99:.0f} | | p99 <= 100 us | {verdict(single_p99 <= 100)} |")
if ovh is not None:
    print(f"| node memory overhead per row (bytes beyond key+value) | {ovh:.1f} | | | <= 32 | {verdict(ovh <= 32)} |")
else:
    print("| node memory overhead per row | n/a (no load figures) | | | <= 32 | |")
print()
print(f"Batch latency: reads {lat(nr)}; updates {lat(nu)}.")
print(f"Medians of {n} runs. Load: {mem.get('rows_loaded')} rows, node memory {mem.get('used_before_bytes')} -> {mem.get('used_after_bytes')} bytes, payload {mem.get('payload_bytes')} bytes.")
print("Raw ops/s: norr reads " + ", ".join("%.0f" % x["ops_per_s"] for x in nr) + "; norr updates " + ", ".join("%.0f" % x["ops_per_s"] for x in nu)
      + "; redis GET " + ", ".join(x["rps"] for x in rg) + "; redis SET " + ", ".join(x["rps"] for x in rs) + ".")
errs = sum(x["permanent_errors"] + x["temporary_errors"] for x in nr + nu + ns)
print(f"Errors during norr runs: {errs}.")
EOF
)

REPORT="## $DATE: redis_vs_norr ($COMMIT)

- command: \`$CMDLINE\`
- machine: \`nproc\` = $NPROC, CPU: $CPU
- data node: $DATAD_DESC (single event-loop thread, default knobs); client: $BENCH_DESC
- redis: redis-server $REDIS_VERSION, persistence off; redis-benchmark -c $REDIS_CLIENTS --threads $THREADS -r $KEYS -d $VALUE
- both servers and both load generators share the same $NPROC cores; load average
  (1/5/15 min) before the runs: $LOAD_BEFORE, after: $LOADAVG (anything above ~3 means
  other work was competing for the cores: treat the figures as noisy)

$SECTION
"
echo "$REPORT"
if [ -z "${NO_RECORD:-}" ]; then
    if [ ! -f "$ROOT/bench/RESULTS.md" ]; then
        printf '# Benchmark results\n\nAppended by the scripts in this directory; newest last. Figures are from\nshared development machines: compare runs on the same machine only.\n\n' >"$ROOT/bench/RESULTS.md"
    fi
    printf '%s\n' "$REPORT" >>"$ROOT/bench/RESULTS.md"
    log "appended to bench/RESULTS.md (raw output in $OUT)"
fi
