#!/usr/bin/env python3
"""Writes the perplexity text: Jane Austen's "Pride and Prejudice" (public
domain, from Project Gutenberg) as Debian's r-cran-janeaustenr package (MIT)
ships it, one line of the book per line, to the path given.

    scripts/perplexity-text.py PACKAGE_ROOT OUT

PACKAGE_ROOT is the unpacked .deb (scripts/fetch-perplexity-text.sh
downloads and unpacks it); the book is the character vector
`prideprejudice` in the package's R lazy-load database
(usr/lib/R/site-library/janeaustenr/data/Rdata.{rdx,rdb}), read here with a
small reader of R's serialization format (XDR), so R is not needed.
"""
import bz2
import gzip
import lzma
import struct
import sys
import zlib

NILVALUE, REFSXP = 254, 255
SPECIALS = {253, 242, 241, 251, 247, 252, 243}  # environments, missing, unbound, ...


class Reader:
    def __init__(self, data: bytes):
        if data[:2] != b"X\n":
            raise ValueError("not an XDR R serialization")
        self.d, self.p, self.refs = data, 2, []
        version = self.int()
        self.int()
        self.int()
        if version == 3:
            n = self.int()  # the native encoding's name
            self.p += n

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.d, self.p)
        self.p += 4
        return v

    def length(self) -> int:
        n = self.int()
        if n == -1:
            hi, lo = self.int(), self.int()
            n = (hi << 32) | (lo & 0xFFFFFFFF)
        return n

    def item(self):
        flags = self.int()
        t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if t == NILVALUE or t in SPECIALS:
            return None
        if t == REFSXP:
            i = flags >> 8
            return self.refs[(i or self.int()) - 1]
        if t == 1:  # SYMSXP
            sym = self.item()
            self.refs.append(sym)
            return sym
        if t in (249, 250, 248):  # namespace, package, persist: a string vector
            self.int()
            n = self.int()
            v = [self.item() for _ in range(n)]
            self.refs.append(v)
            return v
        if t in (2, 6, 3, 5, 17, 239, 240):  # pairlists and closures
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            node = [(tag, car)] + (cdr if isinstance(cdr, list) and cdr and isinstance(cdr[0], tuple) else [])
            return node
        if t == 238:  # ALTREP: class info, state, attributes
            self.item()
            state = self.item()
            self.item()
            return state
        if t == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            s = self.d[self.p:self.p + n].decode("utf-8", "replace")
            self.p += n
            return s
        if t in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            v = list(struct.unpack_from(">%di" % n, self.d, self.p))
            self.p += 4 * n
        elif t == 14:  # REALSXP
            n = self.length()
            v = list(struct.unpack_from(">%dd" % n, self.d, self.p))
            self.p += 8 * n
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            n = self.length()
            v = [self.item() for _ in range(n)]
        elif t == 24:  # RAWSXP
            n = self.length()
            v = self.d[self.p:self.p + n]
            self.p += n
        else:
            raise ValueError("R type %d not handled" % t)
        attrs = self.item() if has_attr else None
        if attrs and t == 19:
            names = dict(attrs).get("names")
            if names:
                return dict(zip(names, v))
        return v


def rdb_object(rdb: bytes, offset: int, length: int):
    blob = rdb[offset:offset + length]
    n = struct.unpack(">I", blob[:4])[0]
    kind, body = blob[4:5], blob[5:]
    if kind == b"2":
        raw = bz2.decompress(body)
    elif kind == b"X":
        raw = lzma.decompress(body)
    elif kind == b"0":
        raw = body
    else:  # zlib right after the length (type 'Z' is the default)
        raw = zlib.decompress(blob[4:])
    if len(raw) != n:
        raise ValueError("object length %d, expected %d" % (len(raw), n))
    return Reader(raw).item()


def main() -> None:
    root, out = sys.argv[1], sys.argv[2]
    base = root + "/usr/lib/R/site-library/janeaustenr/data/Rdata"
    index = Reader(gzip.decompress(open(base + ".rdx", "rb").read())).item()
    where = index["variables"]["prideprejudice"]
    rdb = open(base + ".rdb", "rb").read()
    lines = rdb_object(rdb, where[0], where[1])
    if not isinstance(lines, list) or len(lines) < 10000:
        raise SystemExit("prideprejudice: unexpected contents")
    with open(out, "x", encoding="utf-8") as f:
        f.write("\n".join("" if s is None else s for s in lines) + "\n")


if __name__ == "__main__":
    main()
