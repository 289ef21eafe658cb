#!/usr/bin/env bash
# Installs the built project into a scratch prefix and builds two programs
# against it, each through pkg-config and through the CMake package, shared
# and static:
#   capture  the capture layer only (libpiecewise): must not need
#            libpiecewise-llm or BLAS;
#   llm      the model layer (libpiecewise-llm, which brings libpiecewise;
#            header piecewise_llm.h): a model error read back through
#            pw_last_error, which lives in libpiecewise, so both libraries
#            share one error slot.
# and checks that piecewise.h alone does not declare the LLM API: a program
# that includes only it and calls the engine fails to compile.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$prefix/lib64

cat > "$work/capture.c" <<'C'
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
cat > "$work/llm.c" <<'C'
#include <piecewise_llm.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    pw_model *m = NULL;
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    pw_set_num_threads(2);
    pw_status st = pw_model_load("/nonexistent/model.gguf", &m);
    if (st != PW_ERR_IO || m != NULL || !strstr(pw_last_error(), "/nonexistent/model.gguf")) {
        fprintf(stderr, "unexpected: %s: %s\n", pw_status_name(st), pw_last_error());
        return 1;
    }
    printf("piecewise-llm %s: %s (%d threads)\n", pw_version(), pw_status_name(st),
           pw_get_num_threads());
    return pw_get_num_threads() == 2 ? 0 : 1;
}
C

export PKG_CONFIG_PATH="$libdir/pkgconfig"

# The LLM API through the capture library's header alone: a compile error.
sed 's/#include <piecewise_llm.h>/#include <piecewise.h>/' "$work/llm.c" > "$work/llm_wrong.c"
if cc -std=c11 -Werror=implicit-function-declaration -c "$work/llm_wrong.c" \
     $(pkg-config --cflags piecewise) -o "$work/llm_wrong.o" 2>/dev/null; then
  echo "FAIL: piecewise.h declares the LLM API (pw_model, pw_engine)" >&2
  exit 1
fi
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The capture-only program must not load the LLM library or BLAS.
check_capture_only() {
  if readelf -d "$1" | grep -E 'NEEDED.*(piecewise-llm|blas)'; then
    echo "FAIL: $1 needs the LLM library or BLAS" >&2
    exit 1
  fi
}

for prog in capture llm; do
  pc=piecewise; [ "$prog" = llm ] && pc=piecewise-llm
  # pkg-config, shared libraries
  cc -std=c11 "$work/$prog.c" $(pkg-config --cflags --libs "$pc") -o "$work/${prog}_pc"
  "$work/${prog}_pc"
  # pkg-config, static libraries (the archives named instead of -l)
  libs=$(pkg-config --static --libs "$pc" \
         | sed -e "s#-lpiecewise-llm\\b#$libdir/libpiecewise-llm.a#" -e "s#-lpiecewise\\b#$libdir/libpiecewise.a#")
  cc -std=c11 "$work/$prog.c" $(pkg-config --cflags "$pc") $libs -o "$work/${prog}_pc_static"
  "$work/${prog}_pc_static"
done
check_capture_only "$work/capture_pc"
check_capture_only "$work/capture_pc_static"

mkdir -p "$work/cm"
cat > "$work/cm/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(piecewise REQUIRED)
add_executable(capture ../capture.c)
target_link_libraries(capture PRIVATE piecewise::piecewise)
add_executable(capture_static ../capture.c)
target_link_libraries(capture_static PRIVATE piecewise::piecewise_static)
add_executable(llm ../llm.c)
target_link_libraries(llm PRIVATE piecewise::llm)
add_executable(llm_static ../llm.c)
target_link_libraries(llm_static PRIVATE piecewise::llm_static)
C
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm/build" >/dev/null
for exe in capture capture_static llm llm_static; do
  "$work/cm/build/$exe"
done
check_capture_only "$work/cm/build/capture"
check_capture_only "$work/cm/build/capture_static"
echo "consumer check passed (piecewise and piecewise-llm; pkg-config and CMake; shared and static)"
