#!/usr/bin/env python3
"""llama.cpp's greedy tokens against a float64 reference: the peer figure
beside model_float64_golden.

    scripts/float64-peer.py REF MODEL [--server PATH]

REF is a tests/data/float64/*.ref file (scripts/float64-forward.py
reference), MODEL the file it was made from (same sha256). Starts the
llama-server that bench/peers/llamacpp.sh builds (scripts/llamacpp-reference.py
finds it and runs it: one thread, one slot, greedy, the prompts sent as token
ids), continues every prompt for as many steps as the reference, and prints
per prompt how far llama.cpp's tokens equal float64's, whether the 0.5 rule
holds (equal up to the first float64 margin below 0.5) and the counts at
tau = 0.05, 0.1 and 0.25. Exit status 0 whatever llama.cpp gives: a peer's
figure is reported, not asserted. Python 3 standard library only."""
import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("llamacpp_reference",
                                              os.path.join(HERE, "llamacpp-reference.py"))
ref_tools = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref_tools)


def read_ref(path):
    meta, runs = {}, []
    with open(path) as f:
        lines = [l.split() for l in f if l.strip() and not l.startswith("#")]
    i = 0
    while i < len(lines) and lines[i][0] != "prompts":
        meta[lines[i][0]] = lines[i][1:]
        i += 1
    i += 1
    while i < len(lines):
        prompt = [int(t) for t in lines[i][2:]]
        n = int(lines[i + 1][1])
        steps = [(int(a), int(b), float(m)) for a, b, m in lines[i + 2:i + 2 + n]]
        runs.append((prompt, steps))
        i += 2 + n
    return meta, runs


def greedy(server, prompt, n):
    """llama.cpp's greedy continuation (its own `tokens`: completion
    probabilities merge the byte tokens of a partial UTF-8 character)."""
    body = {"prompt": prompt, "n_predict": n, "samplers": ["top_k"], "top_k": 1,
            "temperature": 0.0, "repeat_penalty": 1.0, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "dry_multiplier": 0.0, "cache_prompt": False,
            "return_tokens": True, "seed": 1}
    return server.post("/completion", body)["tokens"]


def rule(steps, got, tau):
    for k, (a, _, margin) in enumerate(steps):
        if margin < tau:
            return True
        if k >= len(got) or got[k] != a:
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("model")
    ap.add_argument("--server")
    args = ap.parse_args()
    meta, runs = read_ref(args.ref)
    if ref_tools.sha256(args.model) != meta["sha256"][0]:
        sys.exit(f"{args.model} is not the file {args.ref} was made from")
    longest = max(len(p) + len(s) for p, s in runs)
    server = None
    for binary in ref_tools.find_servers(args.server):
        server = ref_tools.Server(binary, args.model, (longest + 64) // 64 * 64)
        if server.wait_healthy():
            break
        server.stop(keep_log=True)
        server = None
    if not server:
        sys.exit("no llama-server came up")
    counts = {0.5: 0, 0.05: 0, 0.1: 0, 0.25: 0}
    try:
        for i, (prompt, steps) in enumerate(runs):
            got = greedy(server, prompt, len(steps))
            diff = next((k for k, (a, _, _) in enumerate(steps) if k >= len(got) or got[k] != a),
                        len(steps))
            for tau in counts:
                counts[tau] += rule(steps, got, tau)
            where = (f"differs at step {diff} (float64 margin {steps[diff][2]:.4f}, llama.cpp "
                     f"{got[diff] if diff < len(got) else '-'}, float64 {steps[diff][0]})"
                     if diff < len(steps) else "equal for all steps")
            print(f"{meta['model'][0]}: prompt {i}: llama.cpp {where}")
    finally:
        server.stop()
    n = len(runs)
    print(f"{meta['model'][0]}: llama.cpp meets the 0.50 rule on {counts[0.5]}/{n} prompts; "
          f"tau 0.05: {counts[0.05]}/{n}, tau 0.1: {counts[0.1]}/{n}, tau 0.25: {counts[0.25]}/{n}")


if __name__ == "__main__":
    main()
