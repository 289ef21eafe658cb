#!/usr/bin/env python3
"""Compare two llama.cpp reference files (scripts/llamacpp-reference.py) of
the same model, prompt by prompt: where their greedy tokens first differ,
each side's top-2 logit margin at that step, and how far the margins moved
before it.

    scripts/llamacpp-reference-diff.py A.json B.json [--near-tie M]

Made to measure how far llama.cpp agrees with itself: the same model and
prompts run through two builds of the same llama.cpp version (say the
native build and the portable AVX2 build, `--server` of the reference
script) give two files, and this prints, for each prompt, the first
differing step and whether A's margin there is below the near-tie bound
(default 0.02, the reference files' near_tie_margin), i.e. whether the two
files would pass that rule against each other. Exit status 0 when they do, 1
when a prompt first differs at a margin of at least M, 2 on bad input.
Python 3 standard library only.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        greedy = j["greedy"]
        for g in greedy:
            if len(g["tokens"]) != len(g["margins"]):
                raise ValueError(f"prompt {g['prompt']!r}: {len(g['tokens'])} tokens, "
                                 f"{len(g['margins'])} margins")
        return j
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"llamacpp-reference-diff: {path}: not a reference file ({e})", file=sys.stderr)
        sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--near-tie", type=float, default=0.02)
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    if a.get("model_sha256") != b.get("model_sha256"):
        print("llamacpp-reference-diff: the two files are of different model files "
              f"({a.get('model')} {str(a.get('model_sha256'))[:12]}, "
              f"{b.get('model')} {str(b.get('model_sha256'))[:12]})", file=sys.stderr)
        sys.exit(2)
    gb = {tuple(g["prompt_ids"]): g for g in b["greedy"]}
    print(f"{'prompt':34s} {'first diff':>10s} {'margin A':>9s} {'margin B':>9s} "
          f"{'mean |dA-dB| before':>20s} {'max':>7s}")
    failing, steps, worst = 0, 0, 0.0
    for ga in a["greedy"]:
        g2 = gb.get(tuple(ga["prompt_ids"]))
        if g2 is None:
            print(f"{ga['prompt'][:32]!r:34s} not in {args.b}")
            continue
        ta, tb = ga["tokens"], g2["tokens"]
        n = min(len(ta), len(tb))
        d = next((k for k in range(n) if ta[k] != tb[k]), None)
        upto = n if d is None else d
        moved = [abs(ga["margins"][k] - g2["margins"][k]) for k in range(upto)]
        steps += len(moved)
        worst = max([worst] + moved)
        mean = sum(moved) / len(moved) if moved else 0.0
        if d is None:
            where, ma, mb = "-", "", ""
        else:
            where, ma, mb = str(d), f"{ga['margins'][d]:.4f}", f"{g2['margins'][d]:.4f}"
            if ga["margins"][d] >= args.near_tie:
                failing += 1
                where += " *"
        print(f"{ga['prompt'][:32]!r:34s} {where:>10s} {ma:>9s} {mb:>9s} {mean:20.4f} "
              f"{max(moved) if moved else 0:7.4f}")
    print(f"\n{steps} steps before the first difference; margins moved by up to {worst:.4f}")
    print(f"prompts first differing at A's margin >= {args.near_tie} (marked *): {failing}")
    sys.exit(1 if failing else 0)


if __name__ == "__main__":
    main()
