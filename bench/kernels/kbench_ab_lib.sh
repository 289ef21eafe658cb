# Shared steps of the in-process A/B kernel benchmarks (kbench_ab.sh,
# kbench_kq_ab.sh), sourced by them: the base commit's kernel sources in a
# scratch folder, the compiler flags of an ISA copy, and the link CMake
# uses for a kernel bench target. Expects HERE (the repository root).

# kb_fetch_base BASE DIR FILE...: src/ops/cpu/FILE at commit BASE into
# DIR/ops/cpu/, so that `-I DIR` finds the base's headers first.
kb_fetch_base() {
    local base=$1 dir=$2 f
    shift 2
    mkdir -p "$dir/ops/cpu"
    for f in "$@"; do
        git -C "$HERE" show "$base:src/ops/cpu/$f" >"$dir/ops/cpu/$f"
    done
}

# kb_copy_flags COPY: the target flags of an ISA copy (fma, avxvnni,
# avx512vnni) in KB_FLAGS, and the common ones in KB_CFLAGS.
kb_copy_flags() {
    case $1 in
    fma) KB_FLAGS="-mavx2 -mfma -mf16c" ;;
    avxvnni) KB_FLAGS="-mavx2 -mfma -mf16c -mavxvnni" ;;
    avx512vnni) KB_FLAGS="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni" ;;
    *) echo "unknown copy $1" >&2; exit 2 ;;
    esac
    KB_CFLAGS="-O3 -DNDEBUG -std=c11 -D_GNU_SOURCE -Wno-psabi -I$HERE/include -I$HERE/src -I$HERE/src/core -I$HERE/build"
}

# kb_link TARGET OUT OBJ...: links the objects as CMake links the bench
# target TARGET (the same libraries: MPI, OpenBLAS and the CUDA runtime
# where the build found them).
kb_link() {
    local target=$1 out=$2 kb=$HERE/build/CMakeFiles/$1.dir
    shift 2
    [[ -e $kb/linkLibs.rsp && -e $kb/link.txt ]] ||
        { echo "$(basename "$0"): build $target first (cmake --build build)" >&2; exit 2; }
    local -a linker dirs
    read -r -a linker <<<"$(sed 's/ .*//' "$kb/link.txt")"
    read -r -a dirs <<<"$(sed 's/.*linkLibs.rsp//' "$kb/link.txt")"
    (cd "$HERE/build" && "${linker[@]}" "$@" @"$kb/linkLibs.rsp" "${dirs[@]//\"/}" -o "$out")
}
