#!/usr/bin/env python3
"""llamacpp_self_agreement.py - how well llama.cpp agrees with itself: its one-token-per-step
logits recorded in the golden file (scripts/reference/smollm2_golden.py) against its own
logits for the same positions evaluated in one batch (prompt + answer), same settings (F32 KV
cache, no flash attention). The bound any other engine's teacher-forced agreement with the
golden file is up against (docs/results.md, tests/test_smollm2.c).

  OMP_WAIT_POLICY=passive /root/refvenv/bin/python scripts/reference/llamacpp_self_agreement.py \\
      --model "$(./sdnpu pull smollm2-135m-instruct | tail -1)" --golden tests/golden/smollm2/llamacpp.jsonl --requests 16
"""
import argparse
import json

import llama_cpp
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--requests", type=int, default=16)
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.golden, encoding="utf-8")]
    reqs = [r for r in rows if r["kind"] == "request"][: a.requests]
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=4096, n_batch=512, n_threads=1, verbose=False, type_k=0, type_v=0,
                          flash_attn=False, logits_all=True)
    agree = total = 0
    worst = 0.0
    for q in reqs:
        seq = q["prompt_ids"] + q["answer_ids"]
        llm.reset()
        llm.eval(seq)
        np_ = len(q["prompt_ids"])
        for p, (ti, tl) in enumerate(zip(q["top_ids"], q["top_logits"])):
            l = np.array(llm.scores[np_ - 1 + p])
            total += 1
            agree += int(np.argmax(l)) == ti[0]
            worst = max(worst, max(abs(float(l[t]) - v) for t, v in zip(ti, tl)))
    print("llama.cpp batched vs its own one-token golden: top-1 agreement %d/%d = %.2f%%, largest logit difference %.3f"
          % (agree, total, 100.0 * agree / total, worst))


if __name__ == "__main__":
    main()
