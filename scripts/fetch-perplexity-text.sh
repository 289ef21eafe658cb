#!/usr/bin/env bash
# The text `piecewise perplexity` is measured on (docs/models.md,
# "Perplexity"): Jane Austen's "Pride and Prejudice" (public domain, from
# Project Gutenberg), as Debian's r-cran-janeaustenr package (MIT) ships
# it. Downloads the .deb with apt-get (no install, R is not needed), unpacks
# it and writes the book as plain text (scripts/perplexity-text.py) into
# $PW_TEXT_CACHE (default ~/.cache/piecewise/text), never into the
# repository. Prints the text's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${PW_TEXT_CACHE:-$HOME/.cache/piecewise/text}
out=$cache/pride-and-prejudice.txt
if [[ -f $out ]]; then echo "$out"; exit 0; fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
( cd "$work" && apt-get download r-cran-janeaustenr >"$work/apt.log" 2>&1 ) || {
    echo "fetch-perplexity-text: apt-get download r-cran-janeaustenr failed (run apt-get update first?):" >&2
    cat "$work/apt.log" >&2
    exit 1
}
dpkg-deb -x "$work"/r-cran-janeaustenr_*.deb "$work/pkg"
python3 "$here/perplexity-text.py" "$work/pkg" "$work/book.txt"
mv "$work/book.txt" "$out"
echo "$out"
