#!/usr/bin/env python3
"""bench_prefill_matmul.py - prefill speed of sdnpu's two prefill-matmul choices, interleaved:
`--prefill-matmul auto` (the int8 batch kernels for the types where they beat SGEMM) against
`sgemm` (OpenBLAS SGEMM on dequantized weights), on SmolLM2 (pulled) and the Qwen2.5-0.5B
shape in several types (make-model, cached by bench-model), on the best kernel path and on
avx2. Each round runs `sdnpu bench-model --table-only --threads 1,2 --reps 3` once per setting
(the order alternates by round); prints the median over 3 rounds of each setting's median
prefill tok/s, as a Markdown table.

  python3 scripts/bench_prefill_matmul.py [--sdnpu build/sdnpu] [--rounds 3]
"""
import argparse
import json
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--sdnpu", default="build/sdnpu")
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()
exe = a.sdnpu
rounds = a.rounds
cases = [("SmolLM2-135M-Instruct Q4_1", ["--model", "smollm2-135m-instruct"], None)]
for t in ["Q8_0", "Q4_0", "Q4_1", "Q4_K_M", "Q5_0", "F16"]:
    cases.append(("Qwen2.5-0.5B shape " + t, ["--shape", "qwen2.5-0.5b", "--types", t], None))
cases.append(("SmolLM2-135M-Instruct Q4_1, path avx2", ["--model", "smollm2-135m-instruct"], "avx2"))
cases.append(("Qwen2.5-0.5B shape Q8_0, path avx2", ["--shape", "qwen2.5-0.5b", "--types", "Q8_0"], "avx2"))
print("| model | threads | prefill tok/s auto | prefill tok/s sgemm | auto / sgemm |")
print("| --- | --- | --- | --- | --- |")
for name, args, kp in cases:
    res = {}
    for r in range(rounds):
        for pm in (["auto", "sgemm"] if r % 2 == 0 else ["sgemm", "auto"]):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                cmd = [exe] + (["--kernel", kp] if kp else []) + ["bench-model"] + args + ["--threads", "1,2", "--reps", "3", "--max-tokens", "4",
                       "--table-only", "--prefill-matmul", pm, "--json", f.name]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for e in json.load(open(f.name)):
                    res.setdefault((e["threads"], pm), []).append(e["prefill_tokens_per_s"])
    for th in (1, 2):
        a = statistics.median(res[(th, "auto")]); s = statistics.median(res[(th, "sgemm")])
        print("| %s | %d | %.0f | %.0f | %.2fx |" % (name, th, a, s, a / s), flush=True)
