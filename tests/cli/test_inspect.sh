#!/usr/bin/env bash
# piecewise inspect: the header, metadata and tensor table of stories260K
# (when ../shared has it), and clear errors with exit codes for a missing,
# truncated or foreign file and for bad usage. Usage: test_inspect.sh PATH/TO/piecewise
set -u
bin=$1
shared="${PW_SHARED_DIR:-$(dirname "$0")/../../../shared}"
. "$(dirname "$0")/lib.sh"

"$bin" inspect --help | grep -q "usage: piecewise inspect" || { echo "FAIL: --help"; fail=1; }
expect_fail 2 "usage: piecewise inspect" inspect
expect_fail 2 "--items needs a count >= 0, got 'x'" inspect model.gguf --items x
expect_fail 2 "unknown option '--bogus'" inspect model.gguf --bogus
expect_fail 2 "one file at a time" inspect a.gguf b.gguf
expect_fail 1 "cannot open '$tmp/none.gguf'" inspect "$tmp/none.gguf"
printf 'not a gguf file at all' >"$tmp/text.gguf"
expect_fail 1 "bad magic 6e 6f 74 20" inspect "$tmp/text.gguf"

model="$shared/models/stories260K.gguf"
if [ -f "$model" ]; then
  "$bin" inspect "$model" --items 2 >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: inspect stories260K: $(cat "$tmp/err")"; fail=1; }
  for want in "GGUF v3, 1185376 bytes, alignment 32" "metadata (19 keys):" \
              'tokenizer.ggml.tokens                  string[512]     ["<unk>", "<s>", ... 510 more]' \
              "llama.embedding_length                 uint32          64" \
              "tensors (48):" "blk.0.attn_k.weight      f32   [64, 32]" \
              "total: 48 tensors" \
              "tokenizer: llama (SentencePiece), 512 tokens, bos 1, eos 2, unk 0, adds bos: yes"; do
    grep -qF -- "$want" "$tmp/out" || { echo "FAIL: inspect output lacks '$want'"; fail=1; }
  done
  head -c 5000 "$model" >"$tmp/cut.gguf"
  expect_fail 1 "gguf: kv 0 'tokenizer.ggml.tokens': element 370 of 512: truncated" inspect "$tmp/cut.gguf"
else
  skip_part "$model absent: its inspection"
fi
finish cli_inspect
