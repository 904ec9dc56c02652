#!/usr/bin/env bash
# Runs the driver tests (PyMySQL, mysql-connector-python, SQLAlchemy Core, the
# mysql command-line client)
# against a real `norr datad` + `norr sqld` on free loopback ports.
#
#   tests/python/run.sh [pytest args...]
#
# The norr binary: $NORR_BIN, else target/debug/norr (built here with
# `cargo build -p norr-cli` unless NORR_SKIP_BUILD=1). The virtualenv lives in
# tests/python/.venv (or $NORR_PY_VENV) and is reused between runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${NORR_PY_VENV:-$here/.venv}"

if [ -z "${NORR_BIN:-}" ]; then
  target="${CARGO_TARGET_DIR:-$root/target}"
  if [ "${NORR_SKIP_BUILD:-0}" != 1 ]; then
    (cd "$root" && cargo build -p norr-cli)
  fi
  export NORR_BIN="$target/debug/norr"
fi
[ -x "$NORR_BIN" ] || { echo "norr binary not found at $NORR_BIN" >&2; exit 2; }

# The mysql command-line client (test_mysql_cli.py drives it) and python3-venv.
if ! command -v mysql >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq default-mysql-client python3-venv >/dev/null
fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp="$venv/.requirements.sha"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi
cd "$here"
exec "$venv/bin/python" -m pytest -q "$@"
