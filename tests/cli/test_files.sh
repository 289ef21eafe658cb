#!/usr/bin/env bash
# Files that are not what they claim to be: a FIFO as the model of every
# command that loads one, a FIFO, a device, a folder or an oversized file as
# a graph file, and hostile entries in the graph cache folder (a FIFO, links
# at the cache's name and at its temporary name, a sparse 1 GiB file). Each
# is refused at once with a message (timeout turns a hang into a failure),
# nothing is read without bound, and nothing a link points to is touched.
# Usage: test_files.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
graph="${PW_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/graphs/vllm_L2.txt"
. "$(dirname "$0")/lib.sh"

# expect_refused SUBSTRING ARGS...: exit 1 within 20 s, SUBSTRING on stderr.
expect_refused() {
  local msg=$1; shift
  timeout -k 5 20 "$bin" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 1 ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: piecewise $* -> exit $rc (want 1; 124 is a hang), stderr: $(head -c 400 "$tmp/err")"; fail=1
  fi
}

# A FIFO as the model path: refused before anything waits on it.
mkfifo "$tmp/model.gguf"
fifo_msg="gguf: '$tmp/model.gguf' is not a regular file (it is a FIFO)"
expect_refused "$fifo_msg" run "$tmp/model.gguf" -p hi
expect_refused "$fifo_msg" inspect "$tmp/model.gguf"
expect_refused "$fifo_msg" compile --model "$tmp/model.gguf" --emit plan
expect_refused "$fifo_msg" serve "$tmp/model.gguf" --port 0
expect_refused "$fifo_msg" chat "$tmp/model.gguf"
expect_refused "$fifo_msg" bench model "$tmp/model.gguf"
expect_refused "gguf: '/dev/zero' is not a regular file (it is a character device)" inspect /dev/zero

# Graph files: only a regular file of at most 64 MiB is read.
expect_refused "graph file: '$tmp/model.gguf' is not a regular file (it is a FIFO)" compile "$tmp/model.gguf"
expect_refused "graph file: '/dev/zero' is not a regular file (it is a character device)" compile /dev/zero
expect_refused "graph file: '$tmp' is not a regular file (it is a directory)" compile "$tmp"
truncate -s $(( (64 << 20) + 1 )) "$tmp/big.txt" # sparse: no disk used
expect_refused "is larger than the 67108864-byte limit for graph file" compile "$tmp/big.txt"
# a link the user names is followed
ln -s "$graph" "$tmp/link.txt"
"$bin" compile "$tmp/link.txt" --emit graph >"$tmp/out" 2>"$tmp/err" && [ -s "$tmp/out" ] ||
  { echo "FAIL: compile through a link: $(cat "$tmp/err")"; fail=1; }

if [ ! -f "$model" ]; then
  echo "stories260K.gguf not found: graph cache cases skipped"
  exit $fail
fi

# The graph cache folder. The first run names the cache file.
cache="$tmp/cache"
run_cached() { # run_cached [PW_LOG_LEVEL=...]: the run every case repeats
  timeout -k 5 60 "$bin" run "$model" -p "Once upon a time" -n 16 -q --graph-cache "$cache" \
    >"$tmp/out" 2>"$tmp/err"
}
ref=$("$bin" run "$model" -p "Once upon a time" -n 16 -q 2>/dev/null)
run_cached
f=$(ls "$cache"/graphs-*.pwgc 2>/dev/null | head -1)
[ -n "$f" ] || { echo "FAIL: no cache file written: $(cat "$tmp/err")"; exit 1; }
cp "$f" "$tmp/good.pwgc"
printf 'victim\n' >"$tmp/victim"

# check_case NAME WARNING: the run exited 0 with the same text and warned.
check_case() {
  local name=$1 warning=$2 rc=$3
  [ "$rc" -eq 0 ] || { echo "FAIL: $name: exit $rc (124 is a hang): $(cat "$tmp/err")"; fail=1; return; }
  [ "$(cat "$tmp/out")" = "$ref" ] || { echo "FAIL: $name: the text changed"; fail=1; }
  grep -qF -- "$warning" "$tmp/err" || { echo "FAIL: $name: no warning '$warning': $(cat "$tmp/err")"; fail=1; }
  [ "$(cat "$tmp/victim")" = victim ] || { echo "FAIL: $name: the link's target was written"; fail=1; }
}

# a FIFO at the cache's name: not waited on, not replaced
rm -f "$f"; mkfifo "$f"
run_cached; check_case "FIFO in the cache" "is not a regular file (it is a FIFO)" $?
grep -qF "is not a regular file (a link?); left alone" "$tmp/err" || { echo "FAIL: FIFO: the writer did not leave it: $(cat "$tmp/err")"; fail=1; }
[ -p "$f" ] || { echo "FAIL: the FIFO in the cache was replaced"; fail=1; }

# a link at the cache's name: neither read through nor written through
rm -f "$f"; ln -s "$tmp/victim" "$f"
run_cached; check_case "link at the cache's name" "is a symbolic link, which is not followed here" $?
[ -L "$f" ] || { echo "FAIL: the link at the cache's name was replaced"; fail=1; }

# a 1 GiB sparse file of zeros: refused on its first bytes, not read whole
rm -f "$f"; truncate -s 1G "$f"
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f "%M" -o "$tmp/peak" timeout -k 5 60 "$bin" run "$model" -p "Once upon a time" \
    -n 16 -q --graph-cache "$cache" >"$tmp/out" 2>"$tmp/err"; rc=$?
  peak=$(tail -1 "$tmp/peak")
  [ "${peak:-0}" -lt 262144 ] || { echo "FAIL: a 1 GiB cache file took $peak KB of memory"; fail=1; }
else
  run_cached; rc=$?
fi
check_case "sparse 1 GiB cache file" "ignored (not a graph cache file)" $rc
# a regular file at the name is the writer's to replace: the next run starts from it
cmp -s "$f" "$tmp/good.pwgc" || { echo "FAIL: the bad cache file was not rewritten"; fail=1; }

# a file past the 1 GiB limit with a good header: refused unread
rm -f "$f"; head -c 24 "$tmp/good.pwgc" >"$f"; truncate -s $(( (1 << 30) + 1 )) "$f"
run_cached; check_case "cache file over the limit" "is larger than the 1073741824-byte limit for graph cache" $?

# a link or a file planted at the writer's temporary name (the run's pid,
# which exec keeps): the writer skips writing and touches neither
for planted in link file; do
  rm -f "$f"
  # shellcheck disable=SC2016 # $$ is the inner shell's pid, which exec hands to piecewise
  timeout -k 5 60 bash -c '
    if [ "$1" = link ]; then ln -s "$2" "$3.$$.tmp"; else printf "planted\n" >"$3.$$.tmp"; fi
    exec "$4" run "$5" -p "Once upon a time" -n 16 -q --graph-cache "$6"' \
    _ $planted "$tmp/victim" "$f" "$bin" "$model" "$cache" >"$tmp/out" 2>"$tmp/err"
  check_case "$planted at the temporary name" "something is already at" $?
  [ ! -e "$f" ] || { echo "FAIL: $planted at the temporary name: the cache was written anyway"; fail=1; }
  left=$(ls "$cache" | grep -c '\.tmp$')
  [ "$left" -eq 1 ] || { echo "FAIL: $planted at the temporary name: $left temporary names left"; fail=1; }
  if [ $planted = file ]; then
    [ "$(cat "$cache"/*.tmp)" = planted ] || { echo "FAIL: the planted file was written"; fail=1; }
  fi
  rm -f "$cache"/*.tmp
done
exit $fail
