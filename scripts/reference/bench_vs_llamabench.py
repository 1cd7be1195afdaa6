#!/usr/bin/env python3
"""bench_vs_llamabench.py - sdnpu against llama.cpp's own llama-bench (built from source on the
same machine) on the same GGUF file, in the same run, interleaved: the verify-step cost curve at
one or more context depths, prefill and decode, for one or more KV cache types.

For each round, cache type C and thread count T (the order of the two programs alternates per
round, and per depth / prompt size within a round):
  curve    sdnpu bench-verify --model M --rows R --context D --threads T --json OUT -ctk C -ctv C
           llama-bench -m M -p R -n 0 -d D -t T -o json -ctk C -ctv C -fa 1
           (pp of R tokens after D tokens of context: one forward pass of R rows, llama.cpp's
           cost of an R-row verify step), for every depth D of --depths
  prefill  sdnpu bench-model --prompt-tokens P      vs llama-bench -p P -n 0 -d 0
  decode   sdnpu bench-model --max-tokens G (G one-token steps after the P-token prompt)
           vs llama-bench -p 0 -n G -d P             (G one-token steps after P tokens)
           for every prompt size P of --prompts (one sdnpu bench-model run gives both)
Cache types: f16, q8, bf16 (sdnpu's --cache-type-k/-v names), given to llama.cpp as f16, q8_0, bf16
(llama-bench has no f32 KV cache type; sdnpu's f32 is measured on its own). llama.cpp needs
flash attention for a quantized V cache, so by default llama-bench runs with -fa 1 for every
cache type: the comparison is like for like across types. (-fa auto, llama.cpp's default,
also chooses flash attention on the CPU. --llama-fa 0 runs f16 without it, q8 keeps -fa 1:
on some builds and machines llama.cpp's CPU flash attention is slower than its plain
attention, so that is llama.cpp's best case for f16.)
Prints, per cache type, the median ms per step (curve, with T(r)/T(1) and llama.cpp / sdnpu)
and tok/s (prefill, decode) of each program and the ratios; --json writes them all. llama-bench
is not part of sdnpu and is never needed by its tests: build it yourself (cmake, GGML_NATIVE=ON,
target llama-bench) and pass its path.

  python3 scripts/reference/bench_vs_llamabench.py --sdnpu build/sdnpu \\
      --llama-bench ~/llama.cpp/build/bin/llama-bench --model FILE --reps 3
  python3 scripts/reference/bench_vs_llamabench.py --sdnpu build/sdnpu \\
      --llama-bench ~/llama.cpp/build/bin/llama-bench --model FILE --threads 2 --rows 1,16 \\
      --depths 256,2048,4096,8192 --prompts 256,4096 --cache-types f16,q8 --json OUT
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# --cache-types value -> (sdnpu's --cache-type-k/-v name, llama.cpp's -ctk/-ctv name)
CACHE_TYPES = {"f16": ("f16", "f16"), "q8": ("q8", "q8_0"), "q8_0": ("q8", "q8_0"), "bf16": ("bf16", "bf16")}
# llama-bench's -ctk/-ctv take f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl (its
# ggml_type_from_name), not f32: sdnpu's f32 cache has no llama-bench counterpart


def run(cmd, stdout=subprocess.PIPE):
    """Run cmd; on failure print the command and its error output, then exit."""
    p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        sys.stderr.write("command failed (exit %d): %s\n%s\n" % (p.returncode, " ".join(cmd), p.stderr[-3000:]))
        sys.exit(1)
    return p.stdout


def llama_fa(ctype, fa):
    """llama-bench's -fa value for a cache type: a quantized V cache needs flash attention."""
    return "1" if CACHE_TYPES[ctype][1] not in ("f16", "f32") else fa


def llama_bench(exe, model, threads, reps, prompt, gen, depth, ctype, fa):
    """{(n_prompt, n_gen, n_depth): median seconds of one test} from one llama-bench run."""
    cmd = [exe, "-m", model, "-t", str(threads), "-r", str(reps), "-o", "json", "-d", ",".join(map(str, depth)),
           "-p", ",".join(str(p) for p in prompt) if prompt else "0", "-n", str(gen),
           "-ctk", CACHE_TYPES[ctype][1], "-ctv", CACHE_TYPES[ctype][1], "-fa", llama_fa(ctype, fa)]
    out = {}
    for r in json.loads(run(cmd)):
        if r["n_prompt"] == 0 and r["n_gen"] == 0:
            continue
        out[(r["n_prompt"], r["n_gen"], r.get("n_depth", 0))] = statistics.median(r["samples_ns"]) / 1e9
        out["cpu"] = r.get("cpu_info", "?")
    return out


