#!/usr/bin/env bash
# Build NorrDB in release mode and start a local cluster on loopback
# (`norr up`). Needs only the Rust toolchain (cargo, with a C linker as
# rustup's installation requires). Extra arguments go to `norr up`, e.g.
#   ./scripts/norr-up.sh --port-base 4400 --data-memory 2G
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "norr-up: cargo not found. Install the Rust toolchain first: https://rustup.rs" >&2
        exit 1
    fi
fi

echo "norr-up: building (release; the first build takes a few minutes)..." >&2
cargo build --release -p norr-cli

target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/release/norr" up "$@"
