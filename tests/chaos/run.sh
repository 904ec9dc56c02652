#!/usr/bin/env bash
# The real-process chaos test (crates/cli/examples/chaos.rs): mgmd, 4 data
# nodes (2 node groups x 2 replicas) and a SQL node as processes on
# loopback; money transfers through SQL and the native client while data
# nodes are killed (kill -9) and frozen (SIGSTOP past the heartbeat
# time-out); then the bank's invariants. Not part of `cargo test`; the long
# tier of .ci/run (NORR_CI_LONG=1) runs it.
#
#   tests/chaos/run.sh [chaos args...]      e.g. --duration 600 --seed 7
#
# NORR_CHAOS_SECS sets --duration (default 180 s) unless the args name it.
# Builds `norr` and the example (debug, as the rest of CI) unless
# NORR_SKIP_BUILD=1; $CARGO_TARGET_DIR is honoured.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
if [ "${NORR_SKIP_BUILD:-0}" != 1 ]; then
    cargo build -p norr-cli --bin norr --example chaos
fi
args=("$@")
case " $* " in
    *" --duration "*) ;;
    *) args+=(--duration "${NORR_CHAOS_SECS:-180}") ;;
esac
exec "$target/debug/examples/chaos" --norr "$target/debug/norr" "${args[@]}"
