#!/usr/bin/env python3
"""Tables of docs/results.md ("AMX-BF16 for the bf16 cache's keys") from this folder's raw outputs
(measure.sh): the range over the rounds of each figure, avx512 path / amx path."""
import glob, re, statistics

def rng(v):
    v = sorted(v)
    return f"{v[0]:,.1f}" if len(v) == 1 or v[0] == v[-1] else f"{v[0]:,.1f}-{v[-1]:,.1f}"

att = {}
for f in glob.glob("att-*-*.txt"):
    k = f.split("-")[1]
    for line in open(f):
        m = re.match(r"(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)", line)
        if m:
            att.setdefault((k, m[1], int(m[2]), int(m[3])), []).append(float(m[5]))
print("attention, us a layer (avx512 / amx), 2 threads")
print("| cache, context | 1 row | 4 rows | 16 rows | T(4)/T(1) | T(16)/T(1) |")
print("| --- | --- | --- | --- | --- | --- |")
for c in ("bf16", "f16"):
    for ctx in (256, 2048, 4096, 8192):
        cells = [" / ".join(rng(att.get((k, c, ctx, r), [0])) for k in ("avx512", "amx")) for r in (1, 4, 16)]
        rat = []
        for r in (4, 16):
            rat.append(" / ".join(f"{statistics.median(att[(k, c, ctx, r)]) / statistics.median(att[(k, c, ctx, 1)]):.2f}" for k in ("avx512", "amx")))
        print(f"| {c}, {ctx:,} | " + " | ".join(cells + rat) + " |")

ver = {}
for f in glob.glob("ver-*-*-*.txt"):
    _, k, ctx, _r = f[:-4].split("-")
    for line in open(f):
        m = re.match(r"\s+(\d+)\s+([\d.]+)\s+([\d.]+)x", line)
        if m:
            ver.setdefault((k, int(ctx), int(m[1])), []).append(float(m[2]))
print("\nverify step, SmolLM2 Q4_1, bf16 cache, ms (avx512 / amx)")
print("| context | T(1) | T(4) | T(16) | T(4)/T(1) | T(16)/T(1) |")
print("| --- | --- | --- | --- | --- | --- |")
for ctx in (4096, 8192):
    cells = [" / ".join(rng(ver.get((k, ctx, r), [0])) for k in ("avx512", "amx")) for r in (1, 4, 16)]
    rat = [" / ".join(f"{statistics.median(ver[(k, ctx, r)]) / statistics.median(ver[(k, ctx, 1)]):.2f}" for k in ("avx512", "amx")) for r in (4, 16)]
    print(f"| {ctx:,} | " + " | ".join(cells + rat) + " |")

pre = {}
for f in glob.glob("pre-*-*-*.txt"):
    _, k, p, _r = f[:-4].split("-")
    for line in open(f):
        m = re.match(r"\s+2\s+\|\s+([\d.]+)", line)
        if m:
            pre.setdefault((k, int(p)), []).append(float(m[1]))
print("\nprefill, SmolLM2 Q4_1, bf16 cache, tok/s (avx512 / amx), and the share of the 256-token rate")
for p in (256, 4096, 8192):
    cells = " / ".join(rng(pre.get((k, p), [0])) for k in ("avx512", "amx"))
    share = " / ".join(f"{statistics.median(pre[(k, p)]) / statistics.median(pre[(k, 256)]):.2f}" for k in ("avx512", "amx") if (k, p) in pre and (k, 256) in pre)
    print(f"{p:>5}: {cells}  ({share})")
