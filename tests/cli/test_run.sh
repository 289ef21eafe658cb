#!/usr/bin/env bash
# piecewise run: golden text in every mode, and clear errors with non-zero
# exit codes for bad input. Usage: test_run.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

expect_fail 2 "no model given" run
expect_fail 2 "no prompt given" run "$model"
expect_fail 2 "unknown mode 'fastest'" run "$model" -p hi --mode fastest
expect_fail 2 "'abc' is not an integer" run "$model" -p hi -n abc
expect_fail 2 "outside [0, 100]" run "$model" -p hi --temp -1
expect_fail 2 "--tp-timeout applies only with --tp N" run "$model" -p hi --tp-timeout 5
expect_fail 2 "needs a value" run "$model" -p
expect_fail 2 "unknown option '--bogus'" run "$model" -p hi --bogus
expect_fail 2 "bad list" run "$model" -p hi --capture-sizes 1,,4
expect_fail 1 "/no/such/model.gguf" run /no/such/model.gguf -p hi
printf 'GGUF\x03\x00\x00\x00' > "$tmp/trunc.gguf"
expect_fail 1 "trunc.gguf" run "$tmp/trunc.gguf" -p hi
expect_fail 2 "unknown command 'fly'" fly
expect_fail 1 "/no/such.gguf" compile --model /no/such.gguf --emit plan
expect_fail 2 "not both" compile g.txt --model m.gguf
"$bin" run --help | grep -q "usage: piecewise run" || { echo "FAIL: run --help"; fail=1; }

if [ -f "$model" ]; then
  golden="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."
  for mode in none piecewise full auto full_decode_only; do
    out=$("$bin" run "$model" -p "Once upon a time" -n 40 --mode "$mode" -q 2>"$tmp/err")
    case "$out" in
      "$golden"*) ;;
      *) echo "FAIL: mode $mode printed: $out / $(cat "$tmp/err")"; fail=1 ;;
    esac
  done
  # compile --model shows every stage of the model's compilation
  for form in graph split plan c dot; do
    "$bin" compile --model "$model" --emit "$form" >"$tmp/out" 2>"$tmp/err" \
      || { echo "FAIL: compile --model --emit $form: $(cat "$tmp/err")"; fail=1; }
  done
  "$bin" compile --model "$model" --emit split | grep -q "call_module submod_1" \
    || { echo "FAIL: compile --model split has no submodules"; fail=1; }
  "$bin" compile --model "$model" --emit plan | grep -q "11 submodules (5 inlined)" \
    || { echo "FAIL: compile --model plan: 5 layers should give 11 submodules, 5 inlined"; fail=1; }
  # a prompt longer than the context
  long=$(printf 'the cat %.0s' $(seq 1 1200))
  expect_fail 1 "exceeds the context" run "$model" -p "$long" -n 8
  # several prompts: each answer printed with its index, summary on stderr
  "$bin" run "$model" -p "Once upon a time" -p "The dog" -p "Lily" -n 12 >"$tmp/out" 2>"$tmp/err" \
    || { echo "FAIL: batch run: $(cat "$tmp/err")"; fail=1; }
  for i in 1 2 3; do grep -q "^\[$i\] " "$tmp/out" || { echo "FAIL: no answer [$i]"; fail=1; }; done
  grep -q "graphs captured" "$tmp/err" || { echo "FAIL: no summary line"; fail=1; }
else
  skip_part "stories260K.gguf not found: the golden CLI checks"
fi
finish cli_run
