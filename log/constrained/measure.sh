#!/bin/bash
# The constrained-decoding measurements (docs/results.md "Answers in a schema", docs/constrained.md): SmolLM2-135M-Instruct
# on the DroidTask ui requests with the action schema (datasets/schemas/ui_action.json), one after the
# other on a quiet machine, 2 threads:
#   1. sdnpu bench: constrained plain vs constrained sdnpu with forced-text drafting
#   2. the same without forced-text drafting (--param grammar.forced=0), and with forced text
#      but without drafting the way out of an element (--param grammar.exits=0)
#   3. unconstrained plain vs sdnpu (no schema)
#   4. 1 with a history store (each answer stored in the ui group, later requests draft from it)
#   5. a free-text answer: 12 RAG requests with datasets/schemas/rag_answer.json (the answer string
#      and a confidence enum), constrained plain vs constrained sdnpu
#   6. sdnpu serve vs llama-server (built from source: LLAMA_SERVER=path), both with the schema
#      as response_format json_schema, llama-server plain and with three n-gram speculative types
# Outputs go to $OUT (default log/constrained); answers are validated with jsonschema.
set -euo pipefail
cd "$(dirname "$0")/../.."
M=${MODEL:-$HOME/.cache/sdnpu/models/SmolLM2-135M-Instruct.Q4_1.gguf}
D=${DATA:-../shared/datasets/ui/ui_droidtask.jsonl}
S=${SDNPU:-build/sdnpu}
OUT=${OUT:-log/constrained}
N=${LIMIT:-40}
schema=datasets/schemas/ui_action.json
common=(--model "$M" --dataset "$D" --tasks ui --limit "$N" --max-tokens 64 --threads 2 --ctx 4096 --methods sdnpu)
$S bench "${common[@]}" --json-schema $schema --answers "$OUT/answers-constrained.jsonl" --json "$OUT/bench-constrained.json" \
  > "$OUT/bench-constrained.txt" 2>&1
python3 - "$schema" "$OUT/answers-constrained.jsonl" <<'PY' | tee -a "$OUT/bench-constrained.txt"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
rows = [json.loads(l) for l in open(sys.argv[2])]
ok = 0
for r in rows:
    try:
        jsonschema.validate(json.loads(r["answer"]), schema); ok += 1
    except Exception as e:
        print("invalid:", r["id"], e)
print("jsonschema: %d of %d constrained answers valid" % (ok, len(rows)))
PY
$S bench "${common[@]}" --json-schema $schema --param grammar.forced=0 --json "$OUT/bench-constrained-noforced.json" \
  > "$OUT/bench-constrained-noforced.txt" 2>&1
$S bench "${common[@]}" --json-schema $schema --param grammar.exits=0 --json "$OUT/bench-constrained-noexits.json" \
  > "$OUT/bench-constrained-noexits.txt" 2>&1
$S bench "${common[@]}" --answers "$OUT/answers-unconstrained.jsonl" --json "$OUT/bench-unconstrained.json" \
  > "$OUT/bench-unconstrained.txt" 2>&1
rm -f "$OUT/history.sqlite"
$S bench "${common[@]}" --json-schema $schema --history "$OUT/history.sqlite" --json "$OUT/bench-constrained-history.json" \
  > "$OUT/bench-constrained-history.txt" 2>&1
rm -f "$OUT/history.sqlite"
$S bench --model "$M" --dataset "${RAG:-../shared/datasets/rag/rag_specbench.jsonl}" --tasks rag --limit 12 --max-tokens 96 --threads 2 \
  --ctx 4096 --methods sdnpu --json-schema datasets/schemas/rag_answer.json --json "$OUT/bench-rag-constrained.json" \
  > "$OUT/bench-rag-constrained.txt" 2>&1
if [ -n "${LLAMA_SERVER:-}" ]; then
  python3 scripts/reference/bench_vs_llamaserver.py --sdnpu "$S" --llama-server "$LLAMA_SERVER" --model "$M" --data "$D" \
    --tasks ui --limit "${LLAMA_LIMIT:-24}" --ctx 4096 --max-tokens 64 --threads 2 --json-schema $schema --sdnpu-noforced \
    --spec-types ngram-simple,ngram-map-k,ngram-mod --llama-fa off --llama-source "${LLAMA_SOURCE:-}" \
    --json "$OUT/vs-llamaserver.json" > "$OUT/vs-llamaserver.txt" 2>&1
fi
