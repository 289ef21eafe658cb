#!/usr/bin/env bash
# piecewise chat: usage errors, a model without a chat template, and (when
# SmolLM2 has been fetched) two turns over one KV cache, a line with a NUL
# byte refused without losing the next one, and special-token text in a
# chat-formatted prompt kept as text.
set -u
bin=$1
shared="${PW_SHARED_DIR:-../shared}"
smol="${PW_SMOLLM2_GGUF:-${PW_SOURCE_DIR:-.}/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
. "$(dirname "$0")/lib.sh"

"$bin" chat >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no model given" "$tmp/err" || { echo "FAIL: chat without model: $rc $(cat "$tmp/err")"; fail=1; }
"$bin" chat x.gguf --device tpu >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown device 'tpu'" "$tmp/err" || { echo "FAIL: bad device: $rc $(cat "$tmp/err")"; fail=1; }
if [ -f "$shared/models/stories260K.gguf" ]; then
  echo hi | "$bin" chat "$shared/models/stories260K.gguf" >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] && grep -q "no chat template" "$tmp/err" || { echo "FAIL: chat on a model without template: $rc $(cat "$tmp/err")"; fail=1; }
else
  skip_part "stories260K.gguf not found: a model without a chat template"
fi
if [ -f "$smol" ]; then
  printf 'What is the capital of France? Answer in one sentence.\nWhat is the capital of Italy? Answer in one sentence.\n/quit\n' | "$bin" chat "$smol" -n 24 >"$tmp/out" 2>"$tmp/err" \
    || { echo "FAIL: chat run: $(cat "$tmp/err")"; fail=1; }
  grep -q "Paris" "$tmp/out" || { echo "FAIL: first answer lacks Paris: $(cat "$tmp/out")"; fail=1; }
  grep -q "Rome" "$tmp/out" || { echo "FAIL: second turn lacks Rome: $(cat "$tmp/out")"; fail=1; }
  # a NUL byte would cut the message short: the line is refused whole, the
  # session goes on, and the next line is answered
  printf 'What is the capital of France?\0 Ignore that.\nWhat is the capital of France? Answer in one sentence.\n/quit\n' \
    | "$bin" chat "$smol" -n 16 >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: chat with a NUL: $(cat "$tmp/err")"; fail=1; }
  grep -q "a message cannot hold a NUL byte; ignored" "$tmp/err" || { echo "FAIL: NUL line not refused: $(cat "$tmp/err")"; fail=1; }
  [ "$(grep -c "Paris" "$tmp/out")" -eq 1 ] || { echo "FAIL: the line after a NUL line is not answered once: $(cat "$tmp/out")"; fail=1; }
  # run with the chat template: "<|im_end|>" in the prompt is text, at least
  # as many tokens as "<|im_end|"; a raw prompt keeps it one special token
  ptok() { "$bin" run "$smol" -n 1 --temp 0 --mode none "$@" 2>&1 | sed -n 's/^prompt \([0-9]*\) tok.*/\1/p'; }
  full=$(ptok -p '<|im_end|>'); cut=$(ptok -p '<|im_end|')
  [ -n "$full" ] && [ -n "$cut" ] && [ "$full" -ge "$cut" ] || { echo "FAIL: run: <|im_end|> in a chat prompt is $full tokens, <|im_end| $cut"; fail=1; }
  full=$(ptok --raw -p '<|im_end|>'); cut=$(ptok --raw -p '<|im_end|')
  [ -n "$full" ] && [ -n "$cut" ] && [ "$full" -lt "$cut" ] || { echo "FAIL: run --raw: <|im_end|> is $full tokens, <|im_end| $cut"; fail=1; }
else
  skip_part "SmolLM2-135M-Instruct.Q4_1.gguf not fetched: the two-turn chat"
fi
finish cli_chat
