#!/usr/bin/env bash
# Runs scripts/jinja-compare.py: piecewise's Jinja interpreter against
# Python's jinja2 on llama.cpp's chat templates (models/templates/ of the
# llama-cpp-python sdist, the one bench/peers/llamacpp.sh fetches) and on
# the templates of the GGUFs in models/.
#
#   jinja-compare.sh RENDERER VENV_DIR [compare options]
#
# jinja2 comes from PyPI into VENV_DIR (made once). The templates come from
# the peer cache (~/.cache/piecewise/llamacpp/VERSION/src), else from the
# sdist, downloaded into that cache and only its templates/ folder
# extracted (never into the repository). Without jinja2 or the templates
# (no network) it exits 77: a skip, saying why.
set -euo pipefail
renderer=${1:?usage: jinja-compare.sh RENDERER VENV_DIR [options]}
venv=${2:?usage: jinja-compare.sh RENDERER VENV_DIR [options]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
version=${LLAMACPP_PY_VERSION:-0.3.36}
cache=${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/$version
skip() { echo "model_jinja_templates skipped: $*"; exit 77; }

if ! [[ -f $venv/.jinja2-ready ]] || ! "$venv/bin/python" -c "import jinja2" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null 2>&1 || skip "python3 -m venv failed (install python3-venv)"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "jinja2==3.1.6" >"$venv.log" 2>&1 \
    || skip "pip install jinja2 failed (no network?): $(tail -1 "$venv.log")"
  touch "$venv/.jinja2-ready"
fi

templates=${PW_JINJA_TEMPLATES:-}
if [[ -z $templates ]]; then
  if [[ -d $cache/src/vendor/llama.cpp/models/templates ]]; then
    templates=$cache/src/vendor/llama.cpp/models/templates
  elif [[ -d $cache/templates ]]; then
    templates=$cache/templates
  else
    mkdir -p "$cache/sdist"
    tarball=$cache/sdist/llama_cpp_python-$version.tar.gz
    if [[ ! -f $tarball ]]; then
      "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: -d "$cache/sdist" \
        "llama-cpp-python==$version" >"$cache/sdist/pip-templates.log" 2>&1 \
        || skip "no llama.cpp templates in $cache and the sdist download failed (no network?)"
    fi
    rm -rf "$cache/templates.tmp" && mkdir -p "$cache/templates.tmp"
    tar xzf "$tarball" -C "$cache/templates.tmp" --strip-components=5 --wildcards \
      "*/vendor/llama.cpp/models/templates/*" || skip "the sdist has no models/templates folder"
    mv "$cache/templates.tmp" "$cache/templates"
    templates=$cache/templates
  fi
fi
exec "$venv/bin/python" "$here/jinja-compare.py" --renderer "$renderer" --templates "$templates" \
  --models "${PW_MODELS_DIR:-$here/../models}" "$@"
