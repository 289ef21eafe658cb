#!/usr/bin/env python3
"""Each shared library exports exactly the API: nothing extra, nothing missing.

Declared: every function declared with PW_API in the installed public
headers (include/). Exported: `nm -D --defined-only` of each library.
Checks:
  - every function declaration in include/ carries PW_API;
  - no header under src/ marks a function for export (PW_API): what
    libpiecewise-llm calls of libpiecewise is public API;
  - the libraries export only declared functions, and no data;
  - every declared function is exported by exactly one library;
  - piecewise/model.h is libpiecewise-llm's; piecewise.h, graph.h,
    runtime.h, relocate.h, graph_cache.h and module.h are libpiecewise's
    (the capture library needs no model code).

Usage: check_exports.py --source DIR [--nm NM] [--not-built DIR ...]
                        capture=LIB.so llm=LIB.so
"""
import argparse
import os
import re
import subprocess
import sys

DECL_START = re.compile(r"^[A-Za-z_][\w\s\*]*?\b(pw_\w+)\s*\(")
SKIP = ("static", "typedef", "#", "/", "}", "{", "extern", "struct", "union", "enum")
# Symbols every shared object defines (linker-made), not API.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}


def header_functions(path, marker):
    """{name: line} declared with marker; [(line, name)] declared without."""
    marked, unmarked = {}, []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith(marker + " "):
                m = DECL_START.match(line[len(marker) + 1:])
                if m:
                    marked[m.group(1)] = lineno
            elif line.startswith(SKIP) or line.startswith("PW_API"):
                continue
            else:
                m = DECL_START.match(line)
                if m:
                    unmarked.append((lineno, m.group(1)))
    return marked, unmarked


def exports(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    funcs, other = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 3 or f[2] in LINKER_SYMBOLS:
            continue
        (funcs if f[1] in "TtWi" else other).add("%s (%s)" % (f[2], f[1]) if f[1] not in "TtW"
                                                   else f[2])
    return funcs, other


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--not-built", action="append", default=[], metavar="DIR",
                    help="a src/ folder this build leaves out (e.g. src/backend/cuda): "
                         "not scanned")
    ap.add_argument("libs", nargs=2, metavar="NAME=LIB")
    args = ap.parse_args()
    libs = dict(spec.split("=", 1) for spec in args.libs)
    errors = []

    inc = os.path.join(args.source, "include")
    api = {}  # name -> header (relative to include/)
    for dirpath, _, files in os.walk(inc):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, inc)
            marked, unmarked = header_functions(path, "PW_API")
            for name in marked:
                api[name] = rel
            for lineno, name in unmarked:
                errors.append("include/%s:%d: %s is declared without PW_API" % (rel, lineno, name))
    skipped = [os.path.normpath(os.path.join(args.source, d)) for d in args.not_built]
    for dirpath, _, files in os.walk(os.path.join(args.source, "src")):
        if any(os.path.normpath(dirpath).startswith(d) for d in skipped):
            continue
        for f in sorted(files):
            if f.endswith(".h"):
                path = os.path.join(dirpath, f)
                for name, lineno in header_functions(path, "PW_API")[0].items():
                    errors.append("%s:%d: %s is marked PW_API in a header that is not installed"
                                  % (os.path.relpath(path, args.source), lineno, name))
    if len(api) < 50:
        errors.append("only %d PW_API functions found under %s: the parser is broken" % (len(api), inc))

    exported = {}
    for name, lib in libs.items():
        funcs, other = exports(args.nm, lib)
        exported[name] = funcs
        for sym in sorted(other):
            errors.append("%s exports data or another non-function symbol: %s"
                          % (os.path.basename(lib), sym))
        for sym in sorted(funcs - set(api)):
            errors.append("%s exports %s, which no public header declares with PW_API"
                          % (os.path.basename(lib), sym))
    cap, llm = exported["capture"], exported["llm"]
    for sym in sorted(cap & llm):
        errors.append("%s is exported by both libraries" % sym)
    for sym in sorted(set(api) - cap - llm):
        errors.append("%s (include/%s) is declared with PW_API but neither library exports it"
                      % (sym, api[sym]))
    for sym, header in sorted(api.items()):
        if header == "piecewise/model.h" and sym in cap:
            errors.append("%s (include/%s) comes from libpiecewise, not libpiecewise-llm"
                          % (sym, header))
        if header in ("piecewise/graph.h", "piecewise/runtime.h", "piecewise/relocate.h",
                      "piecewise/graph_cache.h", "piecewise/module.h") and sym in llm:
            errors.append("%s (include/%s) comes from libpiecewise-llm: the capture library "
                          "lacks it" % (sym, header))
        if header == "piecewise.h" and sym in llm:
            errors.append("%s (include/piecewise.h) comes from libpiecewise-llm: a program "
                         "linking only libpiecewise cannot call it" % sym)

    print("%d PW_API functions (%d from libpiecewise, %d from libpiecewise-llm)"
          % (len(api), len(cap & set(api)), len(llm & set(api))))
    for e in errors:
        print("FAIL: " + e)
    if errors:
        return 1
    print("exports match the headers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
