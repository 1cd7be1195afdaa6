#!/usr/bin/env python3
"""bench_vs_llamacpp.py - prefill and decode speed of sdnpu and llama.cpp on the same GGUF
file, same machine, same run, interleaved.

For each repetition and thread count (1 and 2 by default) it runs `sdnpu bench-model --model M
--threads T --prompt-tokens P --max-tokens G --reps 1 --table-only --json` (sdnpu's own
prefill of P tokens and G single-token decode steps, after a warm-up pass) and then the same measurement with llama.cpp
through llama-cpp-python (warm: a model loaded once per thread count; eval of P tokens in one
batch, then G single-token evals). The order of the two alternates per repetition. Prints the
median tok/s of each and the ratio sdnpu / llama.cpp.

  /root/refvenv/bin/python scripts/reference/bench_vs_llamacpp.py \\
      --sdnpu build/sdnpu --model "$(./sdnpu pull smollm2-135m-instruct | tail -1)" --reps 5
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time

import llama_cpp


def sdnpu_once(exe, model, threads, prompt, gen, prefill_matmul):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        extra = ["--prefill-matmul", prefill_matmul] if prefill_matmul else []
        subprocess.run([exe, "bench-model", "--model", model, "--threads", str(threads), "--prompt-tokens", str(prompt), "--max-tokens",
                        str(gen), "--reps", "1", "--table-only", "--json", f.name] + extra, check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))[0]
    return r["prefill_tokens_per_s"], r["decode_tokens_per_s"], "%s, prefill matmul %s" % (r["kernel"], r.get("prefill_matmul", "?"))


def llama_once(llm, tokens, prompt, gen):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(tokens[:prompt])
    tp = time.perf_counter() - t0
    t0 = time.perf_counter()
    for g in range(gen):
        llm.eval([tokens[prompt + g]])
    td = time.perf_counter() - t0
    return prompt / tp, gen / td


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdnpu", default="build/sdnpu")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prefill-matmul", default=None, help="sdnpu's --prefill-matmul (default: its own default, auto)")
    a = ap.parse_args()
    rnd = random.Random(7)
    llms, res, kernel = {}, {}, "?"
    threads = [int(t) for t in a.threads.split(",")]
    for th in threads:
        llms[th] = llama_cpp.Llama(model_path=a.model, n_ctx=a.prompt + a.gen + 16, n_batch=max(512, a.prompt), n_threads=th,
                                   n_threads_batch=th, verbose=False)
        vocab = llms[th].n_vocab()
        res[th] = {"s_pp": [], "s_tg": [], "l_pp": [], "l_tg": []}
    tokens = [rnd.randrange(3, vocab) for _ in range(a.prompt + a.gen)]
    for th in threads:  # warm-up of llama.cpp (page faults, thread start)
        llama_once(llms[th], tokens, a.prompt, 4)
    for rep in range(a.reps):
        for th in threads:
            order = ["sdnpu", "llama"] if rep % 2 == 0 else ["llama", "sdnpu"]
            for who in order:
                if who == "sdnpu":
                    pp, tg, kernel = sdnpu_once(a.sdnpu, a.model, th, a.prompt, a.gen, a.prefill_matmul)
                    res[th]["s_pp"].append(pp)
                    res[th]["s_tg"].append(tg)
                else:
                    pp, tg = llama_once(llms[th], tokens, a.prompt, a.gen)
                    res[th]["l_pp"].append(pp)
                    res[th]["l_tg"].append(tg)
    print("model %s; prefill %d tokens, decode %d tokens; median of %d interleaved repetitions" % (os.path.basename(a.model), a.prompt, a.gen, a.reps))
    print("sdnpu kernels: %s; llama.cpp: llama-cpp-python %s (%s)" % (kernel, llama_cpp.__version__, llama_cpp.llama_print_system_info().decode().strip()))
    print("| threads | sdnpu prefill tok/s | llama.cpp prefill tok/s | ratio | sdnpu decode tok/s | llama.cpp decode tok/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for th in threads:
        m = {k: statistics.median(v) for k, v in res[th].items()}
        print("| %d | %.0f | %.0f | %.2fx | %.1f | %.1f | %.2fx |" % (th, m["s_pp"], m["l_pp"], m["s_pp"] / m["l_pp"], m["s_tg"], m["l_tg"],
                                                                   m["s_tg"] / m["l_tg"]))


if __name__ == "__main__":
    main()
