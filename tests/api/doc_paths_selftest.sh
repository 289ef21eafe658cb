#!/usr/bin/env bash
# scripts/doc-paths-check.py on tiny made-up trees: paths and links that
# exist pass; a cited file that does not exist, a wildcard that matches
# nothing and a relative link that resolves nowhere each fail, named with
# the doc and its line.
set -euo pipefail
check="python3 $(cd "$(dirname "$0")/../.." && pwd)/scripts/doc-paths-check.py"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/core" "$t/docs"
: > "$t/src/core/file.c"
printf '# x\nSee `src/core/file.c`, src/core/*.c and [the guide](docs/guide.md).\n' > "$t/README.md"
printf 'Back to [the readme](../README.md); `src/<layer>/...` is a placeholder.\n' > "$t/docs/guide.md"
out=$($check "$t") || { echo "FAIL: a clean tree was refused:"; echo "$out"; exit 1; }

printf 'See `src/core/gone.c`.\n' >> "$t/docs/guide.md"
if out=$($check "$t"); then echo "FAIL: a missing file passed"; exit 1; fi
grep -qF "docs/guide.md:2: 'src/core/gone.c' does not exist in the repository" <<<"$out" \
  || { echo "FAIL: unclear report of a missing file:"; echo "$out"; exit 1; }
printf 'Back to [the readme](../README.md).\n' > "$t/docs/guide.md"

printf 'Every src/core/*.h header.\n' >> "$t/README.md"
if out=$($check "$t"); then echo "FAIL: a wildcard matching nothing passed"; exit 1; fi
grep -qF "README.md:3: 'src/core/*.h' does not exist in the repository" <<<"$out" \
  || { echo "FAIL: unclear report of a wildcard:"; echo "$out"; exit 1; }
printf '# x\n' > "$t/README.md"

printf 'See [runtime](runtime.md).\n' >> "$t/docs/guide.md"
if out=$($check "$t"); then echo "FAIL: a broken link passed"; exit 1; fi
grep -qF "docs/guide.md:2: link 'runtime.md' does not resolve to a file of the repository" <<<"$out" \
  || { echo "FAIL: unclear report of a link:"; echo "$out"; exit 1; }
echo "doc_paths_selftest: all checks passed"
