#!/usr/bin/env bash
# llama.cpp against piecewise on synthetic models at real sizes: every
# shape and weight type in one invocation.
#
#   bench/peers/synth-table.sh [--shapes 1b,8b] [--types q4_0,q4_1,...]
#                              [--repeats R] [--out DIR] [--keep]
#   bench/peers/synth-table.sh --help
#
# For each shape (default 1b) and type (default q4_0 q4_1 q8_0 q4_k q5_k
# q6_k q4_k_m), `piecewise synth` writes the model into its cache folder
# (docs/gguf.md), `bench/peers/llamacpp.sh compare --repeats R` measures it
# (docs/peers.md: decode at batch 1 with 1 and 2 threads, prefill of 128
# tokens, 16-sequence decode, peak RSS; both engines interleaved), and the
# file is deleted again unless --keep is given or it was there before (an
# 8B file takes 4.3-8.1 GB). Each comparison's full output goes to
# DIR/SHAPE-TYPE.txt (default: a new folder under /tmp); at the end a
# markdown table gives every file's ratios (piecewise's median over
# llama.cpp's), peak RSS against the file size, the load average at the
# start and end of its comparison, and the start-up time (load, one prompt
# token, one new token; median of 3) of each engine.
#
# Before writing a file the script checks that the disk holding the cache
# keeps 1 GiB free after it; a shape that does not fit is skipped with a
# message. A comparison that fails is reported in the table and the
# script exits with status 1 at the end; usage errors exit with 2.
#
# Environment: PW_BUILD (piecewise build folder, ./build), and what
# bench/peers/llamacpp.sh reads (PW_LLAMACPP_CACHE, ...).
set -euo pipefail

HERE=$(cd "$(dirname "$0")/../.." && pwd)
PW_BUILD=${PW_BUILD:-$HERE/build}
PW=$PW_BUILD/piecewise
SHAPES=1b
TYPES=q4_0,q4_1,q8_0,q4_k,q5_k,q6_k,q4_k_m
REPEATS=5
OUT=""
KEEP=0

log() { printf '[synth-table] %s\n' "$*" >&2; }
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}
usage_error() {
    log "error: $*"
    echo "usage: $0 [--shapes 1b,3b,8b] [--types q4_0,...] [--repeats R] [--out DIR] [--keep] | --help" >&2
    exit 2
}

while (($#)); do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --keep) KEEP=1; shift ;;
    --shapes | --types | --repeats | --out)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --shapes) SHAPES=$2 ;;
        --types) TYPES=$2 ;;
        --repeats) REPEATS=$2 ;;
        --out) OUT=$2 ;;
        esac
        shift 2
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
done

IFS=, read -r -a shape_list <<<"$SHAPES"
IFS=, read -r -a type_list <<<"$TYPES"
((${#shape_list[@]})) || usage_error "--shapes is empty"
((${#type_list[@]})) || usage_error "--types is empty"
for s in "${shape_list[@]}"; do
    case $s in tiny | 1b | 3b | 8b) ;; *) usage_error "unknown shape '$s' (1b, 3b, 8b, or tiny for a check of the script)" ;; esac
done
for t in "${type_list[@]}"; do
    case $t in
    q4_0 | q4_1 | q8_0 | q5_0 | q5_1 | q4_k | q5_k | q6_k | q4_k_m) ;;
    *) usage_error "unknown type '$t' (q4_0 q4_1 q8_0 q5_0 q5_1 q4_k q5_k q6_k q4_k_m)" ;;
    esac
done
if ! [[ $REPEATS =~ ^[1-9][0-9]{0,2}$ ]] || ((REPEATS > 100)); then
    usage_error "--repeats '$REPEATS': expected a whole number from 1 to 100"
fi
[[ -x $PW ]] || { log "error: no $PW: build piecewise first (or set PW_BUILD)"; exit 1; }
if [[ -z $OUT ]]; then
    OUT=$(mktemp -d /tmp/synth-table.XXXXXX)
else
    mkdir -p "$OUT" || { log "error: cannot create $OUT"; exit 1; }
fi
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/piecewise/synth
mkdir -p "$CACHE"

# The largest file of a shape (q8_0), in MiB, for the disk check.
shape_mib() { case $1 in tiny) echo 64 ;; 1b) echo 1300 ;; 3b) echo 3400 ;; 8b) echo 8100 ;; esac; }
free_mib() { df -Pm "$CACHE" | awk 'NR == 2 { print $4 }'; }

