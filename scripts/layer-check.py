#!/usr/bin/env python3
"""Fails when a layer reaches up.

Layers, lowest first (docs/ARCHITECTURE.md):
    core < mem < backend < graph < runtime < ops < model < tools
(src/core, src/mem, src/backend, src/graph, src/runtime, src/ops, src/model;
tools/ and bench/ are the top). A layer may use its own layer and the ones
below it, never one above.

Two checks, both run by default:

  includes  every #include "..." in src/, tools/ and bench/ is resolved the
            way the build resolves it (the including file's folder, then
            src/, src/core/ and include/) and the header's layer must not be
            above the including file's. Public headers (include/) are the API
            and belong to no layer.

  symbols   `nm` over each layer's static component (given as LAYER=ARCHIVE
            on the command line): every symbol a layer's object code leaves
            undefined that another component defines must be defined in the
            same layer or below.

Each violation is printed on its own line with the file (and line), the
header or symbol, and both layers. Exit status 1 if there is any.

Usage:
    layer-check.py [--source DIR] [--nm NM] [--no-includes] [--private-subdirs]
                   [LAYER=ARCHIVE ...]

--private-subdirs (not on in CTest): a layer's sub-folders (src/ops/cpu/,
src/backend/cuda/, ...) are private to it; other layers include only its
top-level headers.
"""
import argparse
import os
import re
import subprocess
import sys

LAYERS = ["core", "mem", "backend", "graph", "runtime", "ops", "model", "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}

# Top-level folders of the source tree and the layer they hold.
TOP_DIRS = {"tools": "tools", "bench": "tools"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")


def layer_of(root, path):
    """The layer of a file, or None for files outside every layer."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    parts = rel.split(os.sep)
    if parts[0] == "src" and len(parts) >= 3 and parts[1] in RANK:
        return parts[1]
    if parts[0] in TOP_DIRS:
        return TOP_DIRS[parts[0]]
    return None


def resolve(root, includer, name):
    """Where the build finds #include "name" from includer (None: not in the tree)."""
    for base in (os.path.dirname(includer), os.path.join(root, "src"),
                 os.path.join(root, "src", "core"), os.path.join(root, "include")):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(cand):
            return cand
    return None


def private_to(root, path):
    """The layer whose sub-folder (src/<layer>/<sub>/) holds path, or None."""
    parts = os.path.relpath(path, root).split(os.sep)
    if parts[0] == "src" and len(parts) >= 4 and parts[1] in RANK:
        return parts[1]
    return None


def check_includes(root, private_subdirs=False):
    violations = []
    for top in ("src", "tools", "bench"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                mine = layer_of(root, path)
                if mine is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        if target is None:
                            continue  # generated (pw_config.h) or system
                        theirs = layer_of(root, target)
                        if theirs is not None and RANK[theirs] > RANK[mine]:
                            violations.append(
                                "%s:%d: includes \"%s\" (%s): layer %s reaches up to layer %s"
                                % (os.path.relpath(path, root), lineno, m.group(1),
                                   os.path.relpath(target, root), mine, theirs))
                        elif (private_subdirs and private_to(root, target) is not None
                              and private_to(root, target) != mine):
                            violations.append(
                                "%s:%d: includes \"%s\" (%s): layer %s uses a header private "
                                "to layer %s (include its top-level header instead)"
                                % (os.path.relpath(path, root), lineno, m.group(1),
                                   os.path.relpath(target, root), mine, theirs))
    return violations


def nm_symbols(nm, archive):
    """{member: (defined set, undefined set)} of an archive's global symbols."""
    out = subprocess.run([nm, "-A", "-g", archive], check=True, capture_output=True,
                         text=True).stdout
    members = {}
    for line in out.splitlines():
        # "ARCHIVE:MEMBER:ADDRESS KIND NAME", or "ARCHIVE:MEMBER:  U NAME"
        if not line.startswith(archive + ":"):
            continue
        fields = line[len(archive) + 1:].split()
        if len(fields) < 2:
            continue
        member = fields[0].split(":")[0]
        kind, name = fields[-2], fields[-1]
        d, u = members.setdefault(member, (set(), set()))
        if kind == "U":
            u.add(name)
        elif kind not in ("w", "v"):
            d.add(name)
    return members


def source_of(root, layer, member, sym):
    """'src/<layer>/.../file.c:LINE' of member's first use of sym (best effort)."""
    stem = member[:-2] if member.endswith(".o") else member
    for dirpath, _, files in os.walk(os.path.join(root, "src", layer)):
        if stem in files:
            path = os.path.join(dirpath, stem)
            rel = os.path.relpath(path, root)
            pat = re.compile(r"\b%s\b" % re.escape(sym))
            # file-scope prototypes start at column 0 and end with ");"
            proto = re.compile(r"^\w.*\b%s\s*\(.*\)\s*;\s*$" % re.escape(sym))
            with open(path, encoding="utf-8", errors="replace") as fh:
                for lineno, line in enumerate(fh, 1):
                    if pat.search(line) and not proto.match(line):
                        return "%s:%d" % (rel, lineno)
            return rel
    return member


def check_symbols(root, nm, components):
    """components: [(layer, archive)]."""
    defined_in = {}  # symbol -> lowest layer that defines it
    per_layer = []
    for layer, archive in components:
        members = nm_symbols(nm, archive)
        per_layer.append((layer, archive, members))
        for d, _ in members.values():
            for sym in d:
                prev = defined_in.get(sym)
                if prev is None or RANK[layer] < RANK[prev]:
                    defined_in[sym] = layer
    violations = []
    for layer, archive, members in per_layer:
        for member in sorted(members):
            for sym in sorted(members[member][1]):
                theirs = defined_in.get(sym)
                if theirs is not None and RANK[theirs] > RANK[layer]:
                    violations.append(
                        "%s: %s(%s) references %s, defined in layer %s: layer %s reaches up to layer %s"
                        % (source_of(root, layer, member, sym), os.path.basename(archive), member,
                           sym, theirs, layer, theirs))
    return violations


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="source tree (default: this script's project)")
    ap.add_argument("--nm", default=os.environ.get("NM", "nm"))
    ap.add_argument("--no-includes", action="store_true", help="skip the include check")
    ap.add_argument("--private-subdirs", action="store_true",
                    help="also refuse headers of another layer's sub-folders (src/ops/cpu/, "
                         "src/backend/cuda/, ...): only a layer's top-level headers are for others")
    ap.add_argument("components", nargs="*", metavar="LAYER=ARCHIVE")
    args = ap.parse_args()
    root = os.path.abspath(args.source)

    components = []
    for spec in args.components:
        layer, sep, archive = spec.partition("=")
        if not sep or layer not in RANK:
            ap.error("%r: expected LAYER=ARCHIVE with LAYER one of %s" % (spec, ", ".join(LAYERS)))
        if not os.path.isfile(archive):
            ap.error("%s: no such archive" % archive)
        components.append((layer, archive))

    violations = []
    if not args.no_includes:
        found = check_includes(root, args.private_subdirs)
        print("include check: %d violation(s)" % len(found))
        violations += found
        for v in found:
            print("  " + v)
    if components:
        found = check_symbols(root, args.nm, components)
        print("symbol check (%s): %d violation(s)"
              % (", ".join(l for l, _ in components), len(found)))
        violations += found
        for v in found:
            print("  " + v)
    if violations:
        print("layer check FAILED: %d violation(s); order is %s"
              % (len(violations), " < ".join(LAYERS)))
        return 1
    print("layer check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
