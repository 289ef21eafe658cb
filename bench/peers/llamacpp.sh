#!/usr/bin/env bash
# llama.cpp as a peer for piecewise's CPU path.
#
#   bench/peers/llamacpp.sh build              fetch + build llama.cpp only
#   bench/peers/llamacpp.sh compare MODEL.gguf  build if needed, then one table
#
# Source: the llama-cpp-python sdist from PyPI (it vendors a pinned
# llama.cpp), fetched with pip, version $LLAMACPP_PY_VERSION (0.3.36). It
# builds llama-bench, llama-batched-bench and llama-server, all three in one
# go, into $PW_LLAMACPP_CACHE/<version>/{native,portable} (default
# ~/.cache/piecewise/llamacpp), never into the repository, and writes
# $PW_LLAMACPP_CACHE/READY listing the built binaries (others wait on it).
#
#   native    -DGGML_NATIVE=ON: whatever this CPU has (AVX-512, VNNI, AMX)
#   portable  -DGGML_NATIVE=OFF: AVX2+FMA+F16C, no AVX-512 or AMX; used when
#             the native binary dies (SIGILL in AMX prefill seen on VMs)
#
# compare prints, for a GGUF file, llama.cpp and piecewise side by side:
# decode at batch 1 with 1 and 2 threads (llama-bench tg), prefill of 128
# tokens with 1 thread (llama-bench pp128), batched decode of 16 sequences
# (llama-batched-bench, 1 thread), and the ratios; piecewise's figures come
# from `build/piecewise bench model MODEL --json`. Each figure is a median
# of $REPEATS runs (llama-bench -r; bench model --repeats). Peak RSS: one
# 16-token decode each (llama-bench -n 16; piecewise run -n 16, one request,
# graphs captured for batch 1 only), from GNU time. Where piecewise cannot
# run MODEL (an architecture or weight type it does not read yet), the table
# keeps llama.cpp's figures and prints "piecewise: <its error>" instead.
#
# Environment: PW_LLAMACPP_CACHE, LLAMACPP_PY_VERSION, JOBS (build jobs, 2),
# PW_BUILD (piecewise build folder, build), REPEATS (5), TOKENS (decode
# tokens, 64).
set -euo pipefail

VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
ROOT=${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}
CACHE=$ROOT/$VERSION
JOBS=${JOBS:-2}
REPEATS=${REPEATS:-5}
TOKENS=${TOKENS:-64}
TOOLS=(llama-bench llama-batched-bench llama-server)
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PW_BUILD=${PW_BUILD:-$HERE/build}

