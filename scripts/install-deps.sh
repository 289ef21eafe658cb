#!/usr/bin/env bash
# Installs the build and test dependencies that are missing (Debian/Ubuntu).
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -e /usr/include/openblas/cblas.h ] \
  || dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
command -v python3 >/dev/null || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# clang with libFuzzer's runtime, for scripts/fuzz.sh
command -v clang >/dev/null || need+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 \
  || need+=(libclang-rt-dev)
# piecewise serve: JSON (cJSON; its HTTP server is its own); python3-venv
# for the serve tests' virtualenv with the openai client
pkg-config --exists libcjson 2>/dev/null || dpkg -s libcjson-dev >/dev/null 2>&1 || need+=(libcjson-dev)
# tensor parallelism (--tp N under mpirun): Open MPI's headers, libraries and launcher
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "all dependencies present"
fi
# Optional: a headless browser for the serve chat page test
# (tests/serve/test_page.py), which reports a skip without it; a failed
# install is not fatal.
if ! command -v chromium >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: chromium (optional)"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } ||
    echo "could not install chromium: the chat page test will skip"
fi
