#!/usr/bin/env bash
# scripts/layer-check.py on tiny made-up trees: a clean one passes; an upward
# include and an upward symbol reference each fail, named with file, line,
# header or symbol, and both layers.
set -euo pipefail
check="python3 $(cd "$(dirname "$0")/../.." && pwd)/scripts/layer-check.py"
cc=${CC:-cc}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/core" "$t/src/mem" "$t/src/graph"
printf 'int pw_core_fn(void);\n' > "$t/src/core/core.h"
printf '#include "core.h"\nint pw_core_fn(void) { return 1; }\n' > "$t/src/core/core.c"
printf '#include "core.h"\nint pw_mem_fn(void);\nint pw_mem_fn(void) { return pw_core_fn(); }\n' > "$t/src/mem/pool.c"
printf 'int pw_graph_fn(void);\n' > "$t/src/graph/graph.h"
(cd "$t" && $cc -c src/core/core.c -o core.c.o && $cc -Isrc/core -c src/mem/pool.c -o pool.c.o \
  && ar rc libcore.a core.c.o && ar rc libmem.a pool.c.o)

out=$($check --source "$t" core="$t/libcore.a" mem="$t/libmem.a") \
  || { echo "FAIL: a clean tree was refused:"; echo "$out"; exit 1; }

# (The reports are matched from here-strings, not `echo | grep -q`: under
# pipefail, grep -q exiting at its match can kill echo with SIGPIPE and fail
# a report that was right; CI saw it once.)

# core includes a graph header
printf '#include "core.h"\n#include "graph/graph.h"\nint pw_core_fn(void) { return 1; }\n' > "$t/src/core/core.c"
if out=$($check --source "$t"); then echo "FAIL: an upward include passed"; exit 1; fi
grep -qF 'src/core/core.c:2: includes "graph/graph.h" (src/graph/graph.h): layer core reaches up to layer graph' <<<"$out" \
  || { echo "FAIL: unclear include report:"; echo "$out"; exit 1; }
printf '#include "core.h"\nint pw_core_fn(void) { return 1; }\n' > "$t/src/core/core.c"

# core's object code calls a mem function
printf '#include "core.h"\nint pw_mem_fn(void);\nint pw_core_fn(void) {\n  return pw_mem_fn();\n}\n' > "$t/src/core/core.c"
(cd "$t" && $cc -c src/core/core.c -o core.c.o && rm libcore.a && ar rc libcore.a core.c.o)
if out=$($check --source "$t" core="$t/libcore.a" mem="$t/libmem.a"); then
  echo "FAIL: an upward symbol reference passed"; exit 1
fi
grep -qF 'src/core/core.c:4: libcore.a(core.c.o) references pw_mem_fn, defined in layer mem: layer core reaches up to layer mem' <<<"$out" \
  || { echo "FAIL: unclear symbol report:"; echo "$out"; exit 1; }

# a bad argument is a usage error, not a pass
if $check --source "$t" nolayer="$t/libcore.a" 2>/dev/null; then echo "FAIL: bad layer accepted"; exit 1; fi
echo "layer check self-test passed"
