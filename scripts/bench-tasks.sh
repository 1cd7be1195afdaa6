#!/usr/bin/env bash
# scripts/bench-tasks.sh [OUT] - the live benchmark of SmolLM2-135M-Instruct on the four
# real tasks, the ablation of sdnpu's drafting parts (the paper's variants beside today's
# rules, history on and off) and the projection to larger models, every figure with its
# baseline measured in the same run. The "Live on the real tasks" tables of docs/results.md come from it.
#
#   LIMIT      requests per task (default 20; the task files hold 80 / 80 / 199 / 198)
#   THREADS    worker threads (default 2)
#   BUDGETS    draft budgets of the main run (default "default,1,2,4": the engine's rule and
#              fixed caps; each method's best is reported after the table)
#   PARTS      which parts to run (default "projection main ablation")
#
# Needs ../shared/datasets. The peer row (llama.cpp's prompt lookup) is
# scripts/reference/peer_pld.py (a Python venv with llama-cpp-python; docs/peer.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
S="${SDNPU:-$root/build/sdnpu}"
D="${SDN_DATASETS:-$root/../shared/datasets}"
OUT="${1:-$root/build/bench-tasks}"
LIMIT="${LIMIT:-20}"
THREADS="${THREADS:-2}"
BUDGETS="${BUDGETS:-default,1,2,4}"
PARTS="${PARTS:-projection main ablation}"
M=smollm2-135m-instruct
[ -x "$S" ] || { echo "bench-tasks: $S not built (run ./sdnpu build or cmake first)" >&2; exit 1; }
[ -d "$D" ] || { echo "bench-tasks: datasets not found at $D (set SDN_DATASETS)" >&2; exit 1; }
mkdir -p "$OUT"
sets=(--dataset "$D/summary/summary_specbench.jsonl" --dataset "$D/rag/rag_specbench.jsonl"
      --dataset "$D/ui/ui_droidtask.jsonl" --dataset "$D/tweet/tweet_convai2_substitute.jsonl")
common=(--model "$M" "${sets[@]}" --limit "$LIMIT" --threads "$THREADS" --max-tokens 128 --results-db "$OUT/results.sqlite")
has() { [[ " $PARTS " == *" $1 "* ]]; }

projs=()
if has projection; then
  # verify-cost curves of larger shapes on this machine (random weights: speed only); the main
  # run projects its live steps onto them (bench --project)
  for shape in qwen2.5-0.5b qwen2.5-1.5b llama-3.2-1b; do
    "$S" bench-verify --shapes "$shape" --types Q8_0 --threads "$THREADS" --cost-out "$OUT/cost-$shape.json" \
      | tee "$OUT/cost-$shape.txt"
    projs+=(--project "$OUT/cost-$shape.json")
  done
fi

if has main; then
  # every method at every budget; history on (earlier answers of the same task feed retrieval)
  rm -f "$OUT/history-main.sqlite"
  "$S" bench "${common[@]}" --budgets "$BUDGETS" --history "$OUT/history-main.sqlite" --out "$OUT/main" --plot \
    "${projs[@]}" | tee "$OUT/main.txt"
fi

if has ablation; then
  # the paper's rules beside today's (engine default budget), and history off
  rm -f "$OUT/history-today.sqlite" "$OUT/history-paper.sqlite" "$OUT/history-weigh.sqlite"
  # defaults: the paper's calibration (sdnpu.weigh=0) and sdnpu's reuse lifetime (reuse.rule=0);
  # the other variant of each is run beside them
  "$S" bench "${common[@]}" --methods sam+tree,sam+cal,sam+reuse,sam+model,sdnpu --history "$OUT/history-today.sqlite" \
    --out "$OUT/today" | tee "$OUT/today.txt"
  "$S" bench "${common[@]}" --methods sam+reuse,sdnpu --param reuse.rule=1 --history "$OUT/history-paper.sqlite" \
    --out "$OUT/reuse-paper" | tee "$OUT/reuse-paper.txt"
  "$S" bench "${common[@]}" --methods sam+cal,sdnpu --param sdnpu.weigh=1 --history "$OUT/history-weigh.sqlite" \
    --out "$OUT/weigh-on" | tee "$OUT/weigh-on.txt"
  "$S" bench "${common[@]}" --methods sdnpu --out "$OUT/no-history" | tee "$OUT/no-history.txt"
fi
echo "bench-tasks: results in $OUT"