# Median wall seconds of 3 runs of a command (start-up: load, one prompt
# token, one new token), or "-" when it fails.
startup_s() {
    local v=() tf
    tf=$(mktemp)
    for _ in 1 2 3; do
        if ! /usr/bin/time -o "$tf" -f '%e' "$@" >/dev/null 2>&1; then
            rm -f "$tf"
            echo -
            return
        fi
        v+=("$(tail -1 "$tf")")
    done
    rm -f "$tf"

    python3 -c 'import statistics,sys; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.2f}")' "${v[@]}"
}

LLAMA_BENCH=""
failed=0
rows=()
for shape in "${shape_list[@]}"; do
    for type in "${type_list[@]}"; do
        name=$shape-$type
        file=$CACHE/$name.gguf
        existed=0
        [[ -e $file ]] && existed=1
        if ((!existed)) && (($(free_mib) < $(shape_mib "$shape") + 1024)); then
            log "$name: skipped, $(free_mib) MiB free on the cache's disk (needs $(shape_mib "$shape") + 1024)"
            rows+=("| $name | skipped: disk | | | | | | | |")
            continue
        fi
        log "$name: writing $file"
        if ! file=$("$PW" synth --shape "$shape" --type "$type" 2>"$OUT/$name.synth.err"); then
            log "$name: synth failed: $(tail -1 "$OUT/$name.synth.err")"
            rows+=("| $name | synth failed | | | | | | | |")
            failed=1
            continue
        fi
        log "$name: comparing ($REPEATS rounds) into $OUT/$name.txt"
        if PW_BUILD=$PW_BUILD "$HERE/bench/peers/llamacpp.sh" compare --repeats "$REPEATS" "$file" \
            >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
            bin=$(sed -n 's/^llama.cpp: \([^ ]*\) .*/\1/p' "$OUT/$name.txt")
            LLAMA_BENCH=$bin/llama-bench
            pw_up=$(startup_s "$PW" run "$file" -p Hello -n 1 --max-seqs 1 --capture-sizes 1 -q)
            l_up=$(startup_s "$LLAMA_BENCH" -m "$file" -p 1 -n 1 -r 1 -t 1)
            rows+=("$(python3 - "$OUT/$name.txt" "$name" "$(stat -c %s "$file")" "$pw_up" "$l_up" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
name, size, pw_up, l_up = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def row(label):
    for line in text.splitlines():
        if line.startswith("| " + label):
            return [c.strip() for c in line.strip("|").split("|")]
    return None
def ratio(label):
    r = row(label)
    return f"{r[3]} ({r[4]}, {r[5]})" if r else "-"
rss = row("peak RSS")
mib = size / 2**20
rss_cell = f"{float(rss[1]) / mib:.2f}x / {float(rss[2]) / mib:.2f}x" if rss and rss[1] != "-" and rss[2] != "-" else "-"
load = re.findall(r"load average ([0-9.]+)", text)
load_cell = f"{load[0]}-{load[-1]}" if load else "-"
print(f"| {name} | {ratio('decode batch 1, 1 thread')} | {ratio('decode batch 1, 2 threads')} "
      f"| {ratio('prefill 128 tokens')} | {ratio('decode 16 sequences')} | {rss_cell} "
      f"| {l_up} / {pw_up} | {mib:.0f} | {load_cell} |")
PY
)")
        else
            log "$name: compare failed: $(tail -1 "$OUT/$name.err")"
            rows+=("| $name | compare failed (see $OUT/$name.err) | | | | | | | |")
            failed=1
        fi
        if ((!existed && !KEEP)); then rm -f "$file"; fi
    done
done

echo
echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'), $(nproc) CPUs; $REPEATS rounds per file; outputs in $OUT"
echo "ratio: piecewise median / llama.cpp median (pair median, pair min-max); RSS: peak RSS / file size, llama.cpp / piecewise"
echo
echo "| file | decode b1, 1 thread | decode b1, 2 threads | prefill 128 | decode 16 seqs | peak RSS / file | start-up s, llama.cpp / piecewise | file MiB | load average |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
