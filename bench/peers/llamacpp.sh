#!/usr/bin/env bash
# llama.cpp as a peer for piecewise's CPU path.
#
#   bench/peers/llamacpp.sh build [--isa native|avx2]
#   bench/peers/llamacpp.sh compare [--repeats R] [--runs N] [--isa native|avx2] [--tokens N] MODEL.gguf
#   bench/peers/llamacpp.sh --help
#
# Source: the llama-cpp-python sdist from PyPI (it vendors a pinned
# llama.cpp), fetched with pip, version $LLAMACPP_PY_VERSION (0.3.36). It
# builds llama-bench, llama-batched-bench and llama-server, all three in one
# go, into $PW_LLAMACPP_CACHE/<version>/<flavour> (default
# ~/.cache/piecewise/llamacpp), never into the repository, and writes
# $PW_LLAMACPP_CACHE/READY listing the built binaries (others wait on it).
#
#   native    -DGGML_NATIVE=ON: whatever this CPU has (AVX-512, VNNI, AMX)
#   noamx     native without AMX (-march=native -mno-amx-*): AVX-512 and VNNI
#             where the CPU has them. Built by compare, only when the native
#             binary dies on a CPU that lists AMX: a VM may list AMX and still
#             refuse its instructions (SIGILL in ggml's AMX matmul, seen here
#             on Q4_1 weights), and this is then the fastest llama.cpp that runs
#   portable  -DGGML_NATIVE=OFF: AVX2+FMA+F16C, no AVX-512 or AMX; used when
#             neither of the above runs
#   avx2      (--isa avx2) every x86 switch spelled out: SSE4.2, AVX, AVX2,
#             FMA, F16C, BMI2 on; AVX-512 (all of it), AVX-VNNI, AMX off
#
# `build` builds native and portable (or the avx2 flavour with --isa avx2).
#
# `compare` prints, for a GGUF file, llama.cpp and piecewise side by side:
# decode at batch 1 with 1 and 2 threads (llama-bench tg), prefill of 128
# tokens with 1 thread (llama-bench pp128), batched decode of 16 sequences
# (llama-batched-bench, 1 thread) and peak RSS of one 16-token decode each
# (llama-bench -n 16; piecewise run -n 16, one request, graphs captured for
# batch 1 only; GNU time). piecewise's throughputs come from
# `build/piecewise bench model MODEL --json` (FULL mode for decode).
#
# The host may drift by 2x within minutes, so the two engines are
# interleaved: R rounds (--repeats, default 5), and in each round every
# measurement runs llama.cpp once and piecewise once, back to back, the
# order flipped every round. Each row reports both engines' medians, the
# ratio of the medians, and the median and min-max of the R per-round
# (paired) ratios, so no single drift decides a row; the per-round figures
# follow the table. The CPU model and load average are printed at the start
# and at the end.
#
# --runs N (default 1): each engine's figure in a round is the median of N
# back-to-back runs (llama-bench -r N, the median of its samples_ts;
# llama-batched-bench N times; piecewise bench model --repeats N). For a
# model as small as stories260K a 64-token piecewise decode lasts 1-1.5 ms,
# so one timer interrupt or preemption moves a single run by tens
# of percent; N runs per engine per round take that out of both sides alike.
# Peak RSS is one run either way.
#
# --isa native (default): llama.cpp's native build (noamx, then portable,
# where it dies) against piecewise's best kernel copies (PW_KERNEL_ISA=auto).
# --isa avx2: llama.cpp's avx2 build against piecewise with
# PW_KERNEL_ISA=avx2, the AVX2 paths of both. On a CPU with AVX-512 that is
# AVX2 code on an AVX-512 machine (its caches, clocks and memory), not an
# AVX2-only CPU; the output says which it is.
#
# Where piecewise cannot run MODEL (an architecture or weight type it does
# not read yet), the table keeps llama.cpp's figures and prints
# "piecewise: <its error>" instead. Bad input (no such model, an unknown
# option or value, a llama.cpp build that fails, a model llama.cpp cannot
# load) stops the script with "[llamacpp] error: ..." on stderr and exit
# status 1 (2 for usage errors).
#
# Environment: PW_LLAMACPP_CACHE, LLAMACPP_PY_VERSION, JOBS (build jobs, 2),
# PW_BUILD (piecewise build folder, build), REPEATS (rounds, 5), RUNS (runs
# per measurement, 1), TOKENS (decode tokens, 64); the options override
# REPEATS, RUNS and TOKENS.
# PW_PEERS_CPUINFO (default /proc/cpuinfo) lets the tests pose as another CPU.
set -euo pipefail

VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
ROOT=${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}
CACHE=$ROOT/$VERSION
JOBS=${JOBS:-2}
REPEATS=${REPEATS:-5}
RUNS=${RUNS:-1}
TOKENS=${TOKENS:-64}
ISA=native
TOOLS=(llama-bench llama-batched-bench llama-server)
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PW_BUILD=${PW_BUILD:-$HERE/build}
CPUINFO=${PW_PEERS_CPUINFO:-/proc/cpuinfo} # another file only in tests

log() { printf '[llamacpp] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage_error() {
    log "error: $*"
    echo "usage: $0 build [--isa native|avx2] | compare [--repeats R] [--runs N] [--isa native|avx2] [--tokens N] MODEL.gguf | --help" >&2
    exit 2
}

# The sdist, fetched the one way the project fetches it.
source "$HERE/scripts/fetch-llamacpp-source.sh"
fetch_source() { pw_llamacpp_fetch_source || die "cannot fetch the llama.cpp source"; }

# The ISA switches of each flavour (GGML_* options of ggml/CMakeLists.txt),
# one per line (a value may hold spaces).
# avx2 spells every x86 switch out, so that neither a newer ggml default
# nor -march=native can bring AVX-512, AVX-VNNI or AMX code in: it is the
# AVX2 path alone, for comparing against piecewise's AVX2 kernels
# (PW_KERNEL_ISA=avx2) on a CPU that has more.
flavour_flags() {
    case $1 in
    native) echo -DGGML_NATIVE=ON ;;
    # ggml compiles its AMX code where the compiler defines __AMX_INT8__,
    # which -march=native does on such a CPU whatever GGML_AMX_* say; an
    # explicit -mno-amx-* wins over -march=native in either order (GCC).
    noamx) printf '%s\n' -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
        -DGGML_AMX_BF16=OFF "-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX" ;;
    portable) echo -DGGML_NATIVE=OFF ;;
    avx2) printf '%s\n' -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON \
        -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF \
        -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
        -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF ;;
    *) die "unknown llama.cpp flavour '$1'" ;;
    esac
}

NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

# build_flavour native|noamx|portable|avx2
build_flavour() {
    local flavour=$1 out=$CACHE/$1 bdir=$CACHE/build-$1 flags=()
    mapfile -t flags < <(flavour_flags "$flavour")
    local have=1
    for t in "${TOOLS[@]}"; do [[ -x $out/$t ]] || have=0; done
    if ((have)); then return; fi
    command -v cmake >/dev/null || die "cmake not found (needed to build llama.cpp)"
    log "building $flavour (${flags[*]}, -j$JOBS) in $bdir"
    cmake -S "$CACHE/src/vendor/llama.cpp" -B "$bdir" -DCMAKE_BUILD_TYPE=Release \
        "${flags[@]}" -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DGGML_OPENMP=OFF >"$CACHE/cmake-$flavour.log" 2>&1 ||
        die "cmake of llama.cpp ($flavour) failed (see $CACHE/cmake-$flavour.log)"
    if [[ $flavour == avx2 ]]; then
        # ggml prints the compiler flags of its CPU backend; refuse a build
        # that would not be the AVX2 path alone.
        local variant
        variant=$(grep -m1 'Adding CPU backend variant' "$CACHE/cmake-$flavour.log" || true)
        [[ $variant == *-mavx2* && $variant != *avx512* && $variant != *amx* &&
            $variant != *avxvnni* && $variant != *march=native* ]] ||
            die "llama.cpp avx2 configuration is not AVX2-only: '${variant:-no CPU backend line}' (see $CACHE/cmake-$flavour.log)"
    fi
    nice -n 10 cmake --build "$bdir" -j"$JOBS" --target "${TOOLS[@]}" \
        >"$CACHE/build-$flavour.log" 2>&1 ||
        die "build of llama.cpp ($flavour) failed (see $CACHE/build-$flavour.log)"
    if [[ $flavour == noamx ]] && objdump -d "$bdir/bin/llama-bench" 2>/dev/null | grep -qm1 ldtilecfg; then
        die "llama.cpp noamx build still holds AMX code (ldtilecfg in llama-bench; see $CACHE/cmake-$flavour.log)"
    fi
    mkdir -p "$out"
    for t in "${TOOLS[@]}"; do cp "$bdir/bin/$t" "$out/$t"; done
}

