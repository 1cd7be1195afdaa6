#!/usr/bin/env python3
"""ceiling.py - projection and perfect-sizing ceiling of a study's (or bench's) JSON cells,
each task on the verify-cost profile measured at that task's own KV length.

Written apart from the C code (datasets/projection.c) from the rule in runtime/verify_cost.h,
so that its figures for a profile check the `PROJECTION` tables `sdnpu study --cost` prints.

usage: ceiling.py RESULTS.json TASK=PROFILE.json [TASK=PROFILE.json ...]
"""
import json
import sys


def step_ms(p, d):
    """Cost of a step with d draft tokens: plain at 0, linear between listed sizes, flat after."""
    sizes, ms = p["tree_sizes"], p["step_ms"]
    if d <= 0:
        return ms[0] if sizes[0] == 0 else p["plain_step_ms"]
    pts = [(0, p["plain_step_ms"])] + list(zip(sizes, ms)) if sizes[0] != 0 else list(zip(sizes, ms))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= d <= x1:
            return y0 + (y1 - y0) * (d - x0) / (x1 - x0)
    return pts[-1][1]


def project(p, cell):
    steps, out = cell["steps"], cell["output_tokens"]
    draft = (cell.get("draft_ms") or 0) / steps
    verify = sum(n * step_ms(p, d) for d, n in enumerate(cell["draft_size_hist"]))
    oracle = sum(n * step_ms(p, a) for a, n in enumerate(cell["accept_hist"]))
    ms = (verify + draft * steps) / out
    cms = (oracle + draft * steps) / out
    return p["plain_step_ms"] / ms, p["plain_step_ms"] / cms


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cells = json.load(open(sys.argv[1]))["results"]
    profs = {}
    for a in sys.argv[2:]:
        task, path = a.split("=", 1)
        profs[task] = (path, json.load(open(path)))
    print(f"{'task':10} {'method':10} {'profile':16} {'tok/step':>8} {'projected':>9} {'ceiling':>8}")
    for c in cells:
        if c["task"] not in profs:
            continue
        path, p = profs[c["task"]]
        s, ceil = project(p, c)
        print(f"{c['task']:10} {c['method']:10} {path.split('/')[-1]:16} {c['mean_accepted']:8.3f} {s:8.2f}x {ceil:7.2f}x")


if __name__ == "__main__":
    main()
