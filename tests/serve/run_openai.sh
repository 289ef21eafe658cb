#!/usr/bin/env bash
# Runs test_openai.py with the official openai client from a virtualenv
# under the build directory; skips (77) when the venv cannot be made.
# Usage: run_openai.sh PIECEWISE TINY_MODEL_TOOL WORKDIR VENV
set -u
here=$(cd "$(dirname "$0")" && pwd)
venv=$4
if ! msg=$(bash "$here/../../scripts/serve-test-venv.sh" "$venv" 2>&1); then
  echo "serve_openai skipped: $msg"
  exit 77
fi
exec "$venv/bin/python" "$here/test_openai.py" "$1" "$2" "$3"
