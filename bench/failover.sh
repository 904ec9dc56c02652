#!/usr/bin/env bash
# Failover time of a real cluster (issue 20: <= 1 s from `kill -9` of a data
# node to the first commit touching its partitions, median of 10), and the
# same for SIGSTOP (a hang that only heartbeats detect). Each run starts mgmd
# and two data nodes (replicas = 2, default knobs) as processes; see
# crates/cli/examples/failover_bench.rs for what is measured. Appends an
# entry to bench/RESULTS.md.
#   RUNS=10 bash bench/failover.sh
#   PROFILE=release bash bench/failover.sh   # release binaries (default: dev, which is optimized)
#   BUILD=0 ...                              # use the binaries already built
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS="${RUNS:-10}"
PROFILE="${PROFILE:-dev}"
target="${CARGO_TARGET_DIR:-target}"
case "$PROFILE" in
  release) bin="$target/release" ;;
  dev) bin="$target/debug" ;;
  *) echo "PROFILE must be dev or release" >&2; exit 2 ;;
esac
if [ "${BUILD:-1}" != 0 ]; then
  cargo build --profile "$PROFILE" -p norr-cli --bin norr --example failover_bench
fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
out="$("$bin/examples/failover_bench" --norr "$bin/norr" --runs "$RUNS" --fault both)"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "$out"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'): failover ($(git rev-parse --short HEAD))"
  echo
  echo "- command: \`RUNS=$RUNS PROFILE=$PROFILE bench/failover.sh\` ($PROFILE profile$([ "$PROFILE" = dev ] && echo ', which is optimized'))"
  echo "- machine: \`nproc\` = $(nproc); load average before: $load_before, after: $load_after"
  echo "- cluster: mgmd + 2 data node processes, replicas = 2, default knobs (heartbeat 200 ms x 4 missed)"
  echo "- measured: from the signal to the end of the first successful commit that started after it"
  echo
  echo '```'
  echo "$out"
  echo '```'
  echo
} >> bench/RESULTS.md