write_ready() {
    local tmp=$ROOT/READY.tmp
    : >"$tmp"
    for f in native noamx portable avx2; do
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


build_avx2() {
    fetch_source
    build_flavour avx2
    write_ready
}

# One short prefill and decode of MODEL with a flavour's llama-bench; on
# failure its last stderr lines go to $WORK/probe.err.
# A process killed by a signal (SIGILL on an instruction the CPU refuses)
# writes nothing itself, so the signal is named.
flavour_runs() {
    local rc=0
    "$CACHE/$1/llama-bench" -m "$MODEL" -p 16 -n 4 -r 1 -t 1 >/dev/null 2>"$WORK/probe.err" || rc=$?
    if ((rc > 128)); then
        echo "killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?'))" >>"$WORK/probe.err"
    fi
    return $rc
}

probe_error() { grep -v '^\s*$' "$WORK/probe.err" | tail -2 | tr '\n' ' '; }

# The llama.cpp build to compare with (sets BIN). native: the native build
# unless it dies on MODEL (SIGILL and the like); then, on a CPU that lists
# AMX, the native build without AMX (built now if need be); else portable.
# avx2: the avx2 build, which must run.
pick_build() {
    fetch_source
    if [[ $ISA == avx2 ]]; then
        build_avx2
        flavour_runs avx2 || die "llama.cpp's avx2 build cannot run $MODEL: $(probe_error)"
        BIN=$CACHE/avx2
        return
    fi
    build_flavour native
    write_ready
    if flavour_runs native; then
        BIN=$CACHE/native
        return
    fi
    if cpu_lists_amx; then
        log "native llama-bench failed on $MODEL ($(probe_error)); this CPU lists AMX: trying the native build without AMX"
        build_flavour noamx
        write_ready
        if flavour_runs noamx; then
            BIN=$CACHE/noamx
            return
        fi
        log "native llama-bench without AMX failed on $MODEL ($(probe_error)); using the portable build"
    else
        log "native llama-bench failed on $MODEL ($(probe_error)); using the portable build"
    fi
    build_flavour portable
    write_ready
    flavour_runs portable || die "llama.cpp (native$(cpu_lists_amx && echo ", noamx") and portable builds) cannot run $MODEL: $(probe_error)"
    BIN=$CACHE/portable
}

# llama-bench JSON -> tokens/s of the single test it ran (-r RUNS: the
# median of its samples_ts, or its avg_ts where it gives no samples), or
# nothing (logged) when the run fails.
lb_once() {
    local out=$WORK/lb.json err=$WORK/lb.err v
    if "$BIN/llama-bench" -m "$MODEL" -r "$RUNS" -o json "$@" >"$out" 2>"$err" &&
        v=$(python3 -c 'import json,statistics,sys
t = json.load(open(sys.argv[1]))[0]
print(statistics.median(t["samples_ts"]) if t.get("samples_ts") else t["avg_ts"])' "$out" 2>/dev/null); then
        echo "$v"
    else
        log "llama-bench $* failed: $(tail -3 "$err" | tr '\n' ' ')"
    fi
}

# llama-batched-bench, 16 sequences, 1 thread: decode tokens/s (S_TG), the
# median of RUNS runs (it has no repetitions of its own).
bb_once() {
    local vals=() v i
    for ((i = 0; i < RUNS; i++)); do
        v=$(bb_run)
        [[ -z $v ]] || vals+=("$v")
    done
    ((${#vals[@]})) || return 0
    python3 -c 'import statistics,sys; print(statistics.median(float(v) for v in sys.argv[1:]))' "${vals[@]}"
}

# One llama-batched-bench run. It prints its figures through llama.cpp's
# asynchronous logger, and on a model as small as stories260K the process
# sometimes exits (status 0) before the logger has written the line; such a
# run is repeated, up to 3 times.
bb_run() {
    local v
    for _ in 1 2 3; do
        v=$("$BIN/llama-batched-bench" -m "$MODEL" -c 4096 -b 2048 -ub 512 -npp 1 -ntg "$TOKENS" \
            -npl 16 -t 1 -tb 1 --output-format jsonl 2>&1 |
            python3 -c 'import json,sys
for l in sys.stdin:
    l=l.strip()
    if l.startswith("{") and "speed_tg" in l: print(json.loads(l)["speed_tg"])' || true)
        if [[ -n $v ]]; then
            echo "$v"
            return
        fi
    done
    log "llama-batched-bench gave no figure"
}

# Peak RSS of a command in KiB (GNU time), or nothing (logged) when the
# command fails.
rss_once() {
    local err=$WORK/rss.err
    if /usr/bin/time -o "$WORK/rss" -f '%M' "$@" >/dev/null 2>"$err"; then
        tail -1 "$WORK/rss"
    else
        log "$(basename "$1") for peak RSS failed: $(tail -2 "$err" | tr '\n' ' ')"
    fi
}

# piecewise bench model at one batch size and thread count, JSON into
# $WORK/pw.json. On failure the first error becomes P_ERR and piecewise is
# not run again (a model it cannot read fails every time).
pw_bench() {
    [[ -z $P_ERR ]] || return 1
    if PW_KERNEL_ISA=$PW_ISA "$PW_BUILD/piecewise" bench model "$MODEL" --batch "$1" --threads "$2" --lean \
        --tokens "$TOKENS" --repeats "$RUNS" --json >"$WORK/pw.json" 2>"$WORK/pw.err"; then
        return 0
    fi
    P_ERR=$(grep -v '^\s*$' "$WORK/pw.err" | tail -1 || true)
    P_ERR=${P_ERR#piecewise: }
    [[ -n $P_ERR ]] || P_ERR="bench model failed"
    log "piecewise: $P_ERR"
    return 1
}

# A figure of $WORK/pw.json: "full:B" (FULL decode tok/s at batch B) or
# "prefill" (prefill tok/s).
pw_field() {
    python3 - "$WORK/pw.json" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
what = sys.argv[2]
if what == "prefill":
    print(j["prefill_tok_s"])
else:
    b = int(what.split(":")[1])
    print(next(r["decode_tok_s"] for r in j["runs"] if r["mode"] == "full" and r["batch"] == b))
PY
}

# record ENGINE KEY ROUND VALUE: one line "ROUND VALUE" ("-" when none) in
# $WORK/ENGINE.KEY.
record() { echo "$3 ${4:--}" >>"$WORK/$1.$2"; }

# piecewise's side of one measurement, recorded; KEY tg1 also records the
# prefill figure of the same run under pp (bench model measures both).
pw_measure() {
    local key=$1 r=$2
    case $key in
    tg1)
        if pw_bench 1 1; then
            record p tg1 "$r" "$(pw_field full:1)"
            record p pp "$r" "$(pw_field prefill)"
        else
            record p tg1 "$r"
            record p pp "$r"
        fi
        ;;
    tg2) if pw_bench 1 2; then record p tg2 "$r" "$(pw_field full:1)"; else record p tg2 "$r"; fi ;;
    b16) if pw_bench 16 1; then record p b16 "$r" "$(pw_field full:16)"; else record p b16 "$r"; fi ;;
    rss)
        if [[ -z $P_ERR ]]; then
            record p rss "$r" "$(PW_KERNEL_ISA=$PW_ISA rss_once "$PW_BUILD/piecewise" run "$MODEL" \
                -p Hello -n 16 --max-seqs 1 --capture-sizes 1)"
        else
            record p rss "$r"
        fi
        ;;
    esac
}

l_measure() {
    local key=$1 r=$2
    case $key in
    tg1) record l tg1 "$r" "$(lb_once -p 0 -n "$TOKENS" -t 1)" ;;
    tg2) record l tg2 "$r" "$(lb_once -p 0 -n "$TOKENS" -t 2)" ;;
    pp) record l pp "$r" "$(lb_once -p 128 -n 0 -t 1)" ;;
    b16) record l b16 "$r" "$(bb_once)" ;;
    rss) record l rss "$r" "$(rss_once "$BIN/llama-bench" -m "$MODEL" -p 0 -n 16 -r 1 -t 1)" ;;
    esac
}

