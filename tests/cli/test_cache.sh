#!/usr/bin/env bash
# piecewise cache: argument errors, files it must refuse (missing, a
# directory, a FIFO: refused at once, never waited on), and runs on a plain
# file, an empty one and a link to one. How much of a file the kernel maps
# in 2 MiB pages depends on the kernel and the file system, so the share is
# checked for its form and range, not its value.
# Usage: test_cache.sh PATH/TO/piecewise
set -u
bin=$1
. "$(dirname "$0")/lib.sh"

expect_fail 2 "usage: piecewise cache" cache
expect_fail 2 "unknown option '--fast'" cache m.gguf --fast
expect_fail 2 "one file at a time" cache a.gguf b.gguf
expect_fail 1 "cannot open '/no/such/model.gguf'" cache /no/such/model.gguf
mkdir "$tmp/dir"
expect_fail 1 "is not a regular file (it is a directory)" cache "$tmp/dir"
mkfifo "$tmp/fifo"
if ! timeout 10 "$bin" cache "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"; then
  grep -qF "is not a regular file (it is a FIFO)" "$tmp/err" || { echo "FAIL: FIFO: $(cat "$tmp/err")"; fail=1; }
else
  echo "FAIL: a FIFO was accepted"; fail=1
fi
"$bin" cache --help | grep -q "usage: piecewise cache MODEL.gguf \[--check\]" || { echo "FAIL: --help"; fail=1; }
"$bin" --help | grep -q "^  cache " || { echo "FAIL: cache not listed in piecewise --help"; fail=1; }

# a plain 8 MiB file: reported, then read again (twice: the second finds it
# as the first left it)
head -c $((8 << 20)) /dev/urandom >"$tmp/w.bin"
sum_before=$(sha256sum <"$tmp/w.bin")
share_ok() { # FILE: the first line's share is a percentage in [0, 100]
  python3 - "$1" <<'PY'
import re, sys
line = open(sys.argv[1]).readline()
m = re.search(r": 8\.0 MiB, ([0-9.]+)% of it in 2 MiB pages$", line.rstrip("\n"))
assert m and 0 <= float(m.group(1)) <= 100, line
PY
}
for args in "--check" "" ""; do
  # shellcheck disable=SC2086
  if ! "$bin" cache "$tmp/w.bin" $args >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: cache $args: $(cat "$tmp/err")"; fail=1
  elif ! share_ok "$tmp/out"; then
    echo "FAIL: cache $args printed: $(cat "$tmp/out")"; fail=1
  fi
done
[ "$(sha256sum <"$tmp/w.bin")" = "$sum_before" ] || { echo "FAIL: the file changed"; fail=1; }
# a link to the file is followed, as a model path is
ln -s "$tmp/w.bin" "$tmp/link.bin"
"$bin" cache "$tmp/link.bin" --check >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: link: $(cat "$tmp/err")"; fail=1; }
# an empty file: nothing to map, nothing to read
: >"$tmp/empty.bin"
"$bin" cache "$tmp/empty.bin" >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: empty file: $(cat "$tmp/err")"; fail=1; }
grep -q "0 B, 0.0% of it in 2 MiB pages" "$tmp/out" || { echo "FAIL: empty file printed: $(cat "$tmp/out")"; fail=1; }
finish cli_cache
