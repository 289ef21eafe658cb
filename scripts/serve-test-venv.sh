#!/usr/bin/env bash
# Makes (once) a virtualenv with the official `openai` Python client from
# PyPI, for the serve tests. Usage: serve-test-venv.sh DIR
# Prints nothing on success; exits 1 if python3-venv or PyPI is missing.
set -euo pipefail
dir=${1:?usage: serve-test-venv.sh DIR}
if [ -f "$dir/.openai-ready" ] && "$dir/bin/python" -c "import openai" 2>/dev/null; then exit 0; fi
rm -rf "$dir"
python3 -m venv "$dir" >/dev/null 2>&1 || { echo "python3 -m venv failed (install python3-venv)"; exit 1; }
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.0" >"$dir.log" 2>&1 \
  || { echo "pip install openai failed (no network?): $(tail -3 "$dir.log")"; exit 1; }
touch "$dir/.openai-ready"
