#!/usr/bin/env bash
# bench/peers/llamacpp.sh without llama.cpp: its usage errors, a missing
# model, a llama.cpp configure or build that fails, a model llama.cpp
# cannot run, and compare's interleaving and statistics, with stand-in
# llama.cpp binaries (and a stand-in piecewise) in a scratch cache, so no
# download and no build. The real piecewise only reads a file that is not
# a model, for the "piecewise: <its error>" row. Needs bash, python3, cmake
# and GNU time. Usage: test_peers_llamacpp.sh PATH/TO/piecewise
set -u
bin=$1
src=${PW_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
script=$src/bench/peers/llamacpp.sh
unset REPEATS TOKENS PW_KERNEL_ISA
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for need in python3 cmake /usr/bin/time; do
  if ! command -v "$need" >/dev/null; then
    echo "$need not found: skipped"
    exit 77
  fi
done

# expect CODE SUBSTRING ARGS...: the script exits CODE and stderr holds
# SUBSTRING.
expect() {
  local code=$1 msg=$2; shift 2
  bash "$script" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: llamacpp.sh $* -> exit $rc (want $code, '$msg'), stderr: $(cat "$tmp/err")"; fail=1
  fi
}

# expect_out SUBSTRING: the last run's stdout holds SUBSTRING.
expect_out() {
  if ! grep -qF -- "$1" "$tmp/out"; then
    echo "FAIL: stdout lacks '$1':"; cat "$tmp/out"; fail=1
  fi
}

# CPUs to pose as (the script reads their flags, not the machine's).
printf 'model name\t: Test AVX-512 CPU\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni\n' >"$tmp/cpu512"
printf 'model name\t: Test AVX2 CPU\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2\n' >"$tmp/cpu2"
printf 'model name\t: Test old CPU\nflags\t\t: fpu sse4_2 avx\n' >"$tmp/cpu1"
export PW_PEERS_CPUINFO=$tmp/cpu512

model=$tmp/model.gguf
echo "not a gguf file" >"$model"
export PW_LLAMACPP_CACHE=$tmp/cache LLAMACPP_PY_VERSION=test
cache=$tmp/cache/test
mkdir -p "$cache/src/vendor/llama.cpp"

# Usage errors: exit 2, the reason, then the usage line.
expect 2 "no command"
expect 2 "unknown command 'frob'" frob
expect 2 "unknown option '--frob'" compare --frob "$model"
expect 2 "--isa 'sse2': expected native or avx2" compare --isa sse2 "$model"
expect 2 "--isa needs a value" compare "$model" --isa
expect 2 "--repeats (or REPEATS) '0'" compare --repeats 0 "$model"
expect 2 "--repeats (or REPEATS) 'many'" compare --repeats many "$model"
REPEATS=-1 expect 2 "--repeats (or REPEATS) '-1'" compare "$model"
expect 2 "--tokens (or TOKENS) '99999'" compare --tokens 99999 "$model"
expect 2 "--runs (or RUNS) '0'" compare --runs 0 "$model"
expect 2 "--runs needs a value" compare "$model" --runs
RUNS=x expect 2 "--runs (or RUNS) 'x'" compare "$model"
expect 2 "compare needs a MODEL.gguf" compare
expect 2 "one model only" compare "$model" "$model"
expect 2 "build takes no model" build "$model"
expect 2 "usage:" compare --frob
bash "$script" --help >"$tmp/out" 2>&1 || { echo "FAIL: --help exits non-zero"; fail=1; }
expect_out "compare [--repeats R] [--runs N] [--isa native|avx2]"
bash "$script" compare --help >"$tmp/out" 2>&1 || { echo "FAIL: compare --help exits non-zero"; fail=1; }
expect_out "--isa ISA"

# Input the run cannot use: exit 1 with the reason.
expect 1 "no model file $tmp/none.gguf" compare "$tmp/none.gguf"
PW_BUILD=$tmp/nobuild expect 1 "no $tmp/nobuild/piecewise: build piecewise first" compare "$model"

# A llama.cpp that does not configure, then one that configures but does
# not build: the error names the flavour and the log.
pw_build=$(dirname "$bin")
cat >"$cache/src/vendor/llama.cpp/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.10)
project(broken NONE)
message(FATAL_ERROR "this llama.cpp does not configure")
EOF
PW_BUILD=$pw_build expect 1 "cmake of llama.cpp (native) failed (see $cache/cmake-native.log)" compare "$model"
grep -q "does not configure" "$cache/cmake-native.log" || { echo "FAIL: cmake log lacks cmake's error"; fail=1; }
PW_BUILD=$pw_build expect 1 "cmake of llama.cpp (native) failed" build
cat >"$cache/src/vendor/llama.cpp/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.10)
project(broken NONE)
message(STATUS "Adding CPU backend variant ggml-cpu: -mavx;-mavx2 GGML_AVX;GGML_AVX2")
foreach(t llama-bench llama-batched-bench llama-server)
  add_custom_target(${t} COMMAND false)
endforeach()
EOF
rm -rf "$cache"/build-*
PW_BUILD=$pw_build expect 1 "build of llama.cpp (native) failed (see $cache/build-native.log)" compare "$model"
PW_BUILD=$pw_build expect 1 "build of llama.cpp (avx2) failed" compare --isa avx2 "$model"
# A configuration that would bring AVX-512 in is refused before building.
sed -i 's/-mavx;-mavx2/-mavx2;-mavx512f/' "$cache/src/vendor/llama.cpp/CMakeLists.txt"
rm -rf "$cache"/build-*
PW_BUILD=$pw_build expect 1 "llama.cpp avx2 configuration is not AVX2-only" build --isa avx2

# Stand-in llama.cpp binaries: they log each call and answer with figures
# from $PEER_FIGURES (the n-th call of a kind gets the n-th line), or fail
# when FAIL_LLAMA is set.
fake=$tmp/fake
mkdir -p "$fake"
cat >"$fake/llama-bench" <<'EOF'
#!/usr/bin/env bash
[ -z "${FAIL_LLAMA:-}" ] || { echo "llama_model_load: error loading model: bad magic" >&2; exit 1; }
# FAIL_FLAVOURS: the builds (cache folder names) that die as on a VM that
# lists AMX and refuses its instructions.
for f in ${FAIL_FLAVOURS:-}; do
  case $0 in */$f/*) kill -ILL $$ ;; esac
done
args="$*"
case $args in *"-p 16 -n 4 "*) exit 0 ;; esac # the probe run
case $args in *"-n 16 "*) kind=rss ;; *"-p 128"*) kind=pp ;; *"-t 2"*) kind=tg2 ;; *) kind=tg1 ;; esac
echo "L $kind" >>"$PEER_LOG"
[ -z "${PEER_ARGS:-}" ] || echo "llama-bench $args" >>"$PEER_ARGS"
n=$(grep -c "^L $kind\$" "$PEER_LOG")
v=$(grep "^l $kind " "$PEER_FIGURES" | sed -n "${n}p" | cut -d' ' -f4)
# With PEER_SAMPLES, per-run samples whose median is the figure and whose
# mean is not.
if [ -n "${PEER_SAMPLES:-}" ]; then
  echo "[{\"avg_ts\": 12345, \"samples_ts\": [ 1, ${v:-1}, 99999 ]}]"
else
  echo "[{\"avg_ts\": ${v:-1}}]"
fi
EOF
cat >"$fake/llama-batched-bench" <<'EOF'
#!/usr/bin/env bash
echo "L b16" >>"$PEER_LOG"
n=$(grep -c '^L b16$' "$PEER_LOG")
v=$(grep '^l b16 ' "$PEER_FIGURES" | sed -n "${n}p" | cut -d' ' -f4)
echo "main: n_kv_max = 4096" >&2
echo "{\"n_kv_max\": 4096, \"speed_tg\": $v}"
EOF
cp "$fake/llama-bench" "$fake/llama-server"
chmod +x "$fake"/*
for f in native noamx portable avx2; do mkdir -p "$cache/$f" && cp "$fake"/* "$cache/$f/"; done

# A llama.cpp that cannot load the model: both builds tried, then the error.
: >"$tmp/log"
FAIL_LLAMA=1 PEER_LOG=$tmp/log PEER_FIGURES=/dev/null PW_BUILD=$pw_build \
  expect 1 "llama.cpp (native and portable builds) cannot run $model: llama_model_load: error loading model: bad magic" \
  compare "$model"

# The real piecewise on a file that is not a model: llama.cpp's figures
# stay, piecewise's row says why it has none.
: >"$tmp/log"
printf 'l tg1 1 100\nl tg2 1 150\nl pp 1 200\nl b16 1 80\n' >"$tmp/figures"
PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pw_build \
  expect 0 "round 1/1" compare --repeats 1 "$model"
expect_out "piecewise: "
expect_out "| decode batch 1, 1 thread (tok/s)      |     100.0 |         - |      - |           - |             - |     0 |"
expect_out "| prefill 128 tokens, 1 thread (tok/s)  |     200.0 |         - |"

# A stand-in piecewise: bench model answers with figures per call, run
# sleeps a moment (peak RSS of a real process).
pwfake=$tmp/pwfake
mkdir -p "$pwfake"
cat >"$pwfake/piecewise" <<'EOF'
#!/usr/bin/env bash
if [ "$1" = run ]; then echo "P rss" >>"$PEER_LOG"; exit 0; fi
if [ "$1" = cache ]; then echo "$2: 1.0 MiB, 100.0% of it in 2 MiB pages"; echo "C $2" >>"$PEER_LOG.cache"; exit 0; fi
args="$*"
case $args in *"--batch 16"*) kind=b16 ;; *"--threads 2"*) kind=tg2 ;; *) kind=tg1 ;; esac
echo "P $kind ISA=$PW_KERNEL_ISA" >>"$PEER_LOG"
[ -z "${PEER_ARGS:-}" ] || echo "piecewise $args" >>"$PEER_ARGS"
n=$(grep -c "^P $kind " "$PEER_LOG")
v=$(grep "^p $kind " "$PEER_FIGURES" | sed -n "${n}p" | cut -d' ' -f4)
pp=$(grep "^p pp " "$PEER_FIGURES" | sed -n "${n}p" | cut -d' ' -f4)
b=1; [ $kind = b16 ] && b=16
echo "{\"runs\":[{\"mode\":\"none\",\"batch\":$b,\"decode_tok_s\":1},{\"mode\":\"full\",\"batch\":$b,\"decode_tok_s\":$v}],\"prefill_tok_s\":${pp:-0}}"
EOF
chmod +x "$pwfake/piecewise"

# Three rounds. llama.cpp's decode drifts 100 -> 50 -> 200 and piecewise's
# with it (ratios 2, 3, 1.5): median of pairs 2.00x, min-max 1.50-3.00x,
# medians 100 and 200 (ratio 2.00x). A llama.cpp run that fails (round 2
# of tg2) leaves that pair out.
cat >"$tmp/figures" <<'EOF'
l tg1 1 100
l tg1 2 50
l tg1 3 200
p tg1 1 200
p tg1 2 150
p tg1 3 300
l tg2 1 100
l tg2 2 bogus
l tg2 3 100
p tg2 1 120
p tg2 2 500
p tg2 3 130
l pp 1 10
l pp 2 10
l pp 3 10
p pp 1 20
p pp 2 30
p pp 3 40
l b16 1 50
l b16 2 50
l b16 3 50
p b16 1 100
p b16 2 100
p b16 3 100
EOF
: >"$tmp/log"; : >"$tmp/log.cache"
PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "llama-bench -p 0 -n 64 -t 2 failed" compare --repeats 3 "$model"
# the file page-cached once, before the first round, and the state logged
[ "$(cat "$tmp/log.cache")" = "C $model" ] || { echo "FAIL: piecewise cache calls: $(cat "$tmp/log.cache")"; fail=1; }
grep -qF "page cache: $model: 1.0 MiB, 100.0% of it in 2 MiB pages" "$tmp/err" || { echo "FAIL: no page-cache line: $(cat "$tmp/err")"; fail=1; }
expect_out "| decode batch 1, 1 thread (tok/s)      |     100.0 |     200.0 |  2.00x |       2.00x |    1.50-3.00x |     3 |"
expect_out "| decode batch 1, 2 threads (tok/s)     |     100.0 |     130.0 |  1.30x |       1.25x |    1.20-1.30x |     2 |"
expect_out "| prefill 128 tokens, 1 thread (tok/s)  |      10.0 |      30.0 |  3.00x |       3.00x |    2.00-4.00x |     3 |"
expect_out "| decode 16 sequences, 1 thread (tok/s) |      50.0 |     100.0 |  2.00x |       2.00x |    2.00-2.00x |     3 |"
expect_out "peak RSS (MiB, lower is better)"
expect_out "  tg1  llama.cpp 100.0 50.0 200.0 | piecewise 200.0 150.0 300.0"
expect_out "  tg2  llama.cpp 100.0 - 100.0 | piecewise 120.0 500.0 130.0"
expect_out "PW_KERNEL_ISA=auto"
expect_out "load average"
expect_out "CPU: "
# Interleaved, the order flipped every round (tg1's piecewise run also
# gives the prefill figure, between llama.cpp's tg1 and pp).
order=$(tr '\n' ',' <"$tmp/log")
want="L tg1,P tg1 ISA=auto,L pp,L tg2,P tg2 ISA=auto,L b16,P b16 ISA=auto,L rss,P rss,"
want+="L pp,P tg1 ISA=auto,L tg1,P tg2 ISA=auto,L tg2,P b16 ISA=auto,L b16,P rss,L rss,"
want+="L tg1,P tg1 ISA=auto,L pp,L tg2,P tg2 ISA=auto,L b16,P b16 ISA=auto,L rss,P rss,"
[ "$order" = "$want" ] || { echo "FAIL: run order $order, want $want"; fail=1; }

# --isa avx2: the avx2 build, piecewise with PW_KERNEL_ISA=avx2, and the
# header says what kind of machine ran the AVX2 code.
: >"$tmp/log"
PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "round 1/1" compare --repeats 1 --isa avx2 "$model"
expect_out "llama.cpp: $cache/avx2"
expect_out "PW_KERNEL_ISA=avx2"
expect_out "CPU: Test AVX-512 CPU"
expect_out "AVX2 code on an AVX-512 machine (this CPU has: avx512f avx512_vnni), not an AVX2-only CPU"
grep -q "ISA=avx2" "$tmp/log" || { echo "FAIL: piecewise did not run with PW_KERNEL_ISA=avx2"; fail=1; }
PW_PEERS_CPUINFO=$tmp/cpu2 PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "round 1/1" compare --repeats 1 --isa avx2 "$model"
expect_out "AVX2 code on a CPU without AVX-512 (extras: none)"
PW_PEERS_CPUINFO=$tmp/cpu1 PW_BUILD=$pwfake \
  expect 1 "this CPU has no avx2: --isa avx2 needs AVX2, FMA and F16C" compare --isa avx2 "$model"

# --runs 3: llama-bench repeats 3 times and its median sample is the figure
# (not its mean), llama-batched-bench runs 3 times (median of 10, 50, 70),
# piecewise bench model takes --repeats 3; peak RSS stays one run.
cat >"$tmp/figures" <<'EOF2'
l tg1 1 100
l tg2 1 100
l pp 1 10
l b16 1 10
l b16 2 50
l b16 3 70
p tg1 1 200
p tg2 1 200
p pp 1 20
p b16 1 150
EOF2
: >"$tmp/log"
: >"$tmp/args"
PEER_SAMPLES=1 PEER_ARGS=$tmp/args PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "1 rounds of 3 run(s) per measurement" compare --repeats 1 --runs 3 "$model"
expect_out "| decode batch 1, 1 thread (tok/s)      |     100.0 |     200.0 |  2.00x |"
expect_out "| decode 16 sequences, 1 thread (tok/s) |      50.0 |     150.0 |  3.00x |"
expect_out "each figure the median of 3 run(s)"
[ "$(grep -c '^L b16$' "$tmp/log")" = 3 ] || { echo "FAIL: llama-batched-bench ran $(grep -c '^L b16$' "$tmp/log") times, want 3"; fail=1; }
grep -q -- "-p 0 -n 64 -t 1" <<<"$(grep -- '-r 3 ' "$tmp/args")" || { echo "FAIL: llama-bench not run with -r 3: $(cat "$tmp/args")"; fail=1; }
grep -q -- "--repeats 3" <<<"$(grep '^piecewise' "$tmp/args")" || { echo "FAIL: piecewise not run with --repeats 3: $(cat "$tmp/args")"; fail=1; }
grep -q -- "-n 16 -r 1 " "$tmp/args" || { echo "FAIL: peak RSS llama-bench not one run: $(cat "$tmp/args")"; fail=1; }

# A native build that dies: on a CPU that lists AMX, the native build
# without AMX is next; where that dies too, or where the CPU lists no AMX,
# the portable build.
printf 'model name\t: Test AMX CPU\nflags\t\t: fpu avx avx2 fma f16c avx512f avx512_vnni amx_tile amx_int8\n' >"$tmp/cpuamx"
printf 'l tg1 1 100\nl tg2 1 100\nl pp 1 10\nl b16 1 50\np tg1 1 200\np tg2 1 200\np pp 1 20\np b16 1 100\n' >"$tmp/figures"
: >"$tmp/log"
PW_PEERS_CPUINFO=$tmp/cpuamx FAIL_FLAVOURS=native PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "this CPU lists AMX: trying the native build without AMX" compare --repeats 1 "$model"
expect_out "llama.cpp: $cache/noamx"
: >"$tmp/log"
PW_PEERS_CPUINFO=$tmp/cpuamx FAIL_FLAVOURS="native noamx" PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "native llama-bench without AMX failed on $model (killed by signal 4 (ILL) ); using the portable build" compare --repeats 1 "$model"
expect_out "llama.cpp: $cache/portable"
: >"$tmp/log"
FAIL_FLAVOURS=native PEER_LOG=$tmp/log PEER_FIGURES=$tmp/figures PW_BUILD=$pwfake \
  expect 0 "native llama-bench failed on $model (killed by signal 4 (ILL) ); using the portable build" compare --repeats 1 "$model"
expect_out "llama.cpp: $cache/portable"
PW_PEERS_CPUINFO=$tmp/cpuamx FAIL_FLAVOURS="native noamx portable" PW_BUILD=$pwfake \
  expect 1 "llama.cpp (native, noamx and portable builds) cannot run $model: killed by signal 4 (ILL)" compare --repeats 1 "$model"

# bench/peers/synth-table.sh refuses bad arguments before it writes or runs
# anything: exit 2, the reason; no piecewise build: exit 1.
table() {
  local code=$1 msg=$2; shift 2
  bash "$src/bench/peers/synth-table.sh" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: synth-table.sh $* -> exit $rc (want $code, '$msg'), stderr: $(cat "$tmp/err")"; fail=1
  fi
}
table 2 "unknown shape '2b'" --shapes 2b
table 2 "unknown type 'q9_9'" --types q4_0,q9_9
table 2 "--repeats '0': expected a whole number from 1 to 100" --repeats 0
table 2 "--types needs a value" --types
table 2 "unknown argument '--frob'" --frob
PW_BUILD=$tmp/nowhere table 1 "no $tmp/nowhere/piecewise: build piecewise first" --shapes 1b

[ $fail -eq 0 ] && echo "cli_peers_llamacpp: all checks passed"
exit $fail
