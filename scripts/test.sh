#!/usr/bin/env bash
# Set up a virtual environment with every extra the tests exercise, make sure a redis-server binary is
# there (tests use the Redis on 127.0.0.1:6379 when it answers, else start a private one on a free port;
# without either, the Redis tests skip and say why), run the whole suite, then check that the wheel
# installs and runs outside the checkout (scripts/wheel_check.sh; ASAP_SKIP_WHEEL_CHECK=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

install_redis() {
  command -v redis-server >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "test.sh: no redis-server and no apt-get; Redis tests will skip" >&2; return 0; }
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      echo "test.sh: no redis-server, and apt-get needs root; Redis tests will skip" >&2; return 0
    fi
  fi
  echo "test.sh: installing redis-server with apt-get" >&2
  if ! { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq redis-server; } >/dev/null; then
    echo "test.sh: apt-get could not install redis-server; Redis tests will skip" >&2
  fi
}

install_redis
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev,jax,xprof]'
.venv/bin/python -m pytest -q "$@"
if [ -z "${ASAP_SKIP_WHEEL_CHECK:-}" ]; then
  PYTHON=.venv/bin/python bash scripts/wheel_check.sh
fi