log() { printf '[llamacpp] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

fetch_source() {
    local src=$CACHE/src
    if [[ -f $src/vendor/llama.cpp/CMakeLists.txt ]]; then return; fi
    mkdir -p "$CACHE/sdist"
    local tarball=$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz
    if [[ ! -f $tarball ]]; then
        log "downloading llama-cpp-python==$VERSION sdist from PyPI"
        # --no-binary :all: also builds every build dependency from source
        # (minutes); only the sdist is needed, so fall back to wheels for those.
        if ! pip download --no-deps --no-binary :all: -d "$CACHE/sdist" \
            "llama-cpp-python==$VERSION" >"$CACHE/sdist/pip.log" 2>&1; then
            pip download --no-deps --no-binary llama-cpp-python -d "$CACHE/sdist" \
                "llama-cpp-python==$VERSION" >>"$CACHE/sdist/pip.log" 2>&1 ||
                die "pip download failed (see $CACHE/sdist/pip.log)"
        fi
    fi
    log "extracting $tarball"
    rm -rf "$src.tmp" && mkdir -p "$src.tmp"
    tar xzf "$tarball" -C "$src.tmp" --strip-components=1
    mv "$src.tmp" "$src"
}

# build_flavour native|portable
build_flavour() {
    local flavour=$1 out=$CACHE/$1 bdir=$CACHE/build-$1 native=ON
    [[ $flavour == portable ]] && native=OFF
    local have=1
    for t in "${TOOLS[@]}"; do [[ -x $out/$t ]] || have=0; done
    if ((have)); then return; fi
    log "building $flavour (GGML_NATIVE=$native, -j$JOBS) in $bdir"
    cmake -S "$CACHE/src/vendor/llama.cpp" -B "$bdir" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=$native -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DGGML_OPENMP=OFF >"$CACHE/cmake-$flavour.log" 2>&1 ||
        die "cmake failed (see $CACHE/cmake-$flavour.log)"
    nice -n 10 cmake --build "$bdir" -j"$JOBS" --target "${TOOLS[@]}" \
        >"$CACHE/build-$flavour.log" 2>&1 || die "build failed (see $CACHE/build-$flavour.log)"
    mkdir -p "$out"
    for t in "${TOOLS[@]}"; do cp "$bdir/bin/$t" "$out/$t"; done
}

write_ready() {
    local tmp=$ROOT/READY.tmp
    : >"$tmp"
    for f in native portable; do
        for t in "${TOOLS[@]}"; do [[ -x $CACHE/$f/$t ]] && echo "$CACHE/$f/$t" >>"$tmp"; done
    done
    mv "$tmp" "$ROOT/READY"
    log "READY: $(tr '\n' ' ' <"$ROOT/READY")"
}

build_all() {
    command -v cmake >/dev/null || die "cmake not found"
    fetch_source
    build_flavour native
    write_ready
    build_flavour portable
    write_ready
}

# A flavour whose llama-bench survives a short prefill and decode on MODEL:
# native unless it dies (SIGILL and the like), else portable.
pick_flavour() {
    local model=$1
    if "$CACHE/native/llama-bench" -m "$model" -p 16 -n 4 -r 1 -t 1 >/dev/null 2>&1; then
        echo native
    else
        log "native llama-bench failed on $model; using the portable build"
        [[ -x $CACHE/portable/llama-bench ]] || build_flavour portable
        echo portable
    fi
}

# llama-bench JSON -> avg tokens/s of the single test it ran (llama-bench
# averages -r repetitions; we take the median of REPEATS single runs).
lb_once() {
    local out err v
    out=$(mktemp)
    err=$(mktemp)
    if "$BIN/llama-bench" -m "$MODEL" -r 1 -o json "$@" >"$out" 2>"$err" &&
        v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["avg_ts"])' "$out" 2>/dev/null); then
        echo "$v"
    else
        log "llama-bench $* failed: $(tail -3 "$err" | tr '\n' ' ')"
    fi
    rm -f "$out" "$err"
}

