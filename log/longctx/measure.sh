#!/bin/bash
cd /work/main
M=/root/.cache/sdnpu/models/SmolLM2-135M-Instruct.Q4_1.gguf
R=/work/r2
S=/work/main/build/sdnpu
log() { echo "$(date +%T) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/times.log; }
log start-llamabench
python3 scripts/reference/bench_vs_llamabench.py --sdnpu $S --llama-bench /work/llama.cpp/build/bin/llama-bench \
  --model $M --threads 2 --rows 1,16 --depths 256,2048,4096,8192 --prompts 256,4096 --gen 64 --cache-types f16,q8 --llama-fa 0 --reps 1 \
  --json $R/bench_vs_llamabench_depths.json > $R/bench_vs_llamabench_depths.txt 2>&1
log start-f32
for rep in 1 2 3; do
  for d in 256 2048 4096 8192; do
    $S bench-verify --model $M --rows 1,16 --context $d --threads 2 --reps 5 --json $R/bv-f32-$d-r$rep.json --cache-type-k f32 --cache-type-v f32 > $R/bv-f32-$d-r$rep.txt 2>&1
  done
  for p in 256 4096; do
    $S bench-model --model $M --threads 2 --prompt-tokens $p --max-tokens 64 --reps 1 --table-only --json $R/bm-f32-$p-r$rep.json --cache-type-k f32 --cache-type-v f32 > $R/bm-f32-$p-r$rep.txt 2>&1
  done
done
log start-benchlongdoc
$S bench --model $M --dataset /work/shared/datasets/longdoc/longdoc.jsonl --methods sdnpu --max-tokens 128 --threads 2 --ctx 8192 \
  --json $R/bench-longdoc-8192.json > $R/bench-longdoc-8192.txt 2>&1
log start-llamaserver
python3 scripts/reference/bench_vs_llamaserver.py --sdnpu $S --llama-server /work/llama.cpp/build/bin/llama-server \
  --model $M --data /work/shared/datasets/longdoc/longdoc.jsonl --threads 2 --max-tokens 128 --cache-type f16 --llama-fa off --limit 8 \
  --spec-types ngram-simple,ngram-map-k,ngram-mod --llama-source kainlan/llama.cpp-intel-optimizations@dc02e1f83db4d956e6df97b7fd1945968f1f6e60 \
  --log-dir $R/longdoc_logs --json $R/longdoc_vs_llamaserver_f16.json > $R/longdoc_vs_llamaserver_f16.txt 2>&1
log done