cpu_model() {
    local m
    m=$(grep -m1 '^model name' "$CPUINFO" 2>/dev/null | sed 's/^[^:]*: *//' || true)
    echo "${m:-unknown CPU}"
}

# (a here-string, not a pipe: under pipefail, grep -q exiting early could
# fail the pipeline by SIGPIPE)
cpu_has() { grep -qw -- "$1" <<<"$(grep -m1 '^flags' "$CPUINFO" 2>/dev/null)"; }

# Whether the CPU lists AMX (noamx is then the next build to try).
cpu_lists_amx() { cpu_has amx_int8 || cpu_has amx_tile; }

# What the CPU has beyond AVX2, for the header.
cpu_extras() {
    local x=() f
    for f in avx512f avx512_vnni avx_vnni amx_int8; do cpu_has "$f" && x+=("$f"); done
    ((${#x[@]})) && echo "${x[*]}" || echo "none"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }

compare() {
    [[ -f $MODEL ]] || die "no model file $MODEL"
    [[ -r $MODEL ]] || die "model file $MODEL is not readable"
    [[ -x $PW_BUILD/piecewise ]] || die "no $PW_BUILD/piecewise: build piecewise first (or set PW_BUILD)"
    command -v python3 >/dev/null || die "python3 not found (it reads the JSON figures)"
    [[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) not found: it measures peak RSS"
    local what
    if [[ $ISA == avx2 ]]; then
        for f in avx2 fma f16c; do
            cpu_has "$f" || die "this CPU has no $f: --isa avx2 needs AVX2, FMA and F16C"
        done
        PW_ISA=avx2
        if cpu_has avx512f; then
            what="AVX2 code on an AVX-512 machine (this CPU has: $(cpu_extras)), not an AVX2-only CPU: caches, clocks and memory are this machine's"
        else
            what="AVX2 code on a CPU without AVX-512 (extras: $(cpu_extras))"
        fi
        what="llama.cpp avx2 build (AVX-512, AVX-VNNI, AMX off) against piecewise PW_KERNEL_ISA=avx2; $what"
    else
        PW_ISA=auto
        what="llama.cpp native build, or the fallback the llama.cpp line names, against piecewise PW_KERNEL_ISA=auto (CPU extras: $(cpu_extras))"
    fi
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    P_ERR=""
    pick_build
    local start_load start_time
    start_load=$(loadavg)
    start_time=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    log "llama.cpp from $BIN; $REPEATS rounds of $RUNS run(s) per measurement, $TOKENS decode tokens, piecewise PW_KERNEL_ISA=$PW_ISA"
    # both engines map MODEL from the page cache: the same pages for both,
    # in 2 MiB folios where the kernel makes them (docs/gguf.md)
    log "page cache: $("$PW_BUILD/piecewise" cache "$MODEL" | tail -1)"
    # tg1's piecewise run also gives the prefill figure: its llama.cpp
    # partners (tg1 and pp) sit on either side of it, in turn.
    local r key
    for ((r = 1; r <= REPEATS; r++)); do
        log "round $r/$REPEATS (load average $(loadavg))"
        if ((r % 2)); then
            l_measure tg1 "$r"; pw_measure tg1 "$r"; l_measure pp "$r"
            for key in tg2 b16 rss; do l_measure $key "$r"; pw_measure $key "$r"; done
        else
            l_measure pp "$r"; pw_measure tg1 "$r"; l_measure tg1 "$r"
            for key in tg2 b16 rss; do pw_measure $key "$r"; l_measure $key "$r"; done
        fi
    done
    local end_load end_time
    end_load=$(loadavg)
    end_time=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    echo "model: $MODEL"
    echo "CPU: $(cpu_model), $(nproc) CPUs"
    echo "ISA: $what"
    echo "llama.cpp: $BIN (llama-cpp-python $VERSION sdist)"
    echo "piecewise: $PW_BUILD/piecewise, PW_KERNEL_ISA=$PW_ISA"
    echo "start: $start_time, load average $start_load"
    echo "end:   $end_time, load average $end_load"
    echo "$REPEATS rounds; each measurement alternates llama.cpp and piecewise, order flipped every round; each figure the median of $RUNS run(s); $TOKENS decode tokens"
    [[ -z $P_ERR ]] || echo "piecewise: $P_ERR"
    python3 - "$WORK" <<'PY'
import os, statistics, sys
work = sys.argv[1]

def load(name):
    vals = {}
    path = os.path.join(work, name)
    if os.path.exists(path):
        for line in open(path):
            r, v = line.split()
            if v != "-":
                vals[int(r)] = float(v)
    return vals

rows = [
    ("decode batch 1, 1 thread (tok/s)", "tg1", 1.0),
    ("decode batch 1, 2 threads (tok/s)", "tg2", 1.0),
    ("prefill 128 tokens, 1 thread (tok/s)", "pp", 1.0),
    ("decode 16 sequences, 1 thread (tok/s)", "b16", 1.0),
    ("peak RSS (MiB, lower is better)", "rss", 1.0 / 1024),
]
head = ("", "llama.cpp", "piecewise", "ratio", "pair median", "pair min-max", "pairs")
fmt = "| {:37s} | {:>9s} | {:>9s} | {:>6s} | {:>11s} | {:>13s} | {:>5s} |"
print()
print("ratio: piecewise median / llama.cpp median; pair: piecewise / llama.cpp within a round")
print(fmt.format(*head))
print("|" + "|".join("-" * len(c) for c in fmt.format(*head).split("|")[1:-1]) + "|")
detail = []
for name, key, scale in rows:
    l, p = load("l." + key), load("p." + key)
    lm = statistics.median(l.values()) * scale if l else None
    pm = statistics.median(p.values()) * scale if p else None
    pairs = [p[r] / l[r] for r in sorted(l) if r in p and l[r] > 0]
    cell = lambda x, f="{:.1f}": f.format(x) if x is not None else "-"
    ratio = cell(pm / lm if lm and pm is not None else None, "{:.2f}x")
    pmed = cell(statistics.median(pairs) if pairs else None, "{:.2f}x")
    span = f"{min(pairs):.2f}-{max(pairs):.2f}x" if pairs else "-"
    print(fmt.format(name, cell(lm), cell(pm), ratio, pmed, span, str(len(pairs))))
    rounds = sorted(set(l) | set(p))
    show = lambda d, r: f"{d[r] * scale:.1f}" if r in d else "-"
    detail.append(f"  {key:4s} llama.cpp {' '.join(show(l, r) for r in rounds)}"
                  f" | piecewise {' '.join(show(p, r) for r in rounds)}")
print()
print("per round (in order):")
print("\n".join(detail))
PY
}

# Options after the command word: sets ISA, REPEATS, TOKENS and MODEL.
parse_options() {
    local cmd=$1
    shift
    MODEL=""
    while (($#)); do
        case $1 in
        -h | --help) usage; exit 0 ;;
        --isa | --repeats | --runs | --tokens)
            (($# >= 2)) || usage_error "$1 needs a value"
            case $1 in
            --isa) ISA=$2 ;;
            --repeats) REPEATS=$2 ;;
            --runs) RUNS=$2 ;;
            --tokens) TOKENS=$2 ;;
            esac
            shift 2
            ;;
        --isa=* | --repeats=* | --runs=* | --tokens=*)
            local k=${1%%=*} v=${1#*=}
            case $k in --isa) ISA=$v ;; --repeats) REPEATS=$v ;; --runs) RUNS=$v ;; --tokens) TOKENS=$v ;; esac
            shift
            ;;
        -*) usage_error "unknown option '$1'" ;;
        *)
            [[ $cmd == compare ]] || usage_error "build takes no model ('$1')"
            [[ -z $MODEL ]] || usage_error "one model only ('$MODEL', then '$1')"
            MODEL=$1
            shift
            ;;
        esac
    done
    [[ $ISA == native || $ISA == avx2 ]] || usage_error "--isa '$ISA': expected native or avx2"
    if ! [[ $REPEATS =~ ^[1-9][0-9]{0,2}$ ]] || ((REPEATS > 100)); then usage_error "--repeats (or REPEATS) '$REPEATS': expected a whole number from 1 to 100"; fi
    if ! [[ $RUNS =~ ^[1-9][0-9]{0,2}$ ]] || ((RUNS > 100)); then usage_error "--runs (or RUNS) '$RUNS': expected a whole number from 1 to 100"; fi
    if ! [[ $TOKENS =~ ^[1-9][0-9]{0,3}$ ]] || ((TOKENS > 4000)); then usage_error "--tokens (or TOKENS) '$TOKENS': expected a whole number from 1 to 4000"; fi
    [[ $cmd == build || -n $MODEL ]] || usage_error "compare needs a MODEL.gguf"
}

