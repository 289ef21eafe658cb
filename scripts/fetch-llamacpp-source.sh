#!/usr/bin/env bash
# The llama-cpp-python sdist from PyPI (it vendors a pinned llama.cpp),
# fetched with pip into $PW_LLAMACPP_CACHE/<version>/src (default
# ~/.cache/piecewise/llamacpp/0.3.36/src), never into the repository.
# llama.cpp's sources are under vendor/llama.cpp: its models/ folder holds
# the vocabulary-only GGUFs with their tokenizer test vectors
# (ggml-vocab-*.gguf, .inp, .out) that tests/model/test_tokenizer_vectors.c
# runs, and templates/*.jinja.
#
#   scripts/fetch-llamacpp-source.sh          fetch if needed, print the source folder
#   source scripts/fetch-llamacpp-source.sh   define pw_llamacpp_fetch_source (the peer
#                                             build script, bench/peers/llamacpp.sh, does)
#
# Environment: PW_LLAMACPP_CACHE, LLAMACPP_PY_VERSION (0.3.36).

# Fetches and unpacks the sdist unless it is there; prints nothing. Uses
# the caller's log/die when defined.
pw_llamacpp_fetch_source() {
    local version=${LLAMACPP_PY_VERSION:-0.3.36}
    local cache=${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/$version
    local src=$cache/src
    if [[ -f $src/vendor/llama.cpp/CMakeLists.txt ]]; then return 0; fi
    local say=echo
    if declare -F log >/dev/null; then say=log; fi
    mkdir -p "$cache/sdist"
    local tarball=$cache/sdist/llama_cpp_python-$version.tar.gz
    if [[ ! -f $tarball ]]; then
        $say "downloading llama-cpp-python==$version sdist from PyPI" >&2
        # --no-binary :all: also builds every build dependency from source
        # (minutes); only the sdist is needed, so fall back to wheels for those.
        if ! pip download --no-deps --no-binary :all: -d "$cache/sdist" \
            "llama-cpp-python==$version" >"$cache/sdist/pip.log" 2>&1; then
            pip download --no-deps --no-binary llama-cpp-python -d "$cache/sdist" \
                "llama-cpp-python==$version" >>"$cache/sdist/pip.log" 2>&1 ||
                { echo "[llamacpp] error: pip download failed (see $cache/sdist/pip.log)" >&2; return 1; }
        fi
    fi
    $say "extracting $tarball" >&2
    rm -rf "$src.tmp" && mkdir -p "$src.tmp"
    tar xzf "$tarball" -C "$src.tmp" --strip-components=1 || { echo "[llamacpp] error: cannot extract $tarball" >&2; return 1; }
    mv "$src.tmp" "$src"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    pw_llamacpp_fetch_source
    echo "${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/${LLAMACPP_PY_VERSION:-0.3.36}/src"
fi
