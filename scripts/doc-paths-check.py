#!/usr/bin/env python3
"""Every repository path the docs cite exists.

Scans README.md, BENCHMARKS.md and every Markdown file under docs/ for
paths into the repository's top-level folders (src/, include/, tools/,
tests/, docs/, scripts/, bench/, examples/, fuzz/, cmake/, .ci/) and for
the top-level files it knows, and for the targets of relative Markdown
links outside code blocks (resolved from the doc's folder), and fails, naming file and line, for each
one that is not in the source tree. A path with a wildcard (*, ?)
must match at least one file; a path holding a placeholder (<...>, {...},
...) or naming an output of the build is not checked.

usage: scripts/doc-paths-check.py [SOURCE_ROOT]   (default: the repository
of this script). Exit status 0 when every path exists, 1 otherwise."""
import glob
import os
import re
import sys

TOP_DIRS = ("src", "include", "tools", "tests", "docs", "scripts", "bench", "examples",
            "fuzz", "cmake", ".ci")
TOP_FILES = ("README.md", "BENCHMARKS.md", "CMakeLists.txt", "LICENSE")

# a path: one of the top folders, then path characters; or a top-level file
PATH_RE = re.compile(
    r"(?<![\w./~-])((?:%s)/[\w.*?/+-]*[\w*?/]|(?:%s))(?![\w/-])"
    % ("|".join(re.escape(d) for d in TOP_DIRS), "|".join(re.escape(f) for f in TOP_FILES)))


# a relative Markdown link: ](target) or ](target#anchor)
LINK_RE = re.compile(r"\]\(([^)#\s:]+)(?:#[^)\s]*)?\)")


def doc_files(root):
    files = [os.path.join(root, f) for f in ("README.md", "BENCHMARKS.md")]
    for dirpath, _, names in os.walk(os.path.join(root, "docs")):
        files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in files if os.path.isfile(f)]


def exists(root, path):
    path = path.rstrip(".")  # a path that ends a sentence
    if re.search(r"[*?]", path):
        return bool(glob.glob(os.path.join(root, path)))
    return os.path.exists(os.path.join(root, path))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    missing = checked = 0
    for doc in doc_files(root):
        rel = os.path.relpath(doc, root)
        fenced = False
        with open(doc, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                for m in PATH_RE.finditer(line):
                    path = m.group(1)
                    rest = line[m.end():m.end() + 1]
                    # placeholders and build outputs are not files of the tree
                    if rest in "<{" and rest or "..." in path or path.endswith("/."):
                        continue
                    checked += 1
                    if not exists(root, path):
                        print(f"{rel}:{lineno}: '{path}' does not exist in the repository")
                        missing += 1
                for m in LINK_RE.finditer("" if fenced else line):
                    target = os.path.normpath(os.path.join(os.path.dirname(doc), m.group(1)))
                    checked += 1
                    if not target.startswith(root + os.sep) or not os.path.exists(target):
                        print(f"{rel}:{lineno}: link '{m.group(1)}' does not resolve to a file of "
                              "the repository")
                        missing += 1
    print(f"doc paths: {checked} checked, {missing} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
