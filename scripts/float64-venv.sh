#!/usr/bin/env bash
# Makes (once) a virtualenv with numpy and gguf from PyPI for
# scripts/float64-forward.py. Usage: float64-venv.sh DIR
# Prints nothing on success; exits 1 if python3-venv or PyPI is missing.
set -euo pipefail
dir=${1:?usage: float64-venv.sh DIR}
if [ -f "$dir/.f64-ready" ] && "$dir/bin/python" -c "import gguf, numpy" 2>/dev/null; then exit 0; fi
rm -rf "$dir"
python3 -m venv "$dir" >/dev/null 2>&1 || { echo "python3 -m venv failed (install python3-venv)"; exit 1; }
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "numpy>=1.24" "gguf>=0.10" \
  >"$dir.log" 2>&1 || { echo "pip install numpy gguf failed (no network?): $(tail -3 "$dir.log")"; exit 1; }
touch "$dir/.f64-ready"
