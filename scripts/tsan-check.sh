#!/usr/bin/env bash
# Builds with ThreadSanitizer (-DPW_TSAN=ON, its own build directory) and runs
# the concurrency tests (tests/robust/test_concurrency.c: threads with their
# own model and engine, and threads sharing one model) and the kernels'
# thread pool test (tests/kernels/test_parallel.c: jobs split across the
# pool, two application threads submitting at once) and the capture driver
# on two threads (tests/runtime/test_capture_threads.c: two modules, each
# counting exactly its own captures). Fails on any data
# race report. Environment: PW_TSAN_BUILD_DIR (default build-tsan).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PW_TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPW_TSAN=ON -DPW_CUDA=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target test_robust_concurrency test_kernels_parallel test_runtime_capture_threads >/dev/null
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
ctest --test-dir "$build" -R '^(robust_concurrency|kernels_parallel|runtime_capture_threads)$' --output-on-failure
