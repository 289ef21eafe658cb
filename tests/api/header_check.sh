#!/usr/bin/env bash
# Every installed header compiles on its own, as C11 and as C++17, with
# warnings as errors: a one-line translation unit per header (included twice,
# to prove the guards), checked by the C and the C++ compiler.
# Usage: header_check.sh INCLUDE_DIR CC CXX
set -euo pipefail
inc=$1 cc=$2 cxx=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0 n=0
while IFS= read -r h; do
  rel=${h#"$inc"/}
  printf '#include <%s>\n#include <%s>\nint pw_header_check_unit;\n' "$rel" "$rel" > "$t/unit.c"
  cp "$t/unit.c" "$t/unit.cpp"
  if ! "$cc" -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$t/unit.c" 2> "$t/err"; then
    echo "FAIL: <$rel> alone does not compile as C11:"; cat "$t/err"; fail=1
  fi
  if ! "$cxx" -std=c++17 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$t/unit.cpp" 2> "$t/err"; then
    echo "FAIL: <$rel> alone does not compile as C++17:"; cat "$t/err"; fail=1
  fi
  n=$((n + 1))
done < <(find "$inc" -name '*.h' | sort)
[ "$n" -gt 0 ] || { echo "FAIL: no headers under $inc"; exit 1; }
[ "$fail" = 0 ] || exit 1
echo "$n public headers compile alone as C11 and C++17"
