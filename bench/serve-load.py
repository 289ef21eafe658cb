#!/usr/bin/env python3
"""Load benchmark for an OpenAI-compatible server (piecewise serve, or
llama.cpp's llama-server): N concurrent streaming clients send chat
requests back to back for a fixed time. Prints aggregate generated tok/s
and p50/p99 time to first token and inter-token latency.

  bench/serve-load.py --url http://127.0.0.1:8080 --clients 4 --seconds 30

Standard library only. Tokens are counted from the usage the server
reports (stream_options.include_usage), else one per content chunk."""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

PROMPTS = [
    "Tell me a short story about a cat.",
    "Explain why the sky is blue.",
    "Write a haiku about the sea.",
    "What are three uses of a paperclip?",
]


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def client_loop(url, args, end, out, idx):
    u = urllib.parse.urlparse(url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    n = 0
    while time.monotonic() < end:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": PROMPTS[(idx + n) % len(PROMPTS)]}],
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        n += 1
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
        t0 = time.monotonic()
        try:
            c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
            r = c.getresponse()
            if r.status != 200:
                out["errors"] += 1
                r.read()
                continue
            last = None
            chunks = 0
            usage = None
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                j = json.loads(data)
                if j.get("usage"):
                    usage = j["usage"]
                for ch in j.get("choices") or []:
                    if (ch.get("delta") or {}).get("content"):
                        now = time.monotonic()
                        if last is None:
                            out["ttft"].append(now - t0)
                        else:
                            out["itl"].append(now - last)
                        last = now
                        chunks += 1
            tokens = usage["completion_tokens"] if usage else chunks
            out["tokens"] += tokens
            out["requests"] += 1
        except (OSError, http.client.HTTPException, ValueError):
            out["errors"] += 1
        finally:
            c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--api-key")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    args = ap.parse_args()
    outs = [dict(ttft=[], itl=[], tokens=0, requests=0, errors=0) for _ in range(args.clients)]
    start = time.monotonic()
    end = start + args.seconds
    ths = [threading.Thread(target=client_loop, args=(args.url, args, end, outs[i], i))
           for i in range(args.clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.monotonic() - start  # includes the requests that ran past the end
    ttft = [x for o in outs for x in o["ttft"]]
    itl = [x for o in outs for x in o["itl"]]
    tokens = sum(o["tokens"] for o in outs)
    res = {
        "label": args.label, "clients": args.clients, "seconds": round(wall, 1),
        "requests": sum(o["requests"] for o in outs), "errors": sum(o["errors"] for o in outs),
        "tokens": tokens, "tok_s": round(tokens / wall, 1),
        "ttft_p50_ms": round(percentile(ttft, 50) * 1e3, 1),
        "ttft_p99_ms": round(percentile(ttft, 99) * 1e3, 1),
        "itl_p50_ms": round(percentile(itl, 50) * 1e3, 1),
        "itl_p99_ms": round(percentile(itl, 99) * 1e3, 1),
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{args.label or args.url}: {args.clients} clients, {res['requests']} requests "
              f"({res['errors']} errors) in {res['seconds']} s: {res['tok_s']} tok/s | "
              f"TTFT p50 {res['ttft_p50_ms']} ms p99 {res['ttft_p99_ms']} ms | "
              f"ITL p50 {res['itl_p50_ms']} ms p99 {res['itl_p99_ms']} ms")


if __name__ == "__main__":
    main()