usage() {
    cat <<USAGE
usage: $0 build [--isa native|avx2]
       $0 compare [--repeats R] [--runs N] [--isa native|avx2] [--tokens N] MODEL.gguf
       $0 --help

build     fetch llama.cpp (llama-cpp-python $VERSION sdist, PyPI) and build llama-bench,
          llama-batched-bench and llama-server into $CACHE/<flavour>:
          native and portable, or avx2 with --isa avx2
compare   llama.cpp against piecewise on MODEL.gguf: decode batch 1 (1 and 2 threads),
          prefill 128 tokens, batched decode 16 sequences, peak RSS; R rounds, each
          measurement alternating the two engines (order flipped every round);
          per-engine medians, the ratio of medians, the median and min-max of the
          per-round ratios

options:
  --repeats R   rounds (default \$REPEATS or 5)
  --runs N      runs per engine and measurement in a round, their median kept
                (default \$RUNS or 1; 5 for a model as small as stories260K, whose
                decode runs last milliseconds)
  --isa ISA     native: llama.cpp native build vs piecewise's best kernels (default)
                avx2: llama.cpp built AVX2-only (AVX-512, AVX-VNNI, AMX off) vs piecewise
                PW_KERNEL_ISA=avx2
  --tokens N    decode tokens per request (default \$TOKENS or 64)

environment: PW_LLAMACPP_CACHE (cache, ~/.cache/piecewise/llamacpp), LLAMACPP_PY_VERSION,
JOBS (build jobs, 2), PW_BUILD (piecewise build folder, ./build)
USAGE
}

case ${1:-} in
-h | --help) usage ;;
build)
    parse_options "$@"
    if [[ $ISA == avx2 ]]; then build_avx2; else build_all; fi
    ;;
compare)
    parse_options "$@"
    compare
    ;;
"") usage_error "no command" ;;
*) usage_error "unknown command '$1'" ;;
esac
