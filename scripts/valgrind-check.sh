#!/usr/bin/env bash
# Valgrind memcheck over the CLI running stories260K end to end (every graph
# mode) and over every C test binary. Fails on any invalid access, use of
# uninitialised memory, or leak (definite, indirect or possible).
# Too slow for CI on two cores; run it before a release or after touching
# memory management.
#
#   scripts/valgrind-check.sh            CLI and tests
#   scripts/valgrind-check.sh cli        only the CLI runs
#   scripts/valgrind-check.sh tests      only the test binaries
#
# Environment: PW_VALGRIND_BUILD_DIR (default build-valgrind; a Debug build
# without sanitizers is configured there), PW_VALGRIND_TESTS (a grep -E
# pattern over test names, default all), PW_MODEL (default
# ../shared/models/stories260K.gguf; the CLI part is skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
build=${PW_VALGRIND_BUILD_DIR:-build-valgrind}
model=${PW_MODEL:-../shared/models/stories260K.gguf}
pattern=${PW_VALGRIND_TESTS:-.}
jobs=$(nproc)

if ! command -v valgrind >/dev/null; then
  echo "valgrind-check.sh: valgrind not found (apt-get install valgrind)" >&2
  exit 1
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPW_SANITIZE=OFF -DPW_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null

logdir="$build/valgrind"
mkdir -p "$logdir"
# One OpenBLAS thread: its thread pool is set up once and never torn down,
# which valgrind would report as "possibly lost".
export OPENBLAS_NUM_THREADS=1
vg=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes --error-exitcode=99
    --suppressions=scripts/valgrind.supp -q)
failed=()

run() { # name, command...
  local name=$1
  shift
  if "${vg[@]}" --log-file="$logdir/$name.log" "$@" >"$logdir/$name.out" 2>&1; then
    echo "ok    $name"
  else
    local rc=$?
    if [ "$rc" = 77 ]; then echo "skip  $name"; return; fi
    echo "FAIL  $name (exit $rc): $logdir/$name.log"
    head -n 40 "$logdir/$name.log"
    failed+=("$name")
  fi
}

if [ "$what" = all ] || [ "$what" = cli ]; then
  if [ -f "$model" ]; then
    for mode in none piecewise full auto; do
      run "cli_run_$mode" "$build/piecewise" run "$model" -p "Once upon a time" -n 16 --mode "$mode" -q
      if ! grep -q "Once upon a time" "$logdir/cli_run_$mode.out"; then
        echo "FAIL  cli_run_$mode: no generated text"
        failed+=("cli_run_$mode")
      fi
    done
  else
    echo "skip  CLI runs: $model not found"
  fi
fi

if [ "$what" = all ] || [ "$what" = tests ]; then
  for t in "$build"/tests/test_*; do
    name=$(basename "$t")
    [ -x "$t" ] || continue
    echo "$name" | grep -Eq "$pattern" || continue
    run "$name" "$t"
  done
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "valgrind-check.sh: ${#failed[@]} failed: ${failed[*]}" >&2
  exit 1
fi
echo "valgrind-check.sh: clean"
