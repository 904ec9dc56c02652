#!/usr/bin/env bash
# CPU an idle cluster uses: `norr up --data-nodes N --no-sql --in-memory`, left
# alone for WARMUP seconds, then each process's CPU (utime + stime from
# /proc/PID/stat) over MEASURE seconds, in % of one core. An idle cluster
# should use next to nothing; a node that polls with a zero time-out shows
# as ~100% (the dial bug fixed in 62ab16e).
#
#   bench/idle_cpu.sh [NORR_BIN]
#
# Env: DATA_NODES=2 WARMUP=20 MEASURE=10; ports 21186 (mgmd) and 22202.. (data
# nodes) on 127.0.0.1 must be free. NORR_BIN defaults to the debug build
# (target/debug/norr, or $CARGO_TARGET_DIR/debug/norr).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-${NORR_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/norr}}"
[ -x "$BIN" ] || { echo "no norr binary at $BIN (build it, or pass its path)" >&2; exit 1; }
DATA_NODES="${DATA_NODES:-2}"
WARMUP="${WARMUP:-20}"
MEASURE="${MEASURE:-10}"
DIR="$(mktemp -d /tmp/norr-idle-cpu.XXXXXX)"
"$BIN" up --data-nodes "$DATA_NODES" --no-sql --in-memory --data-dir "$DIR" \
  --mgm-port 21186 --port-base 22202 >"$DIR/up.log" 2>&1 &
UP=$!
trap 'kill "$UP" 2>/dev/null || true; wait "$UP" 2>/dev/null || true; rm -rf "$DIR"' EXIT
sleep "$WARMUP"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
mapfile -t PROCS < <(pgrep -P "$UP"; echo "$UP")
declare -A START
for p in "${PROCS[@]}"; do START[$p]="$(cpu "$p")"; done
sleep "$MEASURE"
TICK="$(getconf CLK_TCK)"
for p in "${PROCS[@]}"; do
  used=$(( $(cpu "$p") - START[$p] ))
  printf '%-70s %3d%% of a core\n' "$(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-70)" $(( used * 100 / TICK / MEASURE ))
done
