#!/usr/bin/env bash
# Installs the built project into a scratch prefix and builds a tiny program
# against it twice: through pkg-config and through the CMake package.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null

cat > "$work/main.c" <<'C'
#include <piecewise.h>
#include <stdio.h>
static void twice(const void *p) { float *x = *(float *const *)p; *x *= 2; }
int main(void) {
    static const pw_kernel k = {"twice", twice, NULL};
    pw_stream *s; pw_pool *pool; pw_graph *g; float v = 1, *pv = &v;
    if (pw_stream_new(PW_DEVICE_CPU, &s) || pw_pool_new(PW_DEVICE_CPU, "g", &pool)) return 1;
    if (pw_stream_begin_capture(s, pool) || pw_launch(s, &k, &pv, sizeof pv) ||
        pw_stream_end_capture(s, &g)) { fprintf(stderr, "%s\n", pw_last_error()); return 1; }
    pw_graph_replay(g, s); pw_graph_replay(g, s);
    printf("piecewise %s: %g\n", pw_version(), v);
    pw_graph_free(g); pw_pool_free(pool); pw_stream_free(s);
    return v == 4 ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig"
cc -std=c11 "$work/main.c" $(pkg-config --cflags --libs --static piecewise) -o "$work/via_pc"
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64" "$work/via_pc"

mkdir -p "$work/cm"
cat > "$work/cm/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(piecewise REQUIRED)
add_executable(consumer ../main.c)
target_link_libraries(consumer PRIVATE piecewise::piecewise)
C
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64" "$work/cm/build/consumer"
echo "consumer check passed (pkg-config and CMake package)"