def sdnpu_cache_args(ctype):
    return ["--cache-type-k", CACHE_TYPES[ctype][0], "--cache-type-v", CACHE_TYPES[ctype][0]]


def sdnpu_curve(exe, model, threads, reps, rows, depth, ctype):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run([exe, "bench-verify", "--model", model, "--rows", ",".join(map(str, rows)), "--context", str(depth),
             "--threads", str(threads), "--reps", str(reps), "--json", f.name] + sdnpu_cache_args(ctype), stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))
    return dict(zip(r["rows"], r["ms"])), r["kernel"]


def sdnpu_model(exe, model, threads, prompt, gen, ctype):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run([exe, "bench-model", "--model", model, "--threads", str(threads), "--prompt-tokens", str(prompt),
             "--max-tokens", str(gen), "--reps", "1", "--table-only", "--json", f.name] + sdnpu_cache_args(ctype),
            stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))[0]
    return r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r.get("kernel", "?")


def int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--sdnpu", default="build/sdnpu", help="the sdnpu program (default build/sdnpu)")
    ap.add_argument("--llama-bench", required=True, help="path of a llama-bench binary built on this machine")
    ap.add_argument("--model", required=True, help="the GGUF file both programs load")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--rows", default="1,2,4,8,16,32,64", help="verify-step rows of the curve (each 1..64)")
    ap.add_argument("--context", type=int, default=256, help="context depth of the curve when --depths is not given (default 256)")
    ap.add_argument("--depths", help="context depths of the curve, comma-separated (default: --context); "
                    "sdnpu bench-verify takes at most 16384")
    ap.add_argument("--prompt", type=int, default=256, help="prefill size when --prompts is not given (default 256)")
    ap.add_argument("--prompts", help="prefill sizes, comma-separated (default: --prompt); decode is measured after each "
                    "(sdnpu bench-model takes 8..8192)")
    ap.add_argument("--gen", type=int, default=64, help="decode steps after each prompt (default 64)")
    ap.add_argument("--cache-types", default="f16", help="KV cache types, comma-separated: f16, q8 (default f16); "
                    "llama.cpp gets f16, q8_0 (llama-bench has no f32 cache)")
    ap.add_argument("--llama-fa", default="1", choices=("1", "0", "auto"),
                    help="llama-bench -fa for the f16 cache (default 1; q8 always gets 1)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds (each program medians 3 runs per round)")
    ap.add_argument("--no-curve", action="store_true", help="skip the verify-step curve")
    ap.add_argument("--no-speed", action="store_true", help="skip prefill and decode")
    ap.add_argument("--json", help="write the medians here")
    a = ap.parse_args()
    for path, what in ((a.sdnpu, "--sdnpu"), (a.llama_bench, "--llama-bench"), (a.model, "--model")):
        if not os.path.isfile(path):
            ap.error("%s: no such file: %s" % (what, path))
    threads = int_list(a.threads)
    rows = int_list(a.rows)
    depths = int_list(a.depths) if a.depths else [a.context]
    prompts = int_list(a.prompts) if a.prompts else [a.prompt]
    ctypes = [c.strip() for c in a.cache_types.split(",") if c.strip()]
    for c in ctypes:
        if c == "f32":
            ap.error("--cache-types: llama-bench has no f32 KV cache (its -ctk takes f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                     "iq4_nl); measure sdnpu's f32 cache with bench-verify and bench-model alone")
        if c not in CACHE_TYPES:
            ap.error("--cache-types: unknown type %r (f16, q8)" % c)
    ctypes = [{"q8_0": "q8"}.get(c, c) for c in ctypes]
    if any(not 1 <= r <= 64 for r in rows):
        ap.error("--rows: each 1..64")
    if any(not 1 <= d <= 16384 for d in depths):
        ap.error("--depths: each 1..16384 (sdnpu bench-verify's limit)")
    if any(not 8 <= p <= 8192 for p in prompts):
        ap.error("--prompts: each 8..8192 (sdnpu bench-model's limit)")

    load0, ncpu = os.getloadavg(), os.cpu_count() or 1
    if load0[0] > 0.5 * ncpu:
        print("warning: load average %.2f on %d CPUs: other processes compete for the cores; llama.cpp's OpenMP threads "
              "spin-wait and lose far more than sdnpu when preempted, so these timings say little" % (load0[0], ncpu))
    # samples, keyed (cache type, threads, depth, rows) for the curve, (cache type, threads, prompt) for speed
    cs, cl, ps, pl, ds, dl = {}, {}, {}, {}, {}, {}
    kernel, cpu = "?", "?"
    for rep in range(a.reps):
        for ct in ctypes:
            for t in threads:
                k = 0  # alternates which program goes first, within the round too
                if not a.no_curve:
                    for d in depths:
                        for first in ((0, 1) if (rep + k) % 2 == 0 else (1, 0)):
                            if first == 0:
                                c, kernel = sdnpu_curve(a.sdnpu, a.model, t, 3, rows, d, ct)
                                for r in rows:
                                    cs.setdefault((ct, t, d, r), []).append(c[r])
                            else:
                                c = llama_bench(a.llama_bench, a.model, t, 3, rows, 0, [d], ct, a.llama_fa)
                                cpu = c["cpu"]
                                for r in rows:
                                    cl.setdefault((ct, t, d, r), []).append(c[(r, 0, d)] * 1e3)
                        k += 1
                if not a.no_speed:
                    for pr in prompts:
                        for first in ((0, 1) if (rep + k) % 2 == 0 else (1, 0)):
                            if first == 0:
                                p, dd, kernel = sdnpu_model(a.sdnpu, a.model, t, pr, a.gen, ct)
                                ps.setdefault((ct, t, pr), []).append(p)
                                ds.setdefault((ct, t, pr), []).append(dd)
                            else:
                                p = llama_bench(a.llama_bench, a.model, t, 3, [pr], 0, [0], ct, a.llama_fa)
                                dd = llama_bench(a.llama_bench, a.model, t, 3, [], a.gen, [pr], ct, a.llama_fa)
                                cpu = dd["cpu"]
                                pl.setdefault((ct, t, pr), []).append(pr / p[(pr, 0, 0)])
                                dl.setdefault((ct, t, pr), []).append(a.gen / dd[(0, a.gen, pr)])
                        k += 1
    med = statistics.median
    out = {"model": os.path.basename(a.model), "sdnpu_kernel": kernel, "cpu": cpu, "context": depths[0], "depths": depths,
           "prompts": prompts, "gen": a.gen, "cache_types": ctypes,
           "llama_flash_attn": {ct: llama_fa(ct, a.llama_fa) for ct in ctypes}, "reps": a.reps,
           "load_average_start_end": [load0, os.getloadavg()], "curve": [], "speed": []}
    print("model %s, sdnpu kernel %s, CPU %s, %d interleaved rounds (medians)" % (out["model"], kernel, cpu, a.reps))
    for ct in ctypes:
        print("\n== KV cache %s (sdnpu -ctk %s -ctv %s, llama.cpp -ctk %s -ctv %s -fa %s)"
              % (ct, CACHE_TYPES[ct][0], CACHE_TYPES[ct][0], CACHE_TYPES[ct][1], CACHE_TYPES[ct][1], llama_fa(ct, a.llama_fa)))
        if not a.no_curve:
            print("verify step after D tokens: ms (T(r)/T(1)); speedup = llama.cpp ms / sdnpu ms")
            print("%4s %6s %4s %18s %18s %8s" % ("thr", "depth", "rows", "sdnpu", "llama.cpp", "speedup"))
            for t in threads:
                for d in depths:
                    s1, l1 = med(cs[(ct, t, d, rows[0])]), med(cl[(ct, t, d, rows[0])])
                    for r in rows:
                        s, l = med(cs[(ct, t, d, r)]), med(cl[(ct, t, d, r)])
                        print("%4d %6d %4d %9.2f (%5.2fx) %9.2f (%5.2fx) %7.2fx" % (t, d, r, s, s / s1, l, l / l1, l / s))
                        out["curve"].append({"cache_type": ct, "threads": t, "depth": d, "rows": r, "sdnpu_ms": s, "llama_ms": l})
        if not a.no_speed:
            print("prefill (P tokens) and decode (%d steps after P tokens), tok/s; ratio = sdnpu / llama.cpp" % a.gen)
            print("%4s %6s %10s %10s %7s %10s %10s %7s"
                  % ("thr", "P", "pp sdnpu", "llama.cpp", "ratio", "tg sdnpu", "llama.cpp", "ratio"))
            for t in threads:
                for pr in prompts:
                    p1, p2, d1, d2 = med(ps[(ct, t, pr)]), med(pl[(ct, t, pr)]), med(ds[(ct, t, pr)]), med(dl[(ct, t, pr)])
                    print("%4d %6d %10.1f %10.1f %6.2fx %10.1f %10.1f %6.2fx" % (t, pr, p1, p2, p1 / p2, d1, d2, d1 / d2))
                    out["speed"].append({"cache_type": ct, "threads": t, "prompt": pr, "sdnpu_pp": p1, "llama_pp": p2,
                                         "sdnpu_tg": d1, "llama_tg": d2})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
