#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.c) with clang in their own build
# directory and runs each one for a bounded time on a scratch copy of its
# committed seed corpus (fuzz/corpus/<target>/). Fails on any finding: a
# crash, a sanitizer report, a leak, a timeout or a broken invariant. The
# reproducer is left in $PW_FUZZ_ARTIFACTS (default build-fuzz/artifacts).
#
#   scripts/fuzz.sh                  every target, PW_FUZZ_SECONDS each (default 60)
#   scripts/fuzz.sh gguf tokenizer   only these targets
#   scripts/fuzz.sh --regen-seeds    rewrite the generated GGUF seeds
#
# Environment: PW_FUZZ_SECONDS, PW_FUZZ_BUILD_DIR (default build-fuzz),
# PW_FUZZ_JOBS (build parallelism, default nproc), PW_FUZZ_ARTIFACTS.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${PW_FUZZ_SECONDS:-60}
build=${PW_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${PW_FUZZ_JOBS:-$(nproc)}
artifacts=${PW_FUZZ_ARTIFACTS:-$build/artifacts}
regen=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --regen-seeds) regen=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) targets+=("$arg") ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.c; do
    t=$(basename "$f" .c)
    targets+=("${t#fuzz_}")
  done
fi

if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found (apt-get install clang)" >&2
  exit 1
fi

CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPW_FUZZ=ON -DPW_BUILD_TESTS=OFF \
  -DPW_CUDA=OFF >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
[ "$regen" = 1 ] && build_targets+=(pw_fuzz_seed_gen)
cmake --build "$build" -j"$jobs" --target "${build_targets[@]}" >/dev/null

if [ "$regen" = 1 ]; then
  "$build/pw_fuzz_seed_gen" fuzz/corpus/gguf
  echo "fuzz.sh: seeds written to fuzz/corpus/gguf"
fi

mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
  seeds="fuzz/corpus/$t"
  if [ ! -d "$seeds" ]; then
    echo "fuzz.sh: no seed corpus $seeds" >&2
    exit 1
  fi
  # New inputs go to a scratch directory so the committed corpus stays small.
  work="$build/corpus/$t"
  rm -rf "$work"
  mkdir -p "$work"
  echo "== fuzz $t (${seconds}s)"
  # A fixed seed (PW_FUZZ_SEED, default 1) makes a run repeatable on the
  # same machine: CI explores the same inputs every time.
  if ! "$build/fuzz_$t" "$work" "$seeds" -seed="${PW_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
       >"$build/fuzz_$t.log" 2>&1; then
    tail -n 60 "$build/fuzz_$t.log"
    echo "fuzz.sh: FINDING in $t; reproducer in $artifacts (run: $build/fuzz_$t <file>)" >&2
    failed+=("$t")
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz_$t.log" | tr '\n' ' '
    echo
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no findings"
