#!/usr/bin/env bash
# piecewise perplexity on stories260K (ctx 64): a finite PPL, the same
# figure for every thread count, a saved base whose KL divergence from the
# same run is ~0 with every top token the same, and clear errors for bad
# input: a missing or FIFO text, a text too short for two chunks, a base
# that exists already, a base of another context, vocabulary or text, a
# truncated or foreign base, a link. Usage: test_perplexity.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

expect_fail 2 "no model given" perplexity
expect_fail 2 "no text given" perplexity "$model"
expect_fail 2 "separate runs" perplexity "$model" -f x --kl-divergence a --kl-divergence-base b

if [ -f "$model" ]; then
  text=$tmp/story.txt
  for i in $(seq 1 40); do
    echo "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friend Tom. One day, they saw a big red ball under a tree."
  done >"$text"
  head -c 200 "$text" >"$tmp/short.txt"
  expect_fail 1 "cannot open '$tmp/none.txt'" perplexity "$model" -f "$tmp/none.txt" -c 64
  mkfifo "$tmp/fifo"
  expect_fail 1 "is not a regular file (it is a FIFO)" perplexity "$model" -f "$tmp/fifo" -c 64
  ln -s "$text" "$tmp/link.txt"
  expect_fail 1 "is a symbolic link" perplexity "$model" -f "$tmp/link.txt" -c 64
  expect_fail 1 "--ctx 64 needs at least 128" perplexity "$model" -f "$tmp/short.txt" -c 64

  "$bin" perplexity "$model" -f "$text" -c 64 >"$tmp/p1" 2>"$tmp/e1" || { echo "FAIL: perplexity: $(cat "$tmp/e1")"; fail=1; }
  "$bin" perplexity "$model" -f "$text" -c 64 --threads 2 >"$tmp/p2" 2>/dev/null
  grep -q "^Final estimate: PPL = [0-9.]* +/- [0-9.]*$" "$tmp/p1" || { echo "FAIL: no PPL line: $(cat "$tmp/p1")"; fail=1; }
  ppl=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/p1")
  awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 512) }' || { echo "FAIL: PPL $ppl is not in (1, vocab)"; fail=1; }
  cmp -s "$tmp/p1" "$tmp/p2" || { echo "FAIL: 1 and 2 threads differ: $(cat "$tmp/p1" "$tmp/p2")"; fail=1; }
  grep -q "chunks of 64 tokens, 31 scored per chunk (each chunk starts with BOS)" "$tmp/e1" || { echo "FAIL: no chunk summary: $(cat "$tmp/e1")"; fail=1; }

  base=$tmp/base.bin
  "$bin" perplexity "$model" -f "$text" -c 64 --kl-divergence-base "$base" >"$tmp/p3" 2>"$tmp/e3" || { echo "FAIL: saving a base: $(cat "$tmp/e3")"; fail=1; }
  cmp -s "$tmp/p1" "$tmp/p3" || { echo "FAIL: saving a base changed the PPL"; fail=1; }
  expect_fail 1 "something is already at '$base'" perplexity "$model" -f "$text" -c 64 --kl-divergence-base "$base"
  ln -s "$tmp/elsewhere" "$tmp/baselink"
  expect_fail 1 "something is already at '$tmp/baselink'" perplexity "$model" -f "$text" -c 64 --kl-divergence-base "$tmp/baselink"
  [ ! -e "$tmp/elsewhere" ] || { echo "FAIL: the base followed a link"; fail=1; }

  "$bin" perplexity "$model" --kl-divergence "$base" >"$tmp/k1" 2>"$tmp/ek" || { echo "FAIL: kl-divergence: $(cat "$tmp/ek")"; fail=1; }
  grep -q "^Same top p *: 100.000 ± 0.000 %$" "$tmp/k1" || { echo "FAIL: top tokens differ from the same run: $(cat "$tmp/k1")"; fail=1; }
  kld=$(sed -n 's/^Mean    KLD *: *\([-0-9.]*\) .*/\1/p' "$tmp/k1")
  awk -v k="$kld" 'BEGIN { exit !(k > -0.0001 && k < 0.0001) }' || { echo "FAIL: KLD of a run from itself is $kld"; fail=1; }
  "$bin" perplexity "$model" -f "$text" --kl-divergence "$base" >"$tmp/k2" 2>/dev/null || { echo "FAIL: kl-divergence with the text"; fail=1; }
  cmp -s "$tmp/k1" "$tmp/k2" || { echo "FAIL: the text changed the KLD"; fail=1; }

  expect_fail 1 "was computed with --ctx 64, not 32" perplexity "$model" -f "$text" -c 32 --kl-divergence "$base"
  sed 's/Lily/Sue/' "$text" >"$tmp/other.txt"
  expect_fail 1 "was computed on another text" perplexity "$model" -f "$tmp/other.txt" --kl-divergence "$base"
  # another model's base: its header says another vocabulary size
  cp "$base" "$tmp/vocab.bin"
  printf '\x00\xc0\x00\x00' | dd of="$tmp/vocab.bin" bs=1 seek=12 conv=notrunc 2>/dev/null
  expect_fail 1 "vocabulary of 49152 tokens, this model has 512" perplexity "$model" --kl-divergence "$tmp/vocab.bin"
  head -c 5000 "$base" >"$tmp/trunc.bin"
  expect_fail 1 "needs" perplexity "$model" --kl-divergence "$tmp/trunc.bin"
  expect_fail 1 "not a log-probability file" perplexity "$model" --kl-divergence "$text"
  expect_fail 1 "is not a regular file (it is a FIFO)" perplexity "$model" --kl-divergence "$tmp/fifo"
  ln -s "$base" "$tmp/base.lnk"
  expect_fail 1 "is a symbolic link" perplexity "$model" --kl-divergence "$tmp/base.lnk"
else
  skip_part "stories260K.gguf not found: the perplexity runs"
fi
finish cli_perplexity
