#!/usr/bin/env bash
# piecewise synth: a small synthetic model in each type loads and generates
# the same tokens in every graph mode, the same seed gives the same bytes,
# a K_M mix has Q6_K where llama.cpp puts it, and bad usage and unsafe
# output paths are refused with clear messages.
# Usage: test_synth.sh PATH/TO/piecewise
set -u
bin=$1
src="${PW_SOURCE_DIR:-$(dirname "$0")/../..}"
. "$(dirname "$0")/lib.sh"

"$bin" synth --help | grep -q "usage: piecewise synth" || { echo "FAIL: --help"; fail=1; }
"$bin" synth --list | grep -q "8b    Llama-3.1-8B" || { echo "FAIL: --list lacks 8b"; fail=1; }
expect_fail 2 "--shape and --type are required" synth --type q4_0
expect_fail 2 "unknown shape 'huge'" synth --shape huge --type q4_0
expect_fail 2 "unknown family 'gpt9'" synth --family gpt9 --vocab x
expect_fail 2 "--family takes one weight type, not the q4_k_m mix" synth --family phi3 --type q4_k_m --vocab x
expect_fail 2 "unknown shape 'huge'" synth --family phi3 --shape huge --vocab x
expect_fail 2 "unknown type 'q3_x'" synth --family phi3 --type q3_x --vocab x
expect_fail 2 "unknown type 'q3_x'" synth --shape tiny --type q3_x
expect_fail 2 "unknown option '--bogus'" synth --shape tiny --type q4_0 --bogus
expect_fail 1 "cannot open '$tmp/none.gguf'" synth --shape tiny --type q4_0 --vocab "$tmp/none.gguf" -o "$tmp/x.gguf"
# Without --vocab the default is relative to the repository root: from any
# other folder that is said before anything is written.
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && "$bin" synth --shape tiny --type q4_0 -o x.gguf) >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ "$rc" -eq 2 ] && grep -qF "no --vocab given, and the default 'models/SmolLM2-135M-Instruct.Q4_1.gguf' is not in the current folder" "$tmp/err"; } ||
  { echo "FAIL: synth without --vocab elsewhere -> exit $rc: $(cat "$tmp/err")"; fail=1; }
[ ! -e "$tmp/elsewhere/x.gguf" ] || { echo "FAIL: synth without a vocabulary left a file"; fail=1; }
[ ! -e "$tmp/x.gguf" ] || { echo "FAIL: a failed synth left a file"; fail=1; }
ls "$tmp" | grep -q partial && { echo "FAIL: a failed synth left a partial file"; fail=1; }

