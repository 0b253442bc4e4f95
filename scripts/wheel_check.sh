#!/usr/bin/env bash
# Install ASAP as the Docker image does (a wheel, not an editable checkout) and use it from outside the
# checkout: build the wheel, install it with its dependencies into a fresh virtual environment in a
# temporary folder, then, from that folder, run `asap runs`, `why`, `propose`, `ask`, `index` on the
# bundled sample runs and start `asap serve --all` to check /healthz and /readyz. A file the wheel fails
# to ship (playbooks, prompts, sample runs) makes one of these fail.
#   scripts/wheel_check.sh              # uses python3 (or $PYTHON) to build and to make the venv
# Dependencies come from the package index pip is configured with (its cache makes repeats fast);
# ASAP_WHEELHOUSE=DIR adds a folder of wheels (pip --find-links) for machines without an index.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/asap-wheel-check.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '== wheel check: %s\n' "$*"; }

step "build the wheel"
"$PY" -m pip wheel -q --no-deps -w "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/asap-*.whl)

step "install $(basename "$WHEEL") into a fresh venv outside the checkout"
"$PY" -m venv "$WORK/venv"
FIND_LINKS=()
if [ -n "${ASAP_WHEELHOUSE:-}" ]; then FIND_LINKS=(--find-links "$ASAP_WHEELHOUSE"); fi
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "${FIND_LINKS[@]}" "$WHEEL"

# From here on: outside the checkout, nothing of it on the path, no runs/playbooks folder configured.
cd "$WORK"
unset PYTHONPATH ASAP_RUNS_DIR ASAP_PLAYBOOKS_DIR OPENAI_API_KEY ASAP_MODEL_BASE_URL ASAP_MODEL REDIS_URL \
  SLACK_BOT_TOKEN SLACK_APP_TOKEN SLACK_SIGNING_SECRET GITHUB_TOKEN GITHUB_APP_ID GITHUB_WEBHOOK_SECRET || true
export ASAP_STATE_DIR="$WORK/state" PATH="$WORK/venv/bin:$PATH"
ASAP="$WORK/venv/bin/asap"

where=$("$WORK/venv/bin/python" -c 'import bot; print(bot.__file__)')
case "$where" in "$WORK"/venv/*) ;; *) echo "bot imported from $where, not from the installed wheel" >&2; exit 1 ;; esac

run() {  # run an asap command; fail with its output when it fails or prints nothing
  step "asap $*"
  if ! "$ASAP" "$@" >"$WORK/out.txt" 2>&1 || [ ! -s "$WORK/out.txt" ]; then
    cat "$WORK/out.txt"; echo "wheel check: 'asap $*' failed" >&2; exit 1
  fi
}
expect() {  # the last command's output holds this text
  grep -q -- "$1" "$WORK/out.txt" || { cat "$WORK/out.txt"; echo "wheel check: expected '$1' in the output" >&2; exit 1; }
}

run runs;                     expect "311"; expect "jax-cpu-8dev"
run why 311;                  expect "communication-bound"
run propose 311;              expect "critic: product ok"; expect "cites (playbook)"
run ask "why is job 311 slow"; expect "communication-bound"
run index;                    expect "documents"
run propose 311 --json;       expect '"citation": "playbooks/'

step "asap serve --all: /healthz and /readyz"
PORT=$("$WORK/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$ASAP" serve --all --host 127.0.0.1 --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
"$WORK/venv/bin/python" - "$PORT" <<'EOF' || { cat "$WORK/serve.log"; exit 1; }
import json, sys, time, urllib.error, urllib.request
port = sys.argv[1]
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            assert r.status == 200, r.status
        break
    except (urllib.error.URLError, ConnectionError):
        if time.monotonic() > deadline:
            sys.exit("wheel check: /healthz did not answer within 60 s")
        time.sleep(0.3)
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
        status, body = r.status, r.read().decode()
except urllib.error.HTTPError as err:
    status, body = err.code, err.read().decode()
print(f"/readyz {status}: {body[:400]}")
if status != 200:
    sys.exit("wheel check: /readyz is not ready")
EOF
step "ok: the installed wheel runs, answers and serves from outside the checkout"
