#!/usr/bin/env bash
# The main job: install what is missing, build, and show piecewise at work.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "== capture and replay on the CPU"
build/piecewise demo
echo
echo "== what a launch costs"
build/piecewise bench launch
