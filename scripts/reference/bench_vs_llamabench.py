#!/usr/bin/env python3
"""bench_vs_llamabench.py - sdnpu against llama.cpp's own llama-bench (built from source on the
same machine) on the same GGUF file, in the same run, interleaved: the verify-step cost curve,
prefill and decode.

For each repetition and thread count (the order of the two programs alternates per repetition):
  curve    sdnpu bench-verify --model M --rows R --context D --threads T --json OUT
           llama-bench -m M -p R -n 0 -d D -t T -o json   (pp of R tokens after D tokens of
           context: one forward pass of R rows, llama.cpp's cost of an R-row verify step)
  prefill  sdnpu bench-model --prompt-tokens P      vs llama-bench -p P -n 0 -d 0
  decode   sdnpu bench-model --max-tokens G (G one-token steps after the P-token prompt)
           vs llama-bench -p 0 -n G -d P             (G one-token steps after P tokens)
Prints median ms per step (curve) and tok/s (prefill, decode) of each program and the ratios;
--json writes them all. llama-bench is not part of sdnpu and is never needed by its tests: build
it yourself (cmake, GGML_NATIVE=ON, target llama-bench) and pass its path.

  python3 scripts/reference/bench_vs_llamabench.py --sdnpu build/sdnpu \\
      --llama-bench ~/llama.cpp/build/bin/llama-bench --model FILE --reps 3
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run_json(cmd):
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return json.loads(p.stdout)


def llama_bench(exe, model, threads, reps, prompt, gen, depth):
    """{(n_prompt, n_gen): median seconds of one test} from one llama-bench run."""
    cmd = [exe, "-m", model, "-t", str(threads), "-r", str(reps), "-o", "json", "-d", str(depth),
           "-p", ",".join(str(p) for p in prompt) if prompt else "0", "-n", str(gen)]
    out = {}
    for r in run_json(cmd):
        if r["n_prompt"] == 0 and r["n_gen"] == 0:
            continue
        out[(r["n_prompt"], r["n_gen"])] = statistics.median(r["samples_ns"]) / 1e9
        out["cpu"] = r.get("cpu_info", "?")
    return out


def sdnpu_curve(exe, model, threads, reps, rows, depth):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([exe, "bench-verify", "--model", model, "--rows", ",".join(map(str, rows)), "--context", str(depth),
                        "--threads", str(threads), "--reps", str(reps), "--json", f.name], check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))
    return dict(zip(r["rows"], r["ms"])), r["kernel"]


def sdnpu_model(exe, model, threads, prompt, gen):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([exe, "bench-model", "--model", model, "--threads", str(threads), "--prompt-tokens", str(prompt),
                        "--max-tokens", str(gen), "--reps", "1", "--table-only", "--json", f.name], check=True,
                       stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))[0]
    return r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r.get("kernel", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdnpu", default="build/sdnpu")
    ap.add_argument("--llama-bench", required=True, help="path of a llama-bench binary built on this machine")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rows", default="1,2,4,8,16,32,64")
    ap.add_argument("--context", type=int, default=256, help="context depth of the curve (default 256)")
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds (each program medians 3 runs per round)")
    ap.add_argument("--no-curve", action="store_true")
    ap.add_argument("--no-speed", action="store_true", help="skip prefill and decode")
    ap.add_argument("--json", help="write the medians here")
    a = ap.parse_args()
    for path, what in ((a.sdnpu, "--sdnpu"), (a.llama_bench, "--llama-bench"), (a.model, "--model")):
        if not os.path.isfile(path):
            ap.error("%s: no such file: %s" % (what, path))
    threads = [int(t) for t in a.threads.split(",")]
    rows = [int(r) for r in a.rows.split(",")]
    cs, cl, ps, pl, ds, dl = {}, {}, {}, {}, {}, {}
    kernel, cpu = "?", "?"
    for rep in range(a.reps):
        for t in threads:
            for first in ((0, 1) if rep % 2 == 0 else (1, 0)):
                if first == 0:
                    if not a.no_curve:
                        c, kernel = sdnpu_curve(a.sdnpu, a.model, t, 3, rows, a.context)
                        for r in rows:
                            cs.setdefault((t, r), []).append(c[r])
                    if not a.no_speed:
                        p, d, kernel = sdnpu_model(a.sdnpu, a.model, t, a.prompt, a.gen)
                        ps.setdefault(t, []).append(p)
                        ds.setdefault(t, []).append(d)
                else:
                    if not a.no_curve:
                        c = llama_bench(a.llama_bench, a.model, t, 3, rows, 0, a.context)
                        cpu = c["cpu"]
                        for r in rows:
                            cl.setdefault((t, r), []).append(c[(r, 0)] * 1e3)
                    if not a.no_speed:
                        p = llama_bench(a.llama_bench, a.model, t, 3, [a.prompt], 0, 0)
                        d = llama_bench(a.llama_bench, a.model, t, 3, [], a.gen, a.prompt)
                        cpu = d["cpu"]
                        pl.setdefault(t, []).append(a.prompt / p[(a.prompt, 0)])
                        dl.setdefault(t, []).append(a.gen / d[(0, a.gen)])
    med = statistics.median
    out = {"model": os.path.basename(a.model), "sdnpu_kernel": kernel, "cpu": cpu, "context": a.context, "reps": a.reps,
           "curve": [], "speed": []}
    print("model %s, sdnpu kernel %s, CPU %s, %d interleaved rounds (medians)" % (out["model"], kernel, cpu, a.reps))
    if not a.no_curve:
        print("verify step after %d tokens: ms (T(r)/T(1))" % a.context)
        print("%4s %4s %18s %18s %8s" % ("thr", "rows", "sdnpu", "llama.cpp", "speedup"))
        for t in threads:
            s1, l1 = med(cs[(t, rows[0])]), med(cl[(t, rows[0])])
            for r in rows:
                s, l = med(cs[(t, r)]), med(cl[(t, r)])
                print("%4d %4d %9.2f (%5.2fx) %9.2f (%5.2fx) %7.2fx" % (t, r, s, s / s1, l, l / l1, l / s))
                out["curve"].append({"threads": t, "rows": r, "sdnpu_ms": s, "llama_ms": l})
    if not a.no_speed:
        print("prefill (%d tokens) and decode (%d steps after %d tokens), tok/s" % (a.prompt, a.gen, a.prompt))
        print("%4s %10s %10s %7s %10s %10s %7s" % ("thr", "pp sdnpu", "llama.cpp", "ratio", "tg sdnpu", "llama.cpp", "ratio"))
        for t in threads:
            p1, p2, d1, d2 = med(ps[t]), med(pl[t]), med(ds[t]), med(dl[t])
            print("%4d %10.1f %10.1f %6.2fx %10.1f %10.1f %6.2fx" % (t, p1, p2, p1 / p2, d1, d2, d1 / d2))
            out["speed"].append({"threads": t, "sdnpu_pp": p1, "llama_pp": p2, "sdnpu_tg": d1, "llama_tg": d2})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