vocab="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$vocab" ]; then
  for t in q4_0 q4_1 q8_0 q4_k q5_k q6_k q4_k_m; do
    f="$tmp/tiny-$t.gguf"
    out=$("$bin" synth --shape tiny --type "$t" --vocab "$vocab" -o "$f" 2>"$tmp/err") ||
      { echo "FAIL: synth $t: $(cat "$tmp/err")"; fail=1; continue; }
    [ "$out" = "$f" ] || { echo "FAIL: synth $t printed '$out'"; fail=1; }
    grep -q "synth: 100%" "$tmp/err" || { echo "FAIL: synth $t: no progress on stderr"; fail=1; }
    "$bin" inspect "$f" >"$tmp/inspect" || { echo "FAIL: inspect $t"; fail=1; continue; }
    grep -qF 'tokenizer.ggml.tokens                  string[49152]' "$tmp/inspect" ||
      { echo "FAIL: $t: tokenizer not copied"; fail=1; }
    want=$t; [ "$t" = q4_k_m ] && want=q4_k
    want=${want/_k/_K}
    grep -qE "blk.0.ffn_up.weight +$want " "$tmp/inspect" || { echo "FAIL: $t: ffn_up is not $want"; fail=1; }
    first=""
    for mode in none piecewise full; do
      toks=$("$bin" run "$f" -p "Once upon a time" -n 6 --raw --mode "$mode" -q 2>"$tmp/err") ||
        { echo "FAIL: run $t --mode $mode: $(cat "$tmp/err")"; fail=1; continue; }
      if [ -z "$first" ]; then first=$toks; elif [ "$toks" != "$first" ]; then
        echo "FAIL: $t: mode $mode generated other text"; fail=1; fi
    done
  done
  # Q4_K_M: the LM head (tied: the embedding) and attn_v/ffn_down of the last
  # eighth of the layers (layer 1 of 2) are Q6_K, the rest Q4_K.
  "$bin" inspect "$tmp/tiny-q4_k_m.gguf" >"$tmp/inspect"
  for want in "token_embd.weight        q6_K" "blk.1.ffn_down.weight    q6_K" \
              "blk.1.attn_v.weight      q6_K" "blk.0.attn_v.weight      q4_K" \
              "blk.0.attn_q.weight      q4_K"; do
    grep -qF -- "$want" "$tmp/inspect" || { echo "FAIL: q4_k_m: no '$want'"; fail=1; }
  done
  # Same seed, same bytes; another seed, other weights.
  "$bin" synth --shape tiny --type q4_0 --vocab "$vocab" -o "$tmp/again.gguf" >/dev/null 2>&1
  cmp -s "$tmp/tiny-q4_0.gguf" "$tmp/again.gguf" || { echo "FAIL: same seed, other bytes"; fail=1; }
  "$bin" synth --shape tiny --type q4_0 --vocab "$vocab" --seed 2 -o "$tmp/seed2.gguf" >/dev/null 2>&1
  cmp -s "$tmp/tiny-q4_0.gguf" "$tmp/seed2.gguf" && { echo "FAIL: seed 2 gave the same bytes"; fail=1; }
  # An existing file is refused without --force and replaced with it; a link is never followed.
  expect_fail 1 "exists; --force replaces it" synth --shape tiny --type q4_0 --vocab "$vocab" -o "$tmp/again.gguf"
  "$bin" synth --shape tiny --type q4_0 --vocab "$vocab" --seed 2 --force -o "$tmp/again.gguf" >/dev/null 2>&1 &&
    cmp -s "$tmp/seed2.gguf" "$tmp/again.gguf" || { echo "FAIL: --force did not replace"; fail=1; }
  ln -s "$tmp/target" "$tmp/link.gguf"
  expect_fail 1 "is not a plain file; not touched" synth --shape tiny --type q4_0 --vocab "$vocab" -o "$tmp/link.gguf" --force
  [ ! -e "$tmp/target" ] || { echo "FAIL: wrote through a link"; fail=1; }
  # The cache folder: made on demand, reused the second time.
  out=$(XDG_CACHE_HOME="$tmp/cache" "$bin" synth --shape tiny --type q8_0 --vocab "$vocab" 2>/dev/null)
  [ "$out" = "$tmp/cache/piecewise/synth/tiny-q8_0.gguf" ] && [ -f "$out" ] ||
    { echo "FAIL: cache path '$out'"; fail=1; }
  XDG_CACHE_HOME="$tmp/cache" "$bin" synth --shape tiny --type q8_0 --vocab "$vocab" 2>&1 >/dev/null |
    grep -q "already made" || { echo "FAIL: cached file not reused"; fail=1; }
  # A family's small model over the vocabulary: deterministic, and piecewise reads it.
  "$bin" synth --family qwen3 --vocab "$vocab" -o "$tmp/qwen3.gguf" >/dev/null 2>&1 &&
    "$bin" synth --family qwen3 --vocab "$vocab" -o "$tmp/qwen3b.gguf" >/dev/null 2>&1 &&
    cmp -s "$tmp/qwen3.gguf" "$tmp/qwen3b.gguf" || { echo "FAIL: --family qwen3"; fail=1; }
  "$bin" inspect "$tmp/qwen3.gguf" 2>&1 | grep -q "qwen3" || { echo "FAIL: inspect of the qwen3 file"; fail=1; }
  # ... at another size and weight type: Qwen 3's q stays twice dim wide, and it generates
  out=$(XDG_CACHE_HOME="$tmp/cache" "$bin" synth --family qwen3 --shape tiny --type q8_0 --vocab "$vocab" 2>"$tmp/err")
  [ "$out" = "$tmp/cache/piecewise/synth/family-qwen3-tiny-q8_0.gguf" ] ||
    { echo "FAIL: family cache path '$out' $(cat "$tmp/err")"; fail=1; }
  "$bin" inspect "$out" >"$tmp/inspect" 2>&1
  grep -q "blk.1.attn_q.weight  *q8_0  *\[256, 512\]" "$tmp/inspect" && ! grep -q "blk.2.attn_q" "$tmp/inspect" ||
    { echo "FAIL: inspect of the resized qwen3 file: $(grep attn_q "$tmp/inspect" | head -3)"; fail=1; }
  "$bin" run "$out" --raw -p "Hello" -n 4 --temp 0 -q >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: run of the resized qwen3 file: $(cat "$tmp/err")"; fail=1; }
else
  skip_part "$vocab absent: synthetic models"
fi
finish cli_synth
