#!/usr/bin/env bash
# kill -9 under a sustained write load, then restart, ROUNDS times on one data
# directory (issue 21: 0 transactions lost up to the recovered GCI, checked by
# clients that record each commit's GCI; run it 20 times). See
# crates/cli/examples/kill9_durability.rs for what is checked. Appends an
# entry to bench/RESULTS.md.
#   ROUNDS=20 bash bench/kill9_durability.sh
#   PROFILE=release bash bench/kill9_durability.sh   # default: dev, which is optimized
#   BUILD=0 ...                                      # use the binaries already built
#   DATA_NODES=2 ...   # mgmd + 2 data nodes (replicas 2); each round kills both: a system restart
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-20}"
WRITERS="${WRITERS:-4}"
DATA_NODES="${DATA_NODES:-1}"
PROFILE="${PROFILE:-dev}"
target="${CARGO_TARGET_DIR:-target}"
case "$PROFILE" in
  release) bin="$target/release" ;;
  dev) bin="$target/debug" ;;
  *) echo "PROFILE must be dev or release" >&2; exit 2 ;;
esac
if [ "${BUILD:-1}" != 0 ]; then
  cargo build --profile "$PROFILE" -p norr-cli --bin norr --example kill9_durability
fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
out="$("$bin/examples/kill9_durability" --norr "$bin/norr" --rounds "$ROUNDS" --writers "$WRITERS" --data-nodes "$DATA_NODES" 2>&1)" || rc=$?
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "$out"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'): kill -9 under writes, $ROUNDS rounds, $DATA_NODES data node(s) ($(git rev-parse --short HEAD))"
  echo
  echo "- command: \`ROUNDS=$ROUNDS WRITERS=$WRITERS DATA_NODES=$DATA_NODES PROFILE=$PROFILE bench/kill9_durability.sh\` ($PROFILE profile$([ "$PROFILE" = dev ] && echo ', which is optimized')); exit status $rc"
  echo "- machine: \`nproc\` = $(nproc); load average before: $load_before, after: $load_after"
  if [ "$DATA_NODES" = 1 ]; then
    echo "- one data node with a data directory, default knobs (GCP every 2 s, local checkpoints, REDO 4 x 64 MB);"
    echo "  each round writes 2-6 s (random), kills the node with SIGKILL while the writers run, restarts it"
    echo "  from the same directory and checks every transaction ever acknowledged"
  else
    echo "- mgmd and $DATA_NODES data nodes (replicas 2), default knobs; each round writes 2-6 s (random), kills"
    echo "  both data nodes with SIGKILL (the second 0-500 ms after the first) while the writers run, starts"
    echo "  both again (a system restart) and checks every transaction ever acknowledged, reading through each node"
  fi
  echo
  echo '```'
  echo "$out"
  echo '```'
  echo
} >> bench/RESULTS.md
exit "$rc"