median() { python3 -c 'import sys,statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

# Median of the runs that gave a figure (a failed run is logged and left
# out); dies if none did.
lb_median() {
    local v=() x
    for ((i = 0; i < REPEATS; i++)); do
        x=$(lb_once "$@")
        [[ -n $x ]] && v+=("$x")
    done
    ((${#v[@]})) || die "llama-bench $* gave no figure"
    median "${v[@]}"
}

# llama-batched-bench, 16 sequences, 1 thread: decode tokens/s (S_TG). It
# prints its figures through llama.cpp's asynchronous logger, and on a model
# as small as stories260K the process sometimes exits (status 0) before the
# logger has written the line; such a run is repeated, up to 3 times.
bb_once() {
    local v
    for _ in 1 2 3; do
        v=$("$BIN/llama-batched-bench" -m "$MODEL" -c 4096 -b 2048 -ub 512 -npp 1 -ntg "$TOKENS" \
            -npl 16 -t 1 -tb 1 --output-format jsonl 2>&1 |
            python3 -c 'import json,sys
for l in sys.stdin:
    l=l.strip()
    if l.startswith("{") and "speed_tg" in l: print(json.loads(l)["speed_tg"])')
        if [[ -n $v ]]; then
            echo "$v"
            return
        fi
    done
}

bb_median() {
    local v=() x
    for ((i = 0; i < REPEATS; i++)); do
        x=$(bb_once)
        [[ -n $x ]] && v+=("$x") || log "llama-batched-bench gave no figure"
    done
    ((${#v[@]})) || die "llama-batched-bench gave no figure"
    median "${v[@]}"
}

peak_rss_kb() { # peak RSS of a command, KiB (GNU time)
    /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1
}

compare() {
    MODEL=$1
    [[ -f $MODEL ]] || die "no model file $MODEL"
    [[ -x $PW_BUILD/piecewise ]] || die "no $PW_BUILD/piecewise: build piecewise first"
    # The native build is enough unless it dies on this CPU (pick_flavour).
    fetch_source
    build_flavour native
    write_ready
    BIN=$CACHE/$(pick_flavour "$MODEL")
    log "llama.cpp from $BIN; $REPEATS repeats, $TOKENS decode tokens"
    local l_tg1 l_tg2 l_pp l_b16
    l_tg1=$(lb_median -p 0 -n "$TOKENS" -t 1)
    l_tg2=$(lb_median -p 0 -n "$TOKENS" -t 2)
    l_pp=$(lb_median -p 128 -n 0 -t 1)
    l_b16=$(bb_median)
    local l_rss p_rss
    l_rss=$(peak_rss_kb "$BIN/llama-bench" -m "$MODEL" -p 0 -n 16 -r 1 -t 1)
    # piecewise's side may fail on a model it cannot run yet (an
    # architecture or weight type it does not read): the table then keeps
    # llama.cpp's figures and says why piecewise has none.
    log "piecewise bench model (threads 1 and 2)"
    local pj perr p_err=""
    pj=$(mktemp)
    perr=$(mktemp)
    if ! "$PW_BUILD/piecewise" bench model "$MODEL" --batch 1,16 --threads 1,2 --tokens "$TOKENS" \
        --repeats "$REPEATS" --json >"$pj" 2>"$perr"; then
        p_err=$(grep -v '^\s*$' "$perr" | tail -1)
        p_err=${p_err#piecewise: }
        [[ -n $p_err ]] || p_err="bench model failed"
        log "piecewise: $p_err"
        : >"$pj"
        p_rss=0
    else
        # Peak RSS of one request decoding 16 tokens, against llama-bench's
        # 16-token decode (bench model holds several engines at once).
        p_rss=$(peak_rss_kb "$PW_BUILD/piecewise" run "$MODEL" -p "Hello" -n 16 --max-seqs 1 \
            --capture-sizes 1)
    fi
    rm -f "$perr"
    python3 - "$pj" "$l_tg1" "$l_tg2" "$l_pp" "$l_b16" "$l_rss" "$p_rss" "$BIN" "$p_err" <<'EOF'
import json, sys
p_err = sys.argv[9]
p = {} if p_err else json.load(open(sys.argv[1]))
l_tg1, l_tg2, l_pp, l_b16 = map(float, sys.argv[2:6])
l_rss, p_rss = int(sys.argv[6]), int(sys.argv[7])
scal = {(r["threads"], r["batch"]): r["decode_tok_s"] for r in p.get("thread_scaling", [])}
full = {r["batch"]: r["decode_tok_s"] for r in p.get("runs", []) if r["mode"] == "full"}
rows = [
    ("decode batch 1, 1 thread (tok/s)", l_tg1, scal.get((1, 1), full.get(1))),
    ("decode batch 1, 2 threads (tok/s)", l_tg2, scal.get((2, 1))),
    ("prefill 128 tokens, 1 thread (tok/s)", l_pp, p.get("prefill_tok_s")),
    ("decode 16 sequences, 1 thread (tok/s)", l_b16, scal.get((1, 16), full.get(16))),
    ("peak RSS (MiB, lower is better)", l_rss / 1024, p_rss / 1024 if not p_err else None),
]
print(f"llama.cpp: {sys.argv[8]}")
if p_err:
    print(f"piecewise: {p_err}")
print(f"{'':40s} {'llama.cpp':>10s} {'piecewise':>10s} {'ratio':>7s}")
for name, l, pw in rows:
    if pw is None:
        print(f"{name:40s} {l:10.1f} {'-':>10s}")
        continue
    print(f"{name:40s} {l:10.1f} {pw:10.1f} {pw / l:6.2f}x")
EOF
    rm -f "$pj"
}

case ${1:-} in
build) build_all ;;
compare)
    [[ $# -eq 2 ]] || die "usage: $0 compare MODEL.gguf"
    compare "$2"
    ;;
*)
    echo "usage: $0 build | compare MODEL.gguf" >&2
    exit 2
    ;;
esac
