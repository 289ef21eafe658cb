#!/usr/bin/env bash
# Runs test_page.py (the chat page in headless Chromium) with
# websocket-client from the serve tests' virtualenv; skips (77) when
# Chromium is not installed or the venv cannot be made.
# Usage: run_page.sh PIECEWISE TINY_MODEL_TOOL WORKDIR VENV
set -u
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
   && ! command -v google-chrome >/dev/null; then
  echo "SKIP: serve_page: chromium is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
venv=$4
if ! msg=$(bash "$here/../../scripts/serve-test-venv.sh" "$venv" 2>&1); then
  echo "SKIP: serve_page: $msg"
  exit 77
fi
exec "$venv/bin/python" "$here/test_page.py" "$1" "$2" "$3"
