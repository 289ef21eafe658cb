#!/usr/bin/env bash
# --graph-cache DIR and --no-distinct-capture on run, chat, serve and bench:
# a first run writes one cache file, a second starts from it, and the text is
# the same with and without either option in every mode; bad values are
# refused with a message. Usage: test_graph_cache.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

expect_fail 2 "needs a value" run "$model" -p hi --graph-cache
expect_fail 2 "--graph-cache: the folder name is empty" run "$model" -p hi --graph-cache ""
expect_fail 2 "--graph-cache: the folder name is empty" chat "$model" --graph-cache ""
for cmd in run chat serve; do
  "$bin" "$cmd" --help | grep -q -- "--graph-cache DIR" || { echo "FAIL: $cmd --help lacks --graph-cache"; fail=1; }
  "$bin" "$cmd" --help | grep -q -- "--no-distinct-capture" || { echo "FAIL: $cmd --help lacks --no-distinct-capture"; fail=1; }
done
"$bin" bench model --help | grep -q -- "--graph-cache DIR" || { echo "FAIL: bench model --help"; fail=1; }

if [ -f "$model" ]; then
  for mode in none piecewise full auto; do
    ref=$("$bin" run "$model" -p "Once upon a time" -n 24 --mode "$mode" -q 2>/dev/null)
    plain=$("$bin" run "$model" -p "Once upon a time" -n 24 --mode "$mode" -q --no-distinct-capture 2>/dev/null)
    [ "$plain" = "$ref" ] || { echo "FAIL: --no-distinct-capture changed the text in mode $mode"; fail=1; }
    for round in cold warm; do
      out=$("$bin" run "$model" -p "Once upon a time" -n 24 --mode "$mode" -q \
            --graph-cache "$tmp/cache" 2>/dev/null)
      [ "$out" = "$ref" ] || { echo "FAIL: --graph-cache ($round, mode $mode) changed the text"; fail=1; }
    done
  done
  # one file per configuration with graphs (mode none captures nothing)
  n=$(ls "$tmp/cache" | grep -c '^graphs-.*\.pwgc$')
  [ "$n" -eq 3 ] || { echo "FAIL: $n cache files, want 3: $(ls "$tmp/cache")"; fail=1; }
  # a warm start says where its graphs came from
  PW_LOG_LEVEL=info "$bin" run "$model" -p hi -n 2 -q --graph-cache "$tmp/cache" 2>"$tmp/err" >/dev/null
  grep -q "graph cache: .* graphs' programs from" "$tmp/err" || { echo "FAIL: no warm-start line: $(cat "$tmp/err")"; fail=1; }
  # a damaged file: a warning, the run still right
  for f in "$tmp"/cache/graphs-*.pwgc; do head -c 100 "$f" > "$f.cut" && mv "$f.cut" "$f"; done
  out=$("$bin" run "$model" -p "Once upon a time" -n 24 -q --graph-cache "$tmp/cache" 2>"$tmp/err")
  [ "$out" = "$ref" ] || { echo "FAIL: a damaged cache changed the text"; fail=1; }
  grep -q "ignored (checksum mismatch" "$tmp/err" || { echo "FAIL: no warning for a damaged cache: $(cat "$tmp/err")"; fail=1; }
else
  skip_part "stories260K.gguf not found: the runs"
fi
finish cli_graph_cache
