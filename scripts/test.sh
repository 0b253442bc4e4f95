#!/usr/bin/env bash
# Set up a virtual environment with every extra the tests exercise, make sure a Redis server is
# reachable (the one on 127.0.0.1:6379, or a private one on a free port), then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev,jax,xprof]'
exec .venv/bin/python -m pytest -q "$@"
