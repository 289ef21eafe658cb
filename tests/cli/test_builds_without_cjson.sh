#!/usr/bin/env bash
# The CLI builds without cJSON: a host without libcjson-dev configures with
# serve off (cmake/pw_serve.cmake), and then no source of the CLI may
# include cJSON outside `#ifdef PW_HAVE_SERVE`. Each source of tools/ and
# bench/ is compiled (syntax only) as that build compiles it, with a
# cjson/cJSON.h first on the include path that stops the compiler.
bin=$1
dir=$(dirname "$bin")
source "$(dirname "$0")/lib.sh"

src=${PW_SOURCE_DIR:?PW_SOURCE_DIR names the source tree}
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null; then
  echo "SKIP: no C compiler ($cc)"; exit 77
fi
mkdir -p "$tmp/poison/cjson"
echo '#error "cJSON included in a build without the server (PW_HAVE_SERVE unset)"' \
  >"$tmp/poison/cjson/cJSON.h"
n=0
for f in "$src"/tools/*.c "$src"/bench/*.c; do
  n=$((n + 1))
  if ! "$cc" -std=c11 -D_GNU_SOURCE -fsyntax-only -I"$tmp/poison" -I"$src/tools" -I"$src/bench" \
       -I"$src/src" -I"$src/src/core" -I"$dir" -I"$src/include" "$f" 2>"$tmp/err"; then
    echo "FAIL: $(basename "$f") does not compile without cJSON: $(grep -m1 error "$tmp/err")"
    fail=1
  fi
done
[ "$n" -gt 20 ] || { echo "FAIL: only $n sources found under $src"; fail=1; }
finish builds_without_cjson
