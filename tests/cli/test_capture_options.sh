#!/usr/bin/env bash
# --memory-budget, --capture and --graph-budget on run, chat, serve and bench:
# clear errors for bad values, the golden text with a budget-sized KV cache and
# with lazy capture, lazy capture's counters in run's statistics, and the
# planning figures in bench model --json. Usage: test_capture_options.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

for cmd in run chat serve; do
  "$bin" $cmd --help | grep -q -- "--memory-budget BYTES" || { echo "FAIL: $cmd --help lacks --memory-budget"; fail=1; }
  "$bin" $cmd --help | grep -q -- "--capture eager|lazy" || { echo "FAIL: $cmd --help lacks --capture"; fail=1; }
done
"$bin" bench model --help | grep -q -- "--graph-budget BYTES" || { echo "FAIL: bench model --help lacks --graph-budget"; fail=1; }

expect_fail 2 "--memory-budget: '12x' is not a byte count (expected e.g. 1048576, 512M, 2GiB" run "$model" -p hi --memory-budget 12x
expect_fail 2 "--memory-budget: 'M' is not a byte count" run "$model" -p hi --memory-budget M
expect_fail 2 "--graph-budget: '0.5' is not a whole number of bytes >= 1" run "$model" -p hi --graph-budget 0.5
expect_fail 2 "--memory-budget needs a value" run "$model" -p hi --memory-budget
expect_fail 2 "--capture: unknown capture policy 'sometimes' (expected eager or lazy)" run "$model" -p hi --capture sometimes
expect_fail 2 "--memory-budget: '-5' is not a byte count" chat "$model" --memory-budget -5
expect_fail 2 "--capture: unknown capture policy 'x'" bench model "$model" --capture x

if [ -f "$model" ]; then
  expect_fail 1 "is too small: weights" run "$model" -p hi --memory-budget 1K
  expect_fail 1 "a graph budget needs lazy capture" run "$model" -p hi --graph-budget 1M
  golden="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."
  for args in "--memory-budget 64MiB" "--capture lazy" "--capture lazy --graph-budget 1" \
              "--capture lazy --mode piecewise --memory-budget 0.5G"; do
    out=$("$bin" run "$model" -p "Once upon a time" -n 40 $args 2>"$tmp/err")
    case "$out" in
      *"$golden"*) ;;
      *) echo "FAIL: run $args printed: $out / $(cat "$tmp/err")"; fail=1 ;;
    esac
  done
  "$bin" run "$model" -p "Once upon a time" -n 8 --capture lazy >/dev/null 2>"$tmp/err"
  grep -q "lazy capture: [1-9][0-9]* sizes captured on first use" "$tmp/err" \
    || { echo "FAIL: run --capture lazy prints no lazy counters: $(cat "$tmp/err")"; fail=1; }
  "$bin" bench model "$model" --batch 1 --tokens 4 --repeats 1 --json >"$tmp/out" 2>"$tmp/err" \
    || { echo "FAIL: bench model --json: $(cat "$tmp/err")"; fail=1; }
  python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))["capture"]
p, r = c["predicted_pool_bytes"], c["pool_reserved_bytes"]
if not (p > 0 and p == r):
    print(f"FAIL: bench model capture: predicted {p} != reserved {r}")
    sys.exit(1)
PY
else
  skip_part "stories260K.gguf not found: the model checks"
fi
finish cli_capture_options
