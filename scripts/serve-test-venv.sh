#!/usr/bin/env bash
# Makes (once) a virtualenv for the serve tests with the official `openai`
# Python client and `websocket-client` (the chat page test drives Chromium
# over the DevTools protocol with it), from PyPI. Usage: serve-test-venv.sh DIR
# Prints nothing on success; exits 1 if python3-venv or PyPI is missing.
# Tests running at once share the folder: a lock makes one of them build it.
set -euo pipefail
dir=${1:?usage: serve-test-venv.sh DIR}
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
ready() { [ -f "$dir/.serve-venv-ready" ] && "$dir/bin/python" -c "import openai, websocket" 2>/dev/null; }
if ready; then exit 0; fi
rm -rf "$dir"
python3 -m venv "$dir" >/dev/null 2>&1 || { echo "python3 -m venv failed (install python3-venv)"; exit 1; }
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.0" "websocket-client>=1.0" \
  >"$dir.log" 2>&1 || { echo "pip install failed (no network?): $(tail -3 "$dir.log")"; exit 1; }
touch "$dir/.serve-venv-ready"
